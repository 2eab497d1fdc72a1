// `shrike optimize --data FILE|DIR [--teacher T.gguf] -o OUT`: the staged report (src/optimize).
// This file maps options and prints progress and the stage table; the work is
// src/optimize/pipeline.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>

#include "cli/commands.h"
#include "optimize/pipeline.h"
#include "optimize/process.h"

namespace shrike::cli {
namespace {

int run_optimize_cli(optimize::OptimizeOptions o) {
  o.shrike_bin = optimize::current_executable();
  o.progress = [](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  };
  std::filesystem::create_directories(o.out_dir);
  const optimize::Report report = optimize::run_optimize(o);
  optimize::write_report(report, o.out_dir);
  // The stage table (the report's first table) on stdout.
  const std::string md = optimize::render_markdown(report);
  const size_t table = md.find("| stage |"), end = md.find("\n\n", table);
  std::printf("%s\n", md.substr(table, end - table).c_str());
  // And the targets (stage 0 against the last stage), with why any is not met.
  if (const size_t t = md.find("## Targets"); t != std::string::npos)
    std::printf("\n%s", md.substr(t, md.find("\n## ", t + 1) - t).c_str());
  std::fprintf(stderr, "shrike optimize: wrote %s/report.md, report.json and plots (%.0f s)\n",
               o.out_dir.c_str(), report.wall_s);
  return 0;
}

}  // namespace

Runner add_optimize(CLI::App& app, int argc, char** argv) {
  auto o = std::make_shared<optimize::OptimizeOptions>();
  for (int i = 0; i < argc; ++i) o->command += (i ? " " : "") + std::string(argv[i]);
  app.footer(
      "Stages: 0 naive service (f32 teacher, f32 KV, static batches); 1 + INT8 weights (q8_0 "
      "GPTQ, noisy calibration) and int8-mixed KV; 2 + pruning and distillation; 3 + speculative "
      "decoding (prompt lookup); 4 + continuous batching, paged KV, prefix cache; 5 + the task's "
      "output schema with jump-forward. Models are cached in OUT.");
  app.add_option("--data", o->data_dir,
                 "labelled utterances: a .jsonl or .csv file, a folder of them (split here: "
                 "train/dev/test, test_noisy and calibration from your own texts), or a folder "
                 "with train, dev and test .jsonl (test_noisy too, or it is derived)")
      ->required();
  app.add_option("--teacher", o->teacher, "teacher GGUF (default: trained here from --data)");
  app.add_option("--prompt", o->prompt,
                 "the prompt a given teacher was tuned on, {text} where the utterance goes "
                 "(`task set --prompt`; default: the teacher's task's, or shrike's own)");
  app.add_option("-o,--out", o->out_dir, "output folder: models, logs, report")->required();
  app.add_option("--preset", o->preset, "preset of the teacher trained here")
      ->check(CLI::IsMember({"tiny", "small", "base"}))
      ->capture_default_str();
  app.add_option("--epochs", o->epochs, "teacher training epochs")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--distill-epochs", o->distill_epochs, "student distillation epochs")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--calib", o->calib,
                 "calibration examples (default: the data's train and dev utterances through "
                 "the noise pass; 'builtin': the built-in generator's, all noisy)");
  app.add_option("--prune-heads", o->prune_heads, "fraction of KV groups pruned")
      ->check(CLI::Range(0.0, 0.95))
      ->capture_default_str();
  app.add_option("--prune-ffn", o->prune_ffn, "fraction of FFN channels pruned")
      ->check(CLI::Range(0.0, 0.95))
      ->capture_default_str();
  app.add_option("--prune-layers", o->prune_layers, "whole layers pruned (depth)")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_option("--prune-hidden", o->prune_hidden, "fraction of hidden channels pruned (width)")
      ->check(CLI::Range(0.0, 0.95))
      ->capture_default_str();
  app.add_option("-t,--threads", o->threads, "threads of every subcommand (default: theirs)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--batch-size", o->static_batch, "static batch size (and max-seqs everywhere)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--max-tokens", o->max_tokens,
                 "longest answer (0: the longest labelled answer in the teacher's tokens + 8)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  app.add_option("--c1-requests", o->c1_requests, "requests at concurrency 1 (0: all test ones)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--budget-ms", o->budget_ms, "end-to-end latency budget")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--burstiness", o->burstiness, "gamma shape of arrival gaps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--probes", o->max_probes, "rates probed per stage by the rate search")
      ->check(CLI::Range(1, 20))
      ->capture_default_str();
  app.add_option("--probe-repeats", o->probe_repeats,
                 "runs per probed rate at most (it passes when a majority of them do)")
      ->check(CLI::Range(1, 9))
      ->capture_default_str();
  app.add_option("--probe-requests", o->probe_requests, "most requests per probe")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--probe-seconds", o->probe_seconds, "seconds of arrivals per probe")
      ->check(CLI::Range(0.5, 600.0))
      ->capture_default_str();
  app.add_option("--max-rate", o->max_rate, "highest rate the rate search probes")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--common-rate", o->common_rate,
                 "req/s of the queue-wait run (default: twice stage 0's highest within budget)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--request-timeout", o->request_timeout_s, "per-request timeout, seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--eval-limit", o->eval_limit, "test examples scored per split (0: all)")
      ->check(CLI::NonNegativeNumber);
  return [o] { return run_optimize_cli(*o); };
}

}  // namespace shrike::cli
