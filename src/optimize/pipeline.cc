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
#include "data/user_data.h"
#include "gguf/gguf.h"
#include "optimize/artefact_cache.h"
#include "optimize/builds.h"
#include "optimize/measure.h"
#include "optimize/process.h"
#include "optimize/served.h"
#include "task/task_definition.h"
#include "task/task_format.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace shrike::optimize {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;
// Bounds on every child besides the builds (builds.h): an evaluation, a server's start.
constexpr double kEvalTimeout = 3600, kReadyTimeout = 120;

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

// What measuring the stages shares: the run, the models, the held-out requests and the
// measurement settings.
struct StageContext {
  Run& run;
  const Models& models;
  const std::string& data_dir;
  const std::vector<data::Example>& test;
  task::PromptFormat format;  // the teacher's task's prompt
  MeasureConfig measure;
  int c1 = 0;  // requests at concurrency 1
};

// Task scores of (model, KV type) on a split through `shrike eval`, cached like the models.
TaskScores evaluate(StageContext& c, const std::string& model, const std::string& kv,
                    const std::string& split, bool schema) {
  const OptimizeOptions& o = c.run.o;
  const std::string name =
      fs::path(model).stem().string() + "." + (schema ? "schema" : kv) + "." + split + ".json";
  const std::string dst = o.out_dir + "/eval/" + name;
  const std::string data = c.data_dir + "/" + split + ".jsonl";
  // With the schema, the answers come through the serving engine (its KV type: f32).
  auto argv =
      schema
          ? c.run.cmd({"eval", "-m", model, "--task", data, "--task-schema", "on", "--json", dst})
          : c.run.cmd({"eval", "-m", model, "--task", data, "--kv-type", kv, "--json", dst});
  if (o.eval_limit > 0) argv.insert(argv.end(), {"--limit", std::to_string(o.eval_limit)});
  c.run.add_threads(argv);
  c.run.build("eval " + fs::path(model).filename().string() +
                  (schema ? " (task schema)" : " (KV " + kv + ")") + " on " + split,
              // The binary is an input here (not for the models): how answers are decoded and
              // scored changes with it, and a rerun after a rebuild must not show old scores.
              dst, argv, {model, data, o.shrike_bin}, kEvalTimeout);
  return scores_of(dst);
}

std::vector<std::string> spec_args(const Models& m, SpecKind kind, StageModel model) {
  if (kind == SpecKind::Ngram) return {"--spec", "ngram"};
  return {"--spec", "draft", "--draft", m.draft_for(model)};
}

