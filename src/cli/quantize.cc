// `shrike quantize IN -o OUT --type T [--method rtn|awq|gptq] [--calib F] [--keep PATTERN=TYPE]`
// and `shrike quantize IN --scan --type T --calib F`: the sensitivity scan and a --keep recipe;
// `shrike quantize IN --calib F --coverage TRAFFIC`: how well F's activations cover TRAFFIC's.
#include "quant/quantize.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_files.h"
#include "core/file_buffer.h"
#include "core/jsonl.h"
#include "data/example.h"
#include "model/model.h"
#include "quant/calibration.h"
#include "quant/coverage.h"
#include "quant/grid.h"
#include "quant/kl_eval.h"
#include "quant/sensitivity.h"
#include "task/task_training.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint.h"

namespace shrike::cli {
namespace {

struct QuantizeArgs {
  std::string in, out, type = "q8_0", method = "rtn", calib, keep_type, coverage;
  std::vector<std::string> keep;
  int64_t calib_limit = 256, ctx = 256, max_recipe = 8;
  double target_share = 0.5;
  bool scan = false;
  int threads = 0;
};

// Whether a JSONL file holds labelled task examples (an "intent" on its first record) rather
// than plain {"text": ...} documents.
bool is_task_file(const std::string& path) {
  if (!path.ends_with(".jsonl")) return false;
  bool task = false;
  for_each_jsonl_object_in_file(
      path, [&](const nlohmann::json& j, const std::string&) { task = j.contains("intent"); }, 1);
  return task;
}

// Calibration sequences: task examples as training encodes them (prompt + answer), or text
// documents cut into windows of ctx tokens; at most `limit` sequences.
std::vector<quant::ScoredSequence> calibration_sequences(const std::string& path,
                                                         const tokenizer::Tokenizer& tok,
                                                         int64_t ctx, int64_t limit) {
  std::vector<quant::ScoredSequence> seqs;
  if (is_task_file(path)) {
    auto examples = data::read_examples(path);
    if (int64_t(examples.size()) > limit) examples.resize(size_t(limit));
    seqs = task::task_sequences(tok, examples);
  } else {
    seqs = quant::text_sequences(tok, quant::read_text_documents(path), ctx);
  }
  if (int64_t(seqs.size()) > limit) seqs.resize(size_t(limit));
  if (seqs.empty()) throw std::invalid_argument(path + ": no calibration sequences");
  return seqs;
}

constexpr const char* kWritableTypes =
    "f32|f16|bf16|q8_0|q4_0|q8_c|q4_g128|fp8|q4_K|q5_K|q6_K|q4_K_M|q5_K_M";

// A type name, or (where `mix` is given) llama.cpp's q4_K_M / q5_K_M mixes.
DType parse_type(const std::string& name, const char* what, quant::Mix* mix = nullptr) {
  std::string base = name;
  if (mix && name.size() > 2 && (name.ends_with("_M") || name.ends_with("_m"))) {
    base = name.substr(0, name.size() - 2);
    const auto t = dtype_from_name(base);
    if (t == DType::Q4_K || t == DType::Q5_K) {
      *mix = quant::Mix::KMedium;
      return *t;
    }
    base = name;
  }
  const auto t = dtype_from_name(base);
  if (!t)
    throw std::invalid_argument(std::string(what) + " '" + name + "' is not a type (" +
                                kWritableTypes + ")");
  if (!dtype_is_writable(*t))
    throw std::invalid_argument(std::string(what) + " '" + name + "': shrike reads " +
                                std::string(dtype_name(*t)) +
                                " but does not write it; use one of " + kWritableTypes);
  return *t;
}

int run_scan(const QuantizeArgs& a, const quant::QuantizeOptions& o, ThreadPool& pool) {
  train::TrainableFile f = train::load_trainable(a.in);
  const tokenizer::Tokenizer tok(f.vocab);
  const int64_t ctx = std::min<int64_t>(a.ctx, f.model->config().context_length);
  const auto calib = calibration_sequences(a.calib, tok, ctx, a.calib_limit);
  std::vector<std::pair<std::string, DType>> types;
  for (const train::ParamTensor& p : f.model->layout()) {
    if (p.is_norm()) continue;
    DType t = o.type;
    for (const quant::KeepRule& k : o.keep)
      if (quant::keep_rule_matches(k, p.name)) t = k.type;
    if (quant::type_fits(t, p.cols)) types.push_back({p.name, t});
  }
  DType keep = DType::F16;
  if (!a.keep_type.empty()) {
    keep = parse_type(a.keep_type, "--keep-type");
  } else if (o.type == DType::Q4_0 || o.type == DType::Q4_G128) {
    keep = DType::Q8_0;
  }
  const auto r =
      quant::scan_sensitivity(*f.model, types, calib, keep, a.target_share, a.max_recipe, pool);
  std::printf("%s", r.format().c_str());
  return 0;
}

// Compares the matrix inputs the calibration set produces with those of traffic (same limit on
// sequences for both), before any quantisation is spent on a set that misses what users send.
int run_coverage(const QuantizeArgs& a, ThreadPool& pool) {
  train::TrainableFile f = train::load_trainable(a.in);
  const tokenizer::Tokenizer tok(f.vocab);
  const int64_t ctx = std::min<int64_t>(a.ctx, f.model->config().context_length);
  quant::CalibrationOptions co;
  co.gram = true;
  const auto stats_of = [&](const std::string& path) {
    std::vector<std::vector<int32_t>> seqs;
    for (auto& s : calibration_sequences(path, tok, ctx, a.calib_limit))
      seqs.push_back(std::move(s.tokens));
    return quant::collect_input_stats(*f.model, seqs, co, pool);
  };
  const auto calib = stats_of(a.calib);
  const auto traffic = stats_of(a.coverage);
  std::printf("calibration %s covering %s:\n%s", a.calib.c_str(), a.coverage.c_str(),
              quant::format_coverage(quant::calibration_coverage(calib, traffic)).c_str());
  return 0;
}

int run_quantize(const QuantizeArgs& a) {
  quant::QuantizeOptions o;
  o.type = parse_type(a.type, "--type", &o.mix);
  if (a.method == "rtn") {
    o.method = quant::Method::Rtn;
  } else if (a.method == "awq") {
    o.method = quant::Method::Awq;
  } else if (a.method == "gptq") {
    o.method = quant::Method::Gptq;
  } else {
    throw std::invalid_argument("--method '" + a.method + "': expected rtn, awq or gptq");
  }
  for (const std::string& k : a.keep) o.keep.push_back(quant::parse_keep_rule(k));
  ThreadPool pool(a.threads > 0 ? a.threads : default_thread_count());
  if (a.scan) {
    if (a.calib.empty()) throw std::invalid_argument("--scan needs --calib");
    return run_scan(a, o, pool);
  }
  if (!a.coverage.empty()) {
    if (a.calib.empty()) throw std::invalid_argument("--coverage needs --calib");
    return run_coverage(a, pool);
  }
  if (a.out.empty())
    throw std::invalid_argument("-o/--output is required (unless --scan or --coverage)");
  if (o.method != quant::Method::Rtn) {
    if (a.calib.empty())
      throw std::invalid_argument("--method " + a.method + " needs --calib FILE");
    // The calibration text goes through the model's own tokenizer.
    train::TrainableFile f = train::load_trainable(a.in);
    const tokenizer::Tokenizer tok(f.vocab);
    const int64_t ctx = std::min<int64_t>(a.ctx, f.model->config().context_length);
    for (auto& s : calibration_sequences(a.calib, tok, ctx, a.calib_limit))
      o.calib.push_back(std::move(s.tokens));
  }
  const GgufInput in(a.in);  // a Hugging Face folder becomes a GGUF first
  const quant::QuantizeReport r = quant::quantize_file(in.path(), a.out, o, pool);
  std::fprintf(stderr, "quantize: %s -> %s (%s, %s)\n%s", a.in.c_str(), a.out.c_str(),
               a.type.c_str(), a.method.c_str(), r.summary().c_str());
  return 0;
}

}  // namespace

Runner add_quantize(CLI::App& app) {
  auto a = std::make_shared<QuantizeArgs>();
  app.add_option(
         "input", a->in,
         "model to quantise: GGUF or Hugging Face folder (full precision for awq/gptq/--scan)")
      ->required();
  app.add_option("-o,--output", a->out, "output GGUF");
  app.add_option("--type", a->type,
                 "weight type: q8_0|q8_c|q4_0|q4_g128|fp8|q4_K|q5_K|q6_K (or f16|bf16|f32), or "
                 "llama.cpp's mixes q4_K_M|q5_K_M");
  app.add_option("--method", a->method, "rtn (round to nearest), awq or gptq");
  app.add_option("--calib", a->calib,
                 "calibration data: task examples (JSONL with intent) or text (.txt, or JSONL "
                 "with \"text\")");
  app.add_option("--calib-limit", a->calib_limit, "calibration sequences used")
      ->check(CLI::PositiveNumber);
  app.add_option("--ctx", a->ctx, "tokens per calibration window of text")
      ->check(CLI::Range(int64_t(2), int64_t(1) << 20));
  app.add_option("--keep", a->keep,
                 "PATTERN=TYPE: matrices whose name matches the glob get TYPE (repeatable)");
  app.add_flag("--scan", a->scan,
               "rank matrices by the KL each causes when quantised alone and propose --keep");
  app.add_option("--coverage", a->coverage,
                 "traffic (same formats as --calib): report how well the calibration set's "
                 "activations cover it, matrix input by matrix input, and write nothing");
  app.add_option("--keep-type", a->keep_type, "--scan: type the recipe holds matrices at");
  app.add_option("--recipe-share", a->target_share,
                 "--scan: share of the summed per-matrix KL the recipe removes")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--recipe-max", a->max_recipe, "--scan: most matrices in the recipe")
      ->check(CLI::NonNegativeNumber);
  app.add_option("-t,--threads", a->threads, "threads (default: all cores)");
  return [a] { return run_quantize(*a); };
}

}  // namespace shrike::cli
