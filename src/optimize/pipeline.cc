#include "optimize/pipeline.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>

#include "core/file_buffer.h"
#include "data/example.h"
#include "data/task_definition.h"
#include "data/task_format.h"
#include "data/user_data.h"
#include "gguf/gguf.h"
#include "optimize/artefact_cache.h"
#include "optimize/measure.h"
#include "optimize/process.h"
#include "optimize/served.h"

namespace shrike::optimize {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;
// Bounds on every child: a model build may train for hours (the full-size teacher), a load test
// runs seconds past its own bounds.
constexpr double kBuildTimeout = 6 * 3600, kEvalTimeout = 3600, kReadyTimeout = 120;

struct Run {
  const OptimizeOptions& o;
  ArtefactCache cache;
  std::string logs;
  Clock::time_point t0 = Clock::now();

  void say(const std::string& msg) const {
    if (!o.progress) return;
    char buf[32];
    std::snprintf(buf, sizeof buf, "[%7.1f s] ",
                  std::chrono::duration<double>(Clock::now() - t0).count());
    o.progress(buf + msg);
  }
  std::vector<std::string> cmd(std::initializer_list<std::string> args) const {
    std::vector<std::string> v = {o.shrike_bin};
    v.insert(v.end(), args);
    return v;
  }
  void add_threads(std::vector<std::string>& argv) const {
    if (o.threads > 0) argv.insert(argv.end(), {"-t", std::to_string(o.threads)});
  }
  // Builds `artefact` with argv unless the manifest says the same recipe on the same inputs made
  // it already. The binary itself is not part of the key (a rebuild would invalidate everything).
  void build(const std::string& what, const std::string& artefact,
             const std::vector<std::string>& argv, const std::vector<std::string>& inputs,
             double timeout_s) {
    const std::vector<std::string> recipe(argv.begin() + 1, argv.end());
    const std::string key = artefact_key(recipe, inputs);
    if (cache.fresh(artefact, key)) {
      say(what + ": cached (" + artefact + ")");
      return;
    }
    say(what + ": " + shell_join(recipe));
    const auto t = Clock::now();
    cache.forget(artefact);
    run_checked(argv, logs + "/" + fs::path(artefact).filename().string() + ".log", timeout_s);
    if (!fs::exists(artefact))
      throw std::runtime_error(what + ": the command succeeded but wrote no " + artefact);
    cache.record(artefact, key);
    char buf[64];
    std::snprintf(buf, sizeof buf, " done in %.0f s",
                  std::chrono::duration<double>(Clock::now() - t).count());
    say(what + buf);
  }
};

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw FileError(path + ": cannot read");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw FileError(path + ": not JSON: " + e.what());
  }
}

// The number of tokens in a model's vocabulary (its tokenizer.ggml.tokens).
int64_t vocab_size_of(const std::string& model) {
  const gguf::GgufFile f = gguf::GgufFile::open(model);
  const gguf::Value* tokens = f.find("tokenizer.ggml.tokens");
  if (!tokens) throw FileError(model + ": no tokenizer.ggml.tokens (a model without a vocabulary)");
  return int64_t(tokens->array_size);
}

// A draft for speculative decoding, a fraction of the served student's cost: a quarter of its
// layers, half its width in 64-wide heads (one KV head), a quarter of its FFN. Its vocabulary and
// architecture are the student's (`distill --student-preset` copies them), as a draft's must be.
std::vector<std::string> draft_shape_args(const std::string& student) {
  const gguf::GgufFile f = gguf::GgufFile::open(student);
  const std::string arch = f.get_string_or("general.architecture", "llama");
  auto key = [&](const char* k) { return int64_t(f.get_uint_or(arch + "." + k, 0)); };
  const int64_t dim = key("embedding_length"), layers = key("block_count"),
                ffn = key("feed_forward_length");
  if (dim <= 0 || layers <= 0 || ffn <= 0)
    throw FileError(student + ": no " + arch + ".embedding_length, block_count or " +
                    "feed_forward_length (cannot size a draft for it)");
  const int64_t draft_dim = std::max<int64_t>(32, dim / 2 / 32 * 32);
  const int64_t heads = std::max<int64_t>(1, draft_dim / 64);
  return {"--dim",      std::to_string(draft_dim),
          "--layers",   std::to_string(std::max<int64_t>(1, layers / 4)),
          "--heads",    std::to_string(heads),
          "--kv-heads", "1",
          "--ffn",      std::to_string(std::max<int64_t>(64, ffn / 4 / 32 * 32))};
}

