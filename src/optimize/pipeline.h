// `shrike optimize`: builds every stage's model from the previous one (train, quantize, prune,
// distill: real `shrike` subcommands as child processes, cached in OUT), then serves each stage
// with the real `shrike serve` and measures it with the real `shrike loadtest` over loopback, on
// the same held-out requests and arrival pattern, and writes report.md, report.json and SVGs.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "data/user_data.h"
#include "optimize/report.h"

namespace shrike::optimize {

inline constexpr const char* kBuiltinCalib = "builtin";

struct OptimizeOptions {
  std::string shrike_bin;  // the binary whose subcommands do the work
  std::string data_dir;    // labelled utterances: a file, a folder of files, or train/dev/test
  std::string teacher, out_dir;
  // The prompt a given teacher was tuned on ("PREFIX{text}SUFFIX", `task set --prompt`); empty:
  // its task's, or shrike's own.
  std::string prompt;
  std::string command;  // the command line, for the report
  // Building the models.
  std::string preset = "small";  // teacher trained when none is given
  int epochs = 4, distill_epochs = 2;
  std::string calib;  // noisy calibration set; default: the data's train + dev, noisy;
                      // kBuiltinCalib: the built-in generator's
  int calib_limit = 256;
  double prune_heads = 0.5, prune_ffn = 0.5;
  int prune_layers = 0;     // whole layers removed (depth)
  double prune_hidden = 0;  // fraction of residual channels removed (width)
  int threads = 0;          // 0: each subcommand's default
  // Serving and measuring.
  int static_batch = 8;
  int max_tokens = 0;     // 0: the longest labelled answer in the teacher's tokens + 8
  int c1_requests = 100;  // 0: every test utterance
  double budget_ms = 100, target = 0.99, burstiness = 0.3;
  int max_probes = 6, probe_requests = 400;
  double probe_growth = 4;  // the rate search's factor between probes until one fails
  int probe_repeats = 3;    // runs per probed rate at most; it passes when a majority pass
  double probe_seconds = 6;
  double max_rate = 4000;  // the rate search's upper bound (a stage passing it shows ">=")
  double common_rate = 0;  // 0: twice stage 0's highest rate within the budget (or its highest
                           // probed rate when none passed)
  double request_timeout_s = 2;
  int eval_limit = 0;                                // 0: every test example
  std::function<void(const std::string&)> progress;  // one line per step
};

// Checks the data and the teacher, then runs. Throws FileError naming a bad input, runtime_error
// naming a failed step and its log (OUT/logs/).
Report run_optimize(const OptimizeOptions& options);

// Writes report.md, report.json and the plots into dir.
void write_report(const Report& report, const std::string& dir);

// The splits of the user's data (`input`: see data::read_labelled and data::read_presplit),
// written into dir as train, dev, test, test_noisy and calib .jsonl. Throws FileError naming a
// bad file or line, or an input too small to hold out any test example.
data::UserSplits prepare_data(const std::string& input, const std::string& dir);
// Throws FileError when the teacher is missing, or neither a GGUF file nor a folder with
// config.json (a Hugging Face model).
void check_teacher(const std::string& path);

}  // namespace shrike::optimize
