// A task model's answers through the serving engine, as `shrike serve` gives them: greedy, with
// or without the task's schema (data::task_schema) and jump-forward. `shrike eval --task-schema
// on|off` compares the two on the same path, so only the constraint differs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/example.h"
#include "model/model.h"
#include "task/task_definition.h"
#include "tokenizer/tokenizer.h"

namespace shrike::cli {

struct EngineTaskAnswers {
  std::vector<std::string> texts;
  std::vector<int64_t> model_steps;  // forward passes per answer
  std::vector<int64_t> tokens;       // answer tokens
};

// schema: the task whose schema constrains the answers, or null for free-form answers.
// values_from_utterance: slot values are substrings of each example's utterance (as serve does
// for the task's prompts), else any string (as serve does for other prompts).
// The engine runs with an f32 KV cache and batch-invariant products, so answers do not depend on
// what else is batched. Throws std::runtime_error when an answer fails.
EngineTaskAnswers engine_task_answers(const model::Model& m, const tokenizer::Tokenizer& tok,
                                      const std::vector<data::Example>& examples,
                                      const task::TaskDefinition* schema, bool jump_forward,
                                      int threads, bool values_from_utterance = true,
                                      int64_t max_answer_tokens = 96,
                                      const task::PromptFormat& format = {});

}  // namespace shrike::cli