double jnum(const nlohmann::json& j, const char* key) {
  return json_number(j, key);
}

std::string machine_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string cpu = "unknown CPU";
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  const std::string load = read_text("/proc/loadavg");
  return cpu + ", " + std::to_string(std::thread::hardware_concurrency()) +
         " logical CPUs, load average at start " + load.substr(0, load.find(' '));
}

TaskScores scores_of(const std::string& path) {
  const auto j = read_json(path);
  return {jnum(j, "intent_accuracy"), jnum(j, "slot_f1")};
}

// Accepted / proposed draft tokens and accepted tokens per verification step, from a server's
// counters (NaN when it proposed nothing).
std::pair<double, double> spec_acceptance_of(const std::string& metrics) {
  const double proposed = metric_sum(metrics, "shrike_spec_proposed_tokens_total");
  const double accepted = metric_sum(metrics, "shrike_spec_accepted_tokens_total");
  const double steps = metric_sum(metrics, "shrike_spec_steps_total");
  return {proposed > 0 ? accepted / proposed : NAN, steps > 0 ? accepted / steps : NAN};
}

std::string kv_type_of(const Stage& s) {
  for (size_t i = 0; i + 1 < s.serve_args.size(); ++i)
    if (s.serve_args[i] == "--kv-type") return s.serve_args[i + 1];
  return "f16";
}

}  // namespace

data::UserSplits prepare_data(const std::string& input, const std::string& dir) {
  const data::SplitOptions split;  // the defaults `shrike data split` uses
  data::UserSplits s;
  if (!data::read_presplit(input, split, s))
    s = data::split_examples(data::read_labelled(input), split);
  if (s.test.empty())
    throw FileError(input +
                    ": no test examples after splitting (an intent needs at least 3 distinct "
                    "texts before any is held out; or give a folder with train, dev and test "
                    ".jsonl)");
  if (s.train.empty()) throw FileError(input + ": no training examples after splitting");
  // Written every run, byte for byte the same for the same input, so the artefact cache (which
  // hashes contents) keeps every model built from them.
  data::write_user_splits(s, dir);
  return s;
}

void check_teacher(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (!fs::exists(fs::path(path) / "config.json", ec))
      throw FileError(path +
                      ": a folder without config.json (--teacher: a GGUF file or a Hugging "
                      "Face model folder)");
    return;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path + ": cannot read (--teacher)");
  char magic[4] = {};
  in.read(magic, 4);
  if (in.gcount() != 4 || std::memcmp(magic, "GGUF", 4) != 0)
    throw FileError(path + ": not a GGUF file (--teacher)");
}

