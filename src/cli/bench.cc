// `shrike bench`: prefill and decode tokens/s, and with --roofline how close decode comes to the
// measured memory bandwidth.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/kernel_options.h"
#include "cli/kv_options.h"
#include "cli/model_files.h"
#include "cli/spec_run.h"
#include "constrain/spec.h"
#include "data/example.h"
#include "gguf/gguf.h"
#include "kernels/isa.h"
#include "kv/contiguous_kv.h"
#include "model_bench/model_bench.h"
#include "task/answer_constraint.h"
#include "task/task_definition.h"
#include "task/task_format.h"

namespace shrike::cli {
namespace {

// A model whose weights fit in the last-level cache decodes from cache: its "fraction of memory
// bandwidth" can pass 100% and measures nothing about memory.
std::string llc_warning(const model_bench::ModelBenchResult& r) {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "warning: the weights read per token (%.1f MiB) fit in the last-level cache "
                "(%.0f MiB): decode reads them from cache, so the roofline fraction is not a "
                "memory-bandwidth figure; measure a model larger than the cache",
                double(r.decode_weight_bytes) / (1 << 20), double(r.llc_bytes) / (1 << 20));
  return buf;
}

struct BenchArgs {
  std::string model;
  std::vector<int64_t> prompts{128, 512};
  std::vector<int64_t> batches;
  std::vector<int64_t> verify;
  int64_t verify_context = 128;
  int64_t n = 64;
  int threads = 0, repeats = 3;
  bool roofline = false, json = false, ops = false, bf16_dot = false;
  KvCacheArgs kv_args{"f32", {}};
  kv::KvCacheOptions kv;
  SpecArgs spec;
  std::vector<std::string> spec_prompts;
  std::string spec_task;
  int64_t spec_limit = 50;
  bool spec_schema = false;
  int spec_concurrency = 0;
};

// The constraint serve puts on a task model's answers: the schema of the task it carries.
std::shared_ptr<const constrain::Constraint> task_constraint(const std::string& path,
                                                             int64_t vocab) {
  const auto task = task::task_from_gguf(gguf::GgufFile::open(path));
  if (!task)
    throw std::invalid_argument(path +
                                ": --spec-schema needs a task model (no shrike.task.* keys)");
  const constrain::ConstraintSpec spec = task::task_answer_spec(*task);
  const auto tok = load_tokenizer(path, "", vocab);
  return std::make_shared<const constrain::Constraint>(constrain::compile(spec),
                                                       constrain::TokenVocab::from_tokenizer(*tok));
}

int run_bench(BenchArgs a) {
  resolve_kv_cache_options(a.kv_args, a.kv);
  apply_bf16_dot(a.bf16_dot);
  auto m = model::load_model(a.model);
  if (a.spec.mode != "off") {  // speculative generation against plain, through the engine
    SpecBenchOptions o{a.model, a.spec_prompts, false, a.n, a.threads, a.repeats, a.json, {}, 0};
    if (!a.spec_task.empty()) {  // task prompts, as training and evaluation encode them
      const auto examples = data::read_examples(a.spec_task);
      const task::PromptFormat format = task::prompt_format_of(task::task_of_model(a.model));
      for (size_t i = 0; i < examples.size() && int64_t(i) < a.spec_limit; ++i)
        o.prompts.push_back(format.text(examples[i].text));
      o.bos = true;
    }
    o.concurrency = a.spec_concurrency;
    if (a.spec_schema) o.constraint = task_constraint(a.model, m->config().vocab_size);
    return run_spec_bench(*m, a.spec, o);
  }
  ThreadPool pool(a.threads > 0 ? a.threads : default_thread_count());
  model_bench::ModelBenchOptions opt;
  opt.prompt_lengths = a.prompts;
  opt.decode_tokens = a.n;
  opt.repeats = a.repeats;
  opt.roofline = a.roofline;
  opt.op_profile = a.ops;
  opt.decode_batches = a.batches;
  opt.kv = a.kv;
  opt.verify_tokens = a.verify;
  opt.verify_context = a.verify_context;
  const auto r = model_bench::run_model_bench(*m, pool, opt);

  if (a.json) {
    nlohmann::json j;
    j["model"] = a.model;
    j["threads"] = r.threads;
    j["isa"] = std::string(kernels::isa_name(kernels::active_isa()));
    j["weight_type"] = std::string(dtype_name(m->weights().weight_type()));
    j["parameters"] = m->parameter_count();
    j["decode_weight_bytes"] = r.decode_weight_bytes;
    for (const auto& p : r.prefill)
      j["prefill"].push_back({{"tokens", p.tokens}, {"tok_s", p.tok_per_s}});
    // The headline prefill figure is the longest prompt measured (all are under "prefill").
    j["prefill_tok_s"] = r.prefill.empty() ? 0.0 : r.prefill.back().tok_per_s;
    j["decode_tokens"] = a.n;
    j["decode_tok_s"] = r.decode_tok_per_s;
    j["decode_gb_s"] = r.decode_gb_per_s;
    j["kv_type"] = a.kv.describe();
    j["kv_bytes_per_token"] = r.kv_bytes_per_token;
    for (const auto& b : r.batched)
      j["batched_decode"].push_back({{"batch", b.batch}, {"tok_s", b.tok_per_s}});
    for (const auto& v : r.verify)
      j["verify_steps"].push_back({{"tokens", v.tokens},
                                   {"context", a.verify_context},
                                   {"ms", v.seconds * 1e3},
                                   {"ratio", v.ratio}});
    if (a.ops) {
      j["profiled_step_us"] = r.profiled_step_us;
      for (const auto& o : r.ops)
        j["ops"].push_back({{"op", o.op}, {"us_per_step", o.us_per_step}, {"share", o.share}});
    }
    // Without --roofline the bandwidth is not measured: null rather than a made-up number.
    j["bandwidth_gb_s"] = a.roofline ? nlohmann::json(r.bandwidth_gb_per_s) : nlohmann::json();
    j["roofline_fraction"] = a.roofline ? nlohmann::json(r.roofline_fraction) : nlohmann::json();
    if (a.roofline) {
      j["llc_bytes"] = r.llc_bytes;
      j["probe_bytes"] = r.probe_bytes;
      j["weights_fit_in_llc"] = r.weights_fit_in_llc();
      if (r.weights_fit_in_llc()) std::fprintf(stderr, "%s\n", llc_warning(r).c_str());
    }
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("model: %s\n  %s\n", a.model.c_str(), m->describe().c_str());
  std::printf("threads: %d, kernels: %s\n", r.threads,
              std::string(kernels::isa_name(kernels::active_isa())).c_str());
  for (const auto& p : r.prefill)
    std::printf("prefill %5lld tokens: %9.1f tok/s\n", (long long)p.tokens, p.tok_per_s);
  std::printf("decode  %5lld tokens: %9.1f tok/s  (%.1f GB/s of weights read)\n", (long long)a.n,
              r.decode_tok_per_s, r.decode_gb_per_s);
  std::printf("kv cache: %s, %.1f bytes per position\n", a.kv.describe().c_str(),
              r.kv_bytes_per_token);
  for (const auto& b : r.batched)
    std::printf("decode  batch %3lld: %9.1f tok/s (all sequences together)\n", (long long)b.batch,
                b.tok_per_s);
  for (const auto& v : r.verify)
    std::printf("verify  %3lld tokens after %lld: %8.3f ms  (%.2fx a one-token step)\n",
                (long long)v.tokens, (long long)a.verify_context, v.seconds * 1e3, v.ratio);
  if (a.ops) {
    std::printf(
        "decode step by operation (profiled rounds, each operation timed: %.2f us/step, "
        "medians):\n",
        r.profiled_step_us);
    for (const auto& o : r.ops)
      std::printf("  %-22s %8.2f us  %5.1f%%\n", o.op.c_str(), o.us_per_step, 100 * o.share);
  }
  if (a.roofline) {
    std::printf(
        "roofline: measured read bandwidth %.1f GB/s (a %.0f MiB probe; last-level cache %.0f "
        "MiB); decode reaches %.0f%% of it\n",
        r.bandwidth_gb_per_s, double(r.probe_bytes) / (1 << 20), double(r.llc_bytes) / (1 << 20),
        100 * r.roofline_fraction);
    if (r.weights_fit_in_llc()) std::printf("%s\n", llc_warning(r).c_str());
  }
  return 0;
}

}  // namespace

Runner add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  app.add_option("-m,--model", a->model, "model file")->required();
  app.add_option("-p,--prompt-lengths", a->prompts, "prefill lengths, comma-separated (0: none)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t(0), int64_t(1) << 24));
  app.add_option("-n,--n-decode", a->n, "tokens to decode")->check(CLI::NonNegativeNumber);
  app.add_option("-t,--threads", a->threads, "threads (default: physical cores)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("-r,--repeats", a->repeats, "repeats (median reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("-b,--batch", a->batches,
                 "also decode B sequences together (comma-separated sizes): aggregate tokens/s")
      ->delimiter(',');
  app.add_option("-v,--spec-verify", a->verify,
                 "speculative verification cost: one step over N tokens of one sequence "
                 "(comma-separated N) against a one-token step, after --spec-context positions")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app.add_option("--spec-context", a->verify_context, "positions before the verify steps (128)")
      ->check(CLI::PositiveNumber);
  add_spec_options(app, a->spec);
  app.add_option("--spec-prompts", a->spec_prompts,
                 "with --spec: prompts to generate from (default: built-in input-grounded ones)");
  app.add_option("--spec-task", a->spec_task,
                 "with --spec: the task prompts of a JSONL split (e.g. data/test.jsonl)");
  app.add_option("--spec-limit", a->spec_limit, "with --spec-task: examples used (50)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--spec-schema", a->spec_schema,
               "with --spec: constrain answers to the task schema the model carries "
               "(shrike.task.*), with jump-forward, as serve does");
  app.add_option("--spec-concurrency", a->spec_concurrency,
                 "with --spec: also run every prompt C at a time and count answers that differ "
                 "from plain greedy alone, and KV blocks left in use")
      ->check(CLI::PositiveNumber);
  app.add_flag("--ops", a->ops,
               "also time each operation of the batch-1 decode step (extra, profiled rounds)");
  add_bf16_dot_flag(app, a->bf16_dot);
  app.add_flag("--roofline", a->roofline,
               "also measure read bandwidth and decode's fraction of it");
  app.add_flag("--json", a->json, "print one JSON object");
  add_kv_cache_options(app, a->kv_args, a->kv, "KV cache: f32 | f16 | int8 | int8-mixed");
  return [a] { return run_bench(*a); };
}

}  // namespace shrike::cli
