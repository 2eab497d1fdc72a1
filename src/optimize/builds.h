// The models `shrike optimize` builds, as a table: each row one model file, the `shrike`
// subcommand that writes it and the inputs whose contents decide whether a cached copy still
// holds; one executor runs the rows in order (run_builds). The stages then serve these files.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "optimize/artefact_cache.h"
#include "optimize/pipeline.h"
#include "optimize/stages.h"

namespace shrike::optimize {

// What every step of one run shares: the options, the artefact cache, the log folder, and the
// progress line ("[  12.3 s] ...").
struct Run {
  const OptimizeOptions& o;
  ArtefactCache cache;
  std::string logs;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();

  void say(const std::string& msg) const;
  // The binary, then args.
  std::vector<std::string> cmd(std::initializer_list<std::string> args) const;
  std::vector<std::string> cmd(const std::vector<std::string>& args) const;
  void add_threads(std::vector<std::string>& argv) const;
  // Builds `artefact` with argv unless the manifest says the same recipe on the same inputs made
  // it already. The binary itself is not part of the key (a rebuild would invalidate everything).
  void build(const std::string& what, const std::string& artefact,
             const std::vector<std::string>& argv, const std::vector<std::string>& inputs,
             double timeout_s);
};

// Bounds on every child: a model build may train for hours (the full-size teacher).
inline constexpr double kBuildTimeout = 6 * 3600;

// The files the stages serve, and what building them found out.
struct Models {
  std::string teacher, teacher_q8, student, student_q8, draft, draft_q8, trimmed, draft_trimmed;
  std::string teacher_origin;  // for the report: trained here, or given (and how it was adapted)
  std::string draft_shape;     // "dim 64 layers 1 ..." for the report
  int64_t vocab_full = 0, vocab_trimmed = 0;  // the student's vocabulary before and after trimming
  bool use_trimmed = false;                   // trim_worthwhile: stage 5 serves the trimmed files

  const std::string& path(StageModel m) const;
  // The draft with the same vocabulary as the model m.
  const std::string& draft_for(StageModel m) const;
};

// One row of the table.
struct BuildStep {
  std::string what;    // the progress line's name of it
  std::string output;  // the file it writes
  // The subcommand and its arguments, computed when the step runs: a step may read what an
  // earlier one wrote (the draft's shape is the student's).
  std::function<std::vector<std::string>()> args = {};
  std::vector<std::string> inputs = {};  // whose contents key the cached copy
  bool threads = true;                   // pass the run's --threads
  std::function<bool()> needed = {};     // empty: always built
  std::function<void()> then = {};       // what the pipeline reads from the output once it exists
};

// The table for one run: teacher (trained, or the given one with the data's task attached when
// it has none), teacher INT8, pruned, distilled student, student INT8, a draft distilled from the
// student and its INT8, the student with its vocabulary trimmed and, when that is worth serving,
// the draft trimmed the same way. d: the data folder; calib: the calibration set. Fills m.
std::vector<BuildStep> model_builds(const OptimizeOptions& o, const std::string& d,
                                    const std::string& calib, Models& m);

// Runs every needed step in order, each through Run::build (cached when its key holds).
void run_builds(Run& run, const std::vector<BuildStep>& steps);

// A draft for speculative decoding, a fraction of the served student's cost: a quarter of its
// layers, half its width in 64-wide heads (one KV head), a quarter of its FFN, as `distill`
// options. Throws FileError when the student's GGUF lacks its shape.
std::vector<std::string> draft_shape_args(const std::string& student);

// The number of tokens in a model's vocabulary (its tokenizer.ggml.tokens).
int64_t vocab_size_of(const std::string& model);

}  // namespace shrike::optimize