namespace {

// The regular files of a folder, sorted: what a Hugging Face teacher's cache key hashes.
std::vector<std::string> folder_files(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

Report run_optimize(const OptimizeOptions& o) {
  if (!o.teacher.empty()) check_teacher(o.teacher);
  if (!o.calib.empty() && o.calib != kBuiltinCalib && data::read_examples(o.calib).empty())
    throw FileError(o.calib + ": no examples (--calib)");
  // The user's utterances as the splits every step reads (OUT/data): split here when given as
  // one file or a folder of files; test_noisy and calib derived from their own texts.
  const std::string d = o.out_dir + "/data", out = o.out_dir;
  const data::UserSplits splits = prepare_data(o.data_dir, d);
  fs::create_directories(o.out_dir + "/logs");
  fs::create_directories(o.out_dir + "/measure");
  fs::create_directories(o.out_dir + "/eval");
  Run run{o, ArtefactCache(o.out_dir + "/manifest.json"), o.out_dir + "/logs"};
  run.say("data: " + o.data_dir + " -> train " + std::to_string(splits.train.size()) + ", dev " +
          std::to_string(splits.dev.size()) + ", test " + std::to_string(splits.test.size()) +
          ", test_noisy " + std::to_string(splits.test_noisy.size()) + ", calib " +
          std::to_string(splits.calib.size()) + " (noisy train + dev) in " + d);

  Report report;
  report.command = o.command;
  report.machine = machine_description();
  report.data_dir = d;
  report.budget_ms = o.budget_ms;
  report.target = o.target;
  report.burstiness = o.burstiness;
  report.max_tokens = o.max_tokens;
  report.probe_repeats = o.probe_repeats;

  // The held-out requests: the test utterances as the task prompt, in order.
  const auto test = data::read_examples(d + "/test.jsonl");
  const std::string prompts = out + "/prompts.jsonl";
  {
    std::ofstream p(prompts);
    for (const auto& e : test)
      p << nlohmann::json({{"prompt", data::task_prompt(e.text)}, {"max_tokens", o.max_tokens}})
               .dump()
        << "\n";
    if (!p) throw FileError(prompts + ": cannot write");
  }
  report.test_requests = int(test.size());
  run.say("data: " + std::to_string(test.size()) + " test requests from " + d);

  // The models, each from the previous one.
  std::string teacher = o.teacher;
  if (teacher.empty()) {
    teacher = out + "/teacher.gguf";
    auto argv = run.cmd({"train", "--data", d + "/train.jsonl", "--dev", d + "/dev.jsonl",
                         "--preset", o.preset, "--epochs", std::to_string(o.epochs), "--dev-limit",
                         "100", "--no-progress", "-o", teacher});
    run.add_threads(argv);
    run.build("teacher", teacher, argv, {d + "/train.jsonl", d + "/dev.jsonl"}, kBuildTimeout);
    report.teacher_origin = "trained here: preset " + o.preset + ", " + std::to_string(o.epochs) +
                            " epochs on " + d + "/train.jsonl";
  } else {
    report.teacher_origin = "given: " + teacher;
    // A teacher trained elsewhere may come as a Hugging Face folder and without shrike's task
    // keys: one `shrike task set` makes it a GGUF that carries the data's labels and slot names
    // (serve's /v1/intent and constrained answers, eval's task schema need them).
    const bool folder = fs::is_directory(teacher);
    if (folder || !data::task_from_gguf(gguf::GgufFile::open(teacher))) {
      const std::string attached = out + "/teacher.gguf";
      std::vector<std::string> inputs = folder ? folder_files(teacher) : std::vector{teacher};
      for (const char* split : {"train", "dev", "test"})
        inputs.push_back(d + "/" + split + ".jsonl");
      run.build("teacher (the data's task attached" +
                    std::string(folder ? ", converted from the Hugging Face folder)" : ")"),
                attached, run.cmd({"task", "set", teacher, "--data", d, "-o", attached}), inputs,
                kBuildTimeout);
      report.teacher_origin += folder ? " (Hugging Face folder; converted, task attached)"
                                      : " (task attached from the data)";
      teacher = attached;
    }
  }
  // Calibration traffic: the user's own train and dev utterances through the noise pass (the
  // seed's first pitfall is calibrating on clean text that traffic does not look like), unless
  // --calib names a file or asks for the built-in generator's.
  std::string calib = o.calib.empty() ? d + "/calib.jsonl" : o.calib;
  if (o.calib == kBuiltinCalib) {
    // The generator's dev split with every example noisy (no test template), as
    // scripts/quant_calibration.sh makes it.
    calib = out + "/calib_noisy/dev.jsonl";
    run.build("noisy calibration set", calib,
              run.cmd({"data", "gen", "--noise", "1", "--n", "3000", "-o", out + "/calib_noisy"}),
              {}, kBuildTimeout);
  }
  auto quantize = [&](const std::string& what, const std::string& in, const std::string& dst) {
    auto argv = run.cmd({"quantize", in, "-o", dst, "--type", "q8_0", "--method", "gptq", "--calib",
                         calib, "--calib-limit", std::to_string(o.calib_limit)});
    run.add_threads(argv);
    run.build(what, dst, argv, {in, calib}, kBuildTimeout);
  };
  const std::string teacher_q8 = out + "/teacher-q8_0.gguf";
  quantize("teacher INT8", teacher, teacher_q8);
  const std::string pruned = out + "/pruned.gguf", student = out + "/student.gguf";
  {
    auto argv = run.cmd({"prune", teacher, "--heads", std::to_string(o.prune_heads), "--ffn",
                         std::to_string(o.prune_ffn), "--calib", d + "/dev.jsonl", "-o", pruned});
    run.add_threads(argv);
    run.build("pruned", pruned, argv, {teacher, d + "/dev.jsonl"}, kBuildTimeout);
    argv = run.cmd({"distill",
                    "--teacher",
                    teacher,
                    "--student",
                    pruned,
                    "--data",
                    d + "/train.jsonl",
                    "--dev",
                    d + "/dev.jsonl",
                    "--alpha",
                    "0.5",
                    "--temp",
                    "2",
                    "--epochs",
                    std::to_string(o.distill_epochs),
                    "--dev-limit",
                    "100",
                    "--no-progress",
                    "-o",
                    student});
    run.add_threads(argv);
    run.build("student (distilled)", student, argv,
              {teacher, pruned, d + "/train.jsonl", d + "/dev.jsonl"}, kBuildTimeout);
  }
  const std::string student_q8 = out + "/student-q8_0.gguf";
  quantize("student INT8", student, student_q8);
  // The draft for speculative decoding: distilled from the student it drafts for (its acceptance
  // is agreement with that model, not with the teacher), then INT8 like the student.
  const std::vector<std::string> draft_shape = draft_shape_args(student);
  const std::string draft = out + "/draft.gguf", draft_q8 = out + "/draft-q8_0.gguf";
  {
    auto argv = run.cmd({"distill", "--teacher", student, "--student-preset", "draft"});
    argv.insert(argv.end(), draft_shape.begin(), draft_shape.end());
    argv.insert(argv.end(), {"--data", d + "/train.jsonl", "--dev", d + "/dev.jsonl", "--alpha",
                             "0.5", "--temp", "2", "--epochs", std::to_string(o.distill_epochs),
                             "--dev-limit", "100", "--no-progress", "-o", draft});
    run.add_threads(argv);
    run.build("draft (distilled from the student)", draft, argv,
              {student, d + "/train.jsonl", d + "/dev.jsonl"}, kBuildTimeout);
    run.build("draft INT8", draft_q8,
              run.cmd({"quantize", draft, "-o", draft_q8, "--type", "q8_0"}), {draft},
              kBuildTimeout);
  }
  std::string draft_text = "draft-q8_0.gguf:";
  for (size_t i = 0; i + 1 < draft_shape.size(); i += 2)
    draft_text += " " + draft_shape[i].substr(2) + " " + draft_shape[i + 1];
  // The student with only the tokens the task's prompts and answers use (training and dev
  // texts as the task formats them; byte fallbacks keep any other text encodable).
  const std::string trimmed = out + "/student-trimmed.gguf";
  run.build("student, vocabulary trimmed", trimmed,
            run.cmd({"trim-vocab", student_q8, "-o", trimmed, "--keep-from", d + "/train.jsonl",
                     "--keep-from", d + "/dev.jsonl"}),
            {student_q8, d + "/train.jsonl", d + "/dev.jsonl"}, kBuildTimeout);
  const int64_t vocab_full = vocab_size_of(student_q8), vocab_trimmed = vocab_size_of(trimmed);
  report.vocab_before = vocab_full;
  report.vocab_after = vocab_trimmed;
  const bool use_trimmed = trim_worthwhile(vocab_full, vocab_trimmed);
  run.say("vocabulary: " + std::to_string(vocab_full) + " -> " + std::to_string(vocab_trimmed) +
          " tokens after trimming" +
          (use_trimmed ? "" : " (under 10% fewer: stage 5 serves the untrimmed student)"));
  // The draft for the trimmed student must have the same tokens: the same trim of the draft.
  const std::string draft_trimmed = out + "/draft-trimmed.gguf";
  if (use_trimmed) {
    run.build("draft, vocabulary trimmed", draft_trimmed,
              run.cmd({"trim-vocab", draft_q8, "-o", draft_trimmed, "--keep-from",
                       d + "/train.jsonl", "--keep-from", d + "/dev.jsonl"}),
              {draft_q8, d + "/train.jsonl", d + "/dev.jsonl"}, kBuildTimeout);
    if (vocab_size_of(draft_trimmed) != vocab_trimmed)
      throw std::runtime_error("the trimmed draft has " +
                               std::to_string(vocab_size_of(draft_trimmed)) +
                               " tokens, the trimmed student " + std::to_string(vocab_trimmed));
  }
  auto spec_args = [&](SpecKind kind, StageModel m) -> std::vector<std::string> {
    if (kind == SpecKind::Ngram) return {"--spec", "ngram"};
    return {"--spec", "draft", "--draft",
            m == StageModel::StudentInt8Trimmed ? draft_trimmed : draft_q8};
  };
  auto model_path = [&](StageModel m) {
    switch (m) {
      case StageModel::Teacher:
        return teacher;
      case StageModel::TeacherInt8:
        return teacher_q8;
      case StageModel::StudentInt8:
        return student_q8;
      case StageModel::StudentInt8Trimmed:
        return trimmed;
    }
    return teacher;
  };

  // Task scores per (model, KV type) through `shrike eval`, cached like the models.
  auto evaluate = [&](const std::string& model, const std::string& kv, const std::string& split,
                      bool schema) {
    const std::string name =
        fs::path(model).stem().string() + "." + (schema ? "schema" : kv) + "." + split + ".json";
    const std::string dst = out + "/eval/" + name;
    // With the schema, the answers come through the serving engine (its KV type: f32).
    auto argv = schema ? run.cmd({"eval", "-m", model, "--task", d + "/" + split + ".jsonl",
                                  "--task-schema", "on", "--json", dst})
                       : run.cmd({"eval", "-m", model, "--task", d + "/" + split + ".jsonl",
                                  "--kv-type", kv, "--json", dst});
    if (o.eval_limit > 0) argv.insert(argv.end(), {"--limit", std::to_string(o.eval_limit)});
    run.add_threads(argv);
    run.build("eval " + fs::path(model).filename().string() +
                  (schema ? " (task schema)" : " (KV " + kv + ")") + " on " + split,
              // The binary is an input here (not for the models): how answers are decoded and
              // scored changes with it, and a rerun after a rebuild must not show old scores.
              dst, argv, {model, d + "/" + split + ".jsonl", o.shrike_bin}, kEvalTimeout);
    return scores_of(dst);
  };

  MeasureConfig measure;
  measure.shrike_bin = o.shrike_bin;
  measure.prompts = prompts;
  measure.measure_dir = out + "/measure";
  measure.log_dir = run.logs;
  measure.budget_ms = o.budget_ms;
  measure.target = o.target;
  measure.burstiness = o.burstiness;
  measure.request_timeout_s = o.request_timeout_s;
  measure.max_probes = o.max_probes;
  measure.probe_repeats = o.probe_repeats;
  measure.probe_requests = o.probe_requests;
  measure.probe_seconds = o.probe_seconds;
  measure.max_rate = o.max_rate;
  measure.probe_growth = o.probe_growth;
  measure.say = [&run](const std::string& line) { run.say(line); };

  std::vector<Stage> stages = default_stages(o.static_batch);
  for (Stage& st : stages)
    if (st.model == StageModel::StudentInt8Trimmed && !use_trimmed) {
      st.model = StageModel::StudentInt8;
      st.name = "+ the task's output schema with jump-forward (vocabulary trimming skipped: " +
                std::to_string(vocab_full) + " -> " + std::to_string(vocab_trimmed) +
                " tokens, the model's vocabulary is already the task's)";
    }
  const StageResult* previous = nullptr;
  const Stage* last_available = nullptr;  // the sample request goes to it
  for (const Stage& st : stages)
    if (st.available) last_available = &st;
  const int c1 =
      o.c1_requests > 0 ? std::min<int>(o.c1_requests, int(test.size())) : int(test.size());
  // The first speculative stage serves each kind at concurrency 1; it and the later speculative
  // stages keep the faster (a draft only when clearly faster).
  std::optional<SpecKind> spec_kind;
  auto compare_spec_kinds = [&](const Stage& stage, const std::string& model,
                                const std::vector<std::string>& base_args) {
    for (SpecKind kind : {SpecKind::Draft, SpecKind::Ngram}) {
      SpecVariant v;
      v.kind = kind;
      if (kind == SpecKind::Draft) v.draft = draft_text;
      const std::string name = kind == SpecKind::Draft ? "draft" : "ngram";
      const std::string id = "stage" + std::to_string(stage.id) + "." + name;
      std::vector<std::string> args = base_args;
      const auto extra = spec_args(kind, stage.model);
      args.insert(args.end(), extra.begin(), extra.end());
      std::vector<std::string> shown = {"shrike", "serve", model};
      shown.insert(shown.end(), args.begin(), args.end());
      v.serve_command = shell_join(shown);
      run.say("stage " + std::to_string(stage.id) + ": speculation by " + spec_kind_name(kind) +
              ", concurrency 1, " + std::to_string(c1) + " requests");
      ServedModel server(o.shrike_bin, model, args, run.logs + "/" + id + ".serve.log",
                         kReadyTimeout);
      const LoadRun one = run_concurrency1(measure, server.url(), c1, id + ".c1");
      v.p50_ms = jnum(one.summary.at("e2e"), "p50_ms");
      v.p99_ms = jnum(one.summary.at("e2e"), "p99_ms");
      std::tie(v.acceptance, v.accepted_per_step) = spec_acceptance_of(server.metrics());
      server.stop(10);
      report.spec_variants.push_back(v);
    }
    SpecVariant& draft_kind = report.spec_variants[0];
    SpecVariant& lookup = report.spec_variants[1];
    // The draft costs a second model's memory and compute: it is served only when it is faster
    // by more than the run-to-run noise of a P50 (2%).
    SpecVariant& chosen = draft_kind.p50_ms < 0.98 * lookup.p50_ms ? draft_kind : lookup;
    chosen.chosen = true;
    return chosen.kind;
  };
  for (const Stage& stage : stages) {
    StageResult s;
    s.stage = stage;
    const std::string tag = "stage " + std::to_string(stage.id);
    if (!stage.available) {
      run.say(tag + " (" + stage.name + "): not available, " + stage.reason);
      report.stages.push_back(s);
      continue;
    }
    s.model_path = model_path(stage.model);
    s.model_file_bytes = int64_t(fs::file_size(s.model_path));
    const std::string kv = kv_type_of(stage);
    s.clean = evaluate(s.model_path, kv, "test", stage.task_schema);
    s.noisy = evaluate(s.model_path, kv, "test_noisy", stage.task_schema);

    std::vector<std::string> serve_args = stage.serve_args;
    if (o.threads > 0) serve_args.insert(serve_args.end(), {"-t", std::to_string(o.threads)});
    if (stage.speculative) {
      if (!spec_kind) {
        spec_kind = compare_spec_kinds(stage, s.model_path, serve_args);
        s.stage.name += std::string(" (") + spec_kind_name(*spec_kind) + ")";
      }
      const auto extra = spec_args(*spec_kind, stage.model);
      serve_args.insert(serve_args.end(), extra.begin(), extra.end());
    }
    run.say(tag + " (" + stage.name + "): serving " + s.model_path);
    ServedModel server(o.shrike_bin, s.model_path, serve_args,
                       run.logs + "/stage" + std::to_string(stage.id) + ".serve.log",
                       kReadyTimeout);
    {
      std::vector<std::string> shown = {"shrike", "serve", s.model_path};
      shown.insert(shown.end(), serve_args.begin(), serve_args.end());
      s.serve_command = shell_join(shown);
      s.serve_argv = shown;
    }
    s.options = server.serving_options();
    // The byte counts follow from the model and the pool; the report has them as columns.
    if (previous)
      s.changes =
          option_diff(previous->options, s.options, {"weight_bytes", "kv_bytes", "parameters"});
    s.weight_bytes = std::stoll(s.options.at("weight_bytes"));
    s.kv_bytes = std::stoll(s.options.at("kv_bytes"));
    const std::string url = server.url(), id = "stage" + std::to_string(stage.id);

    run.say(tag + ": concurrency 1, " + std::to_string(c1) + " requests");
    const LoadRun one = run_concurrency1(measure, url, c1, id + ".c1");
    s.p50_ms = jnum(one.summary.at("e2e"), "p50_ms");
    s.p99_ms = jnum(one.summary.at("e2e"), "p99_ms");
    s.e2e_ms = one.e2e_ms;
    s.c1_failed = int64_t(jnum(one.summary, "failed") + jnum(one.summary, "timed_out"));
    if (stage.speculative)
      std::tie(s.spec_acceptance, s.spec_accepted_per_step) = spec_acceptance_of(server.metrics());
    s.rate = search_max_rate(measure, url, start_rate_for(s.p50_ms), id, tag);

    if (report.common_rate <= 0) {
      // Twice what stage 0 sustains; when it sustains no probed rate, the highest rate it was
      // probed at (half its single-stream capacity: stage 0 already fails there, and a run at it
      // is a few seconds where one at the search's lowest rate is its longest).
      double highest = 0;
      for (const auto& p : s.rate.probes) highest = std::max(highest, p.rate);
      report.common_rate = o.common_rate > 0      ? o.common_rate
                           : s.rate.best_rate > 0 ? 2 * s.rate.best_rate
                                                  : highest;
    }
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s: common rate %.2f req/s", tag.c_str(), report.common_rate);
    run.say(buf);
    const std::string before = server.metrics();
    const LoadRun common = run_open_loop(measure, url, report.common_rate, id + ".common", 1);
    const std::string after = server.metrics();
    s.queue_wait_p99_ms =
        1000 * histogram_quantile(before, after, "shrike_queue_wait_seconds", 0.99);
    s.timeout_rate = jnum(common.summary, "timeout_rate");
    s.common_within_budget = common.within_budget;
    s.peak_rss_bytes = server.peak_rss_bytes();
    if (&stage == last_available) {
      report.sample_prompt = data::task_prompt(test.front().text);
      report.sample_answer = server.complete(report.sample_prompt, o.max_tokens);
    }
    server.stop(10);
    std::snprintf(buf, sizeof buf,
                  "%s: P50 %.1f ms, P99 %.1f ms, %.2f req/s within %g ms, peak RSS %.1f MB",
                  tag.c_str(), s.p50_ms, s.p99_ms, s.rate.best_rate, o.budget_ms,
                  double(s.peak_rss_bytes) / 1e6);
    run.say(buf);
    report.stages.push_back(std::move(s));
    previous = &report.stages.back();
  }

  report.notes = {
      "Accuracy and slot F1 come from `shrike eval` on each stage's model with that stage's KV "
      "type; batching and the prefix cache do not change a greedy answer, so stages with the "
      "same model and KV type score the same.",
      "Weights: the bytes the server holds (its `weight_bytes`); KV: the pool the server "
      "allocated at start (`kv_blocks` x block bytes); peak RSS: VmHWM of the server process.",
      "Stage 0 reserves f32 KV for each request's maximum length (prompt + max_tokens) when its "
      "static batch forms, from a pool sized for max_seqs full contexts.",
      "Queue wait P99 is the upper bound of the server's shrike_queue_wait_seconds histogram "
      "bucket (between scrapes before and after the common-rate run).",
      "The lean path (fused QKV and gate/up products, attention inline for short contexts, "
      "threads only where a product is large enough) is how the engine computes: every stage "
      "has it, so it is not a stage of its own.",
      "Load average at the end: " + read_text("/proc/loadavg").substr(0, 4) +
          " (latencies on a loaded machine are pessimistic)."};
  // A feature a stage asks for but its server turned off is said, not hidden.
  for (const auto& s : report.stages) {
    const auto& a = s.stage.serve_args;
    const bool asked =
        s.stage.available && std::find(a.begin(), a.end(), "--no-prefix-cache") == a.end();
    if (asked && s.options.count("prefix_cache") && s.options.at("prefix_cache") == "off")
      report.notes.push_back("Stage " + std::to_string(s.stage.id) +
                             ": the server reports the prefix cache off although it was not "
                             "disabled: int8-mixed KV turns it off (a reused block would lack its "
                             "f16 copies); the other changes of the stage hold.");
  }
  report.wall_s = std::chrono::duration<double>(Clock::now() - run.t0).count();
  return report;
}

void write_report(const Report& report, const std::string& dir) {
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream f(dir + "/" + name, std::ios::binary);
    f << text;
    if (!f) throw FileError(dir + "/" + name + ": cannot write");
  };
  write("report.md", render_markdown(report));
  write("report.json", render_json(report).dump(1) + "\n");
  for (const auto& [name, svg] : render_plots(report)) write(name, svg);
}

}  // namespace shrike::optimize
