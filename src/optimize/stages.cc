#include "optimize/stages.h"

#include <algorithm>

namespace shrike::optimize {

const char* stage_model_name(StageModel m) {
  switch (m) {
    case StageModel::Teacher:
      return "teacher (f32)";
    case StageModel::TeacherInt8:
      return "teacher, q8_0 gptq (noisy calibration)";
    case StageModel::StudentInt8:
      return "pruned + distilled student, q8_0 gptq (noisy calibration)";
    case StageModel::StudentInt8Trimmed:
      return "pruned + distilled student, q8_0 gptq (noisy calibration), vocabulary trimmed";
  }
  return "?";
}

const char* spec_kind_name(SpecKind k) {
  return k == SpecKind::Draft ? "a distilled draft model" : "prompt lookup";
}

std::vector<Stage> default_stages(int static_batch) {
  const std::string b = std::to_string(static_batch);
  // Every stage lists its full options; max-seqs is the same everywhere so that continuous
  // batching (stage 4) changes the batching mode, not the number of running sequences. The
  // models carry their task, which `shrike serve` would enforce by default: stages 0-4 answer
  // free-form (--no-task-schema) so that the schema arrives in stage 5 alone.
  const std::vector<std::string> naive = {"--batching",        "static",
                                          "--batch-size",      b,
                                          "--max-seqs",        b,
                                          "--kv-type",         "f32",
                                          "--no-prefix-cache", "--no-task-schema"};
  std::vector<std::string> int8 = naive;
  int8[7] = "int8-mixed";
  // Speculation: the options are stage 2's; the pipeline adds the kind (--spec draft --draft
  // MODEL, or --spec ngram) after measuring both on stage 3.
  const std::vector<std::string> continuous = {"--batching", "continuous", "--max-seqs",      b,
                                               "--kv-type",  "int8-mixed", "--no-task-schema"};
  std::vector<std::string> schema = continuous;
  schema.erase(std::find(schema.begin(), schema.end(), "--no-task-schema"));
  return {
      {0, "naive service", true, "", StageModel::Teacher, naive},
      {1, "+ INT8 weights (noisy calibration), int8-mixed KV", true, "", StageModel::TeacherInt8,
       int8},
      {2, "+ structured pruning and distillation", true, "", StageModel::StudentInt8, int8},
      {3, "+ speculative decoding", true, "", StageModel::StudentInt8, int8, false,
       /*speculative=*/true},
      {4, "+ continuous batching, paged KV, prefix cache", true, "", StageModel::StudentInt8,
       continuous, false, true},
      // The pipeline serves the trimmed student here only when trimming shrinks its vocabulary
      // (trim_worthwhile()); a model trained with its own task BPE already has the task's.
      {5, "+ vocabulary trimmed to the task, the task's output schema with jump-forward", true, "",
       StageModel::StudentInt8Trimmed, schema, /*task_schema=*/true, /*speculative=*/true},
  };
}

bool trim_worthwhile(int64_t vocab_before, int64_t vocab_after) {
  return vocab_after > 0 && vocab_after * 10 <= vocab_before * 9;
}

std::vector<std::string> option_diff(const std::map<std::string, std::string>& before,
                                     const std::map<std::string, std::string>& after,
                                     const std::vector<std::string>& ignored) {
  auto skip = [&](const std::string& k) {
    return std::find(ignored.begin(), ignored.end(), k) != ignored.end();
  };
  std::vector<std::string> out;
  for (const auto& [k, v] : after) {
    if (skip(k)) continue;
    const auto it = before.find(k);
    if (it == before.end())
      out.push_back(k + ": " + v + " (added)");
    else if (it->second != v)
      out.push_back(k + ": " + it->second + " -> " + v);
  }
  for (const auto& [k, v] : before)
    if (!skip(k) && !after.count(k)) out.push_back(k + ": removed (was " + v + ")");
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace shrike::optimize
