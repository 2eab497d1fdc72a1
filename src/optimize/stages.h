// The staged report's stage table: each stage names the model it serves and the `shrike serve`
// options it adds to the previous stage. A stage whose feature does not exist yet is listed with
// `available = false` and a reason; the report shows it as "not available" and measures nothing.
// Making it available later is a change to its entry here (and, for a new model, to the pipeline
// that builds it).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shrike::optimize {

// The models the pipeline builds (pipeline.cc): the full-precision teacher, the teacher with
// INT8 weights calibrated on noisy traffic, the pruned and distilled student with the same
// quantisation, and that student with its vocabulary trimmed to the task's tokens.
enum class StageModel { Teacher, TeacherInt8, StudentInt8, StudentInt8Trimmed };
const char* stage_model_name(StageModel m);

struct Stage {
  int id = 0;
  std::string name;  // "naive service", "+ INT8 weights, int8-mixed KV", ...
  bool available = true;
  std::string reason;  // why not available
  StageModel model = StageModel::Teacher;
  std::vector<std::string> serve_args;  // the full `shrike serve` options (no model, no port)
  // Answers constrained to the model's task schema: accuracy is measured that way too
  // (`shrike eval --task-schema on`, through the serving engine).
  bool task_schema = false;
  // Speculative decoding on: the pipeline adds the kind (a distilled draft or prompt lookup)
  // that measured faster in the first speculative stage, so later stages keep it.
  bool speculative = false;
};

// The speculative decoding kinds the first speculative stage compares.
enum class SpecKind { Draft, Ngram };
const char* spec_kind_name(SpecKind k);

// Stages 0..5 as the issue defines them. static_batch: static batch size (and max_seqs of all
// stages, so only the batching mode changes between them).
std::vector<Stage> default_stages(int static_batch);

// Whether trimming a vocabulary of `vocab_before` tokens to `vocab_after` is worth serving the
// trimmed model in stage 5: at least 10% fewer tokens. Otherwise stage 5 serves the untrimmed
// student (and the report says why).
bool trim_worthwhile(int64_t vocab_before, int64_t vocab_after);

// What differs between two stages' effective serving options (as their servers reported them):
// "key: old -> new", "key: new (added)", "key: removed (was old)", in key order. Keys listed in
// `ignored` (e.g. the model's byte count, which follows from the model file) are skipped.
std::vector<std::string> option_diff(const std::map<std::string, std::string>& before,
                                     const std::map<std::string, std::string>& after,
                                     const std::vector<std::string>& ignored = {});

}  // namespace shrike::optimize