// The first speculative stage serves each kind at concurrency 1 (into report.spec_variants);
// it and the later speculative stages keep the faster, a draft only when clearly faster.
SpecKind compare_spec_kinds(StageContext& c, const Stage& stage, const std::string& model,
                            const std::vector<std::string>& base_args, Report& report) {
  for (SpecKind kind : {SpecKind::Draft, SpecKind::Ngram}) {
    SpecVariant v;
    v.kind = kind;
    if (kind == SpecKind::Draft) v.draft = "draft-q8_0.gguf: " + c.models.draft_shape;
    const std::string name = kind == SpecKind::Draft ? "draft" : "ngram";
    const std::string id = "stage" + std::to_string(stage.id) + "." + name;
    std::vector<std::string> args = base_args;
    const auto extra = spec_args(c.models, kind, stage.model);
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<std::string> shown = {"shrike", "serve", model};
    shown.insert(shown.end(), args.begin(), args.end());
    v.serve_command = shell_join(shown);
    c.run.say("stage " + std::to_string(stage.id) + ": speculation by " + spec_kind_name(kind) +
              ", concurrency 1, " + std::to_string(c.c1) + " requests");
    ServedModel server(c.run.o.shrike_bin, model, args, c.run.logs + "/" + id + ".serve.log",
                       kReadyTimeout);
    const LoadRun one = run_concurrency1(c.measure, server.url(), c.c1, id + ".c1");
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
}

// One stage: its model's scores, then its server at concurrency 1, the rate search and the
// common-rate run (which stage 0 sets). sample: ask the server the report's sample request.
StageResult measure_stage(StageContext& c, const Stage& stage, const StageResult* previous,
                          std::optional<SpecKind>& spec_kind, bool sample, Report& report) {
  const OptimizeOptions& o = c.run.o;
  Run& run = c.run;
  StageResult s;
  s.stage = stage;
  const std::string tag = "stage " + std::to_string(stage.id);
  s.model_path = c.models.path(stage.model);
  s.model_file_bytes = int64_t(fs::file_size(s.model_path));
  const std::string kv = kv_type_of(stage);
  s.clean = evaluate(c, s.model_path, kv, "test", stage.task_schema);
  s.noisy = evaluate(c, s.model_path, kv, "test_noisy", stage.task_schema);

  std::vector<std::string> serve_args = stage.serve_args;
  if (o.threads > 0) serve_args.insert(serve_args.end(), {"-t", std::to_string(o.threads)});
  if (stage.speculative) {
    if (!spec_kind) {
      spec_kind = compare_spec_kinds(c, stage, s.model_path, serve_args, report);
      s.stage.name += std::string(" (") + spec_kind_name(*spec_kind) + ")";
    }
    const auto extra = spec_args(c.models, *spec_kind, stage.model);
    serve_args.insert(serve_args.end(), extra.begin(), extra.end());
  }
  run.say(tag + " (" + stage.name + "): serving " + s.model_path);
  ServedModel server(o.shrike_bin, s.model_path, serve_args,
                     run.logs + "/stage" + std::to_string(stage.id) + ".serve.log", kReadyTimeout);
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

  run.say(tag + ": concurrency 1, " + std::to_string(c.c1) + " requests");
  const std::string before_c1 = server.metrics();
  const LoadRun one = run_concurrency1(c.measure, url, c.c1, id + ".c1");
  s.breakdown = latency_breakdown(before_c1, server.metrics());
  s.p50_ms = jnum(one.summary.at("e2e"), "p50_ms");
  s.p99_ms = jnum(one.summary.at("e2e"), "p99_ms");
  s.e2e_ms = one.e2e_ms;
  s.c1_failed = int64_t(jnum(one.summary, "failed") + jnum(one.summary, "timed_out"));
  if (stage.speculative)
    std::tie(s.spec_acceptance, s.spec_accepted_per_step) = spec_acceptance_of(server.metrics());
  s.rate = search_max_rate(c.measure, url, start_rate_for(s.p50_ms), id, tag);

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
  const LoadRun common = run_open_loop(c.measure, url, report.common_rate, id + ".common", 1);
  const std::string after = server.metrics();
  s.queue_wait_p99_ms = 1000 * histogram_quantile(before, after, "shrike_queue_wait_seconds", 0.99);
  s.timeout_rate = jnum(common.summary, "timeout_rate");
  s.common_within_budget = common.within_budget;
  s.peak_rss_bytes = server.peak_rss_bytes();
  if (sample) {
    report.sample_prompt = c.format.text(c.test.front().text);
    report.sample_answer = server.complete(report.sample_prompt, report.max_tokens);
  }
  server.stop(10);
  // The baseline (the first measured stage) with static batching waits up to its window for a
  // batch to fill; the same stage without the window shows what the wait alone costs a lone
  // request.
  if (!previous && s.options.count("batching") && s.options.at("batching") == "static") {
    report.stage0_batch_wait_ms =
        std::atof(s.options.count("batch_wait_ms") ? s.options.at("batch_wait_ms").c_str() : "nan");
    std::vector<std::string> args = serve_args;
    args.insert(args.end(), {"--batch-wait-ms", "0"});
    run.say(tag + ": without its batch window (--batch-wait-ms 0), concurrency 1");
    ServedModel bare(o.shrike_bin, s.model_path, args, run.logs + "/" + id + ".nowindow.serve.log",
                     kReadyTimeout);
    const std::string before = bare.metrics();
    const LoadRun lone = run_concurrency1(c.measure, bare.url(), c.c1, id + ".nowindow.c1");
    report.stage0_no_window = latency_breakdown(before, bare.metrics());
    report.stage0_no_window_p50_ms = jnum(lone.summary.at("e2e"), "p50_ms");
    report.stage0_no_window_p99_ms = jnum(lone.summary.at("e2e"), "p99_ms");
    bare.stop(10);
  }
  std::snprintf(buf, sizeof buf,
                "%s: P50 %.1f ms, P99 %.1f ms, %.2f req/s within %g ms, peak RSS %.1f MB",
                tag.c_str(), s.p50_ms, s.p99_ms, s.rate.best_rate, o.budget_ms,
                double(s.peak_rss_bytes) / 1e6);
  run.say(buf);
  return s;
}

std::vector<std::string> report_notes(const Report& report) {
  std::vector<std::string> notes = {
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
      notes.push_back("Stage " + std::to_string(s.stage.id) +
                      ": the server reports the prefix cache off although it was not "
                      "disabled: int8-mixed KV turns it off (a reused block would lack its "
                      "f16 copies); the other changes of the stage hold.");
  }
  return notes;
}

// The held-out requests: the test utterances as the task prompt, in order, into path.
void write_prompts(const std::vector<data::Example>& test, const task::PromptFormat& format,
                   int max_tokens, const std::string& path) {
  std::ofstream p(path);
  for (const auto& e : test)
    p << nlohmann::json({{"prompt", format.text(e.text)}, {"max_tokens", max_tokens}}).dump()
      << "\n";
  if (!p) throw FileError(path + ": cannot write");
}

// The longest answer the data's labels need, in the teacher's tokens (EOS included), with 8 to
// spare: a fixed limit cut answers off, e.g. 10% of SNIPS' with a near-character tokenizer at 64.
int answer_token_limit(const std::string& teacher, const std::string& data_dir) {
  const tokenizer::Tokenizer tok(tokenizer::vocab_from_gguf(gguf::GgufFile::open(teacher)));
  size_t longest = 0;
  for (const char* split : {"train", "dev", "test"})
    for (const data::Example& e : data::read_examples(data_dir + "/" + split + ".jsonl"))
      longest = std::max(longest, tok.encode(task::task_answer(e), /*add_bos=*/false).size());
  return int(longest) + 1 + 8;
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
  for (const char* sub : {"/logs", "/measure", "/eval"}) fs::create_directories(out + sub);
  Run run{o, ArtefactCache(out + "/manifest.json"), out + "/logs"};
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
  report.probe_repeats = o.probe_repeats;

  const auto test = data::read_examples(d + "/test.jsonl");

  // Calibration traffic: the user's own train and dev utterances through the noise pass (the
  // seed's first pitfall is calibrating on clean text that traffic does not look like), unless
  // --calib names a file or asks for the built-in generator's (its dev split with every example
  // noisy, as bench/experiments/quant_calibration.sh makes it).
  std::string calib = o.calib.empty() ? d + "/calib.jsonl" : o.calib;
  if (o.calib == kBuiltinCalib) {
    calib = out + "/calib_noisy/dev.jsonl";
    run.build("noisy calibration set", calib,
              run.cmd({"data", "gen", "--noise", "1", "--n", "3000", "-o", out + "/calib_noisy"}),
              {}, kBuildTimeout);
  }

  // The models, each from the previous one (builds.h's table).
  Models models;
  run_builds(run, model_builds(o, d, calib, models));
  report.teacher_origin = models.teacher_origin;
  // The held-out requests, in the prompt format of the teacher's task (every model built from it
  // carries the same task).
  const task::PromptFormat format = task::prompt_format_of(task::task_of_model(models.teacher));
  const std::string prompts = out + "/prompts.jsonl";
  report.max_tokens = o.max_tokens > 0 ? o.max_tokens : answer_token_limit(models.teacher, d);
  run.say("max_tokens " + std::to_string(report.max_tokens) +
          (o.max_tokens > 0 ? " (given)"
                            : " (the longest labelled answer in the teacher's tokens + 8)"));
  write_prompts(test, format, report.max_tokens, prompts);
  report.test_requests = int(test.size());
  run.say("data: " + std::to_string(test.size()) + " test requests from " + d);
  report.vocab_before = models.vocab_full;
  report.vocab_after = models.vocab_trimmed;
  run.say("vocabulary: " + std::to_string(models.vocab_full) + " -> " +
          std::to_string(models.vocab_trimmed) + " tokens after trimming" +
          (models.use_trimmed ? "" : " (under 10% fewer: stage 5 serves the untrimmed student)"));

  StageContext c{run, models, d, test, format, {}, 0};
  c.measure.shrike_bin = o.shrike_bin;
  c.measure.prompts = prompts;
  c.measure.measure_dir = out + "/measure";
  c.measure.log_dir = run.logs;
  c.measure.budget_ms = o.budget_ms;
  c.measure.target = o.target;
  c.measure.burstiness = o.burstiness;
  c.measure.request_timeout_s = o.request_timeout_s;
  c.measure.max_probes = o.max_probes;
  c.measure.probe_repeats = o.probe_repeats;
  c.measure.probe_requests = o.probe_requests;
  c.measure.probe_seconds = o.probe_seconds;
  c.measure.max_rate = o.max_rate;
  c.measure.probe_growth = o.probe_growth;
  c.measure.say = [&run](const std::string& line) { run.say(line); };
  c.c1 = o.c1_requests > 0 ? std::min<int>(o.c1_requests, int(test.size())) : int(test.size());

  std::vector<Stage> stages = default_stages(o.static_batch);
  for (Stage& st : stages)
    if (st.model == StageModel::StudentInt8Trimmed && !models.use_trimmed) {
      st.model = StageModel::StudentInt8;
      st.name = "+ the task's output schema with jump-forward (vocabulary trimming skipped: " +
                std::to_string(models.vocab_full) + " -> " + std::to_string(models.vocab_trimmed) +
                " tokens, the model's vocabulary is already the task's)";
    }
  const Stage* last_available = nullptr;  // the sample request goes to it
  for (const Stage& st : stages)
    if (st.available) last_available = &st;
  const StageResult* previous = nullptr;
  std::optional<SpecKind> spec_kind;
  for (const Stage& stage : stages) {
    if (!stage.available) {
      run.say("stage " + std::to_string(stage.id) + " (" + stage.name + "): not available, " +
              stage.reason);
      StageResult s;
      s.stage = stage;
      report.stages.push_back(s);
      continue;
    }
    report.stages.push_back(
        measure_stage(c, stage, previous, spec_kind, &stage == last_available, report));
    previous = &report.stages.back();
  }
  report.notes = report_notes(report);
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
