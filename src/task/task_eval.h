// Greedy task answers from a model for evaluation, and a task model's tokenizer: what `shrike
// train` (dev accuracy per epoch), `shrike distill` and `shrike eval` share. Inference only: the
// training side of the task is task_training.h.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "data/example.h"
#include "model/model.h"
#include "task/task_format.h"
#include "task/task_prompt.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/tokenizer.h"

namespace shrike::task {

// The merged pieces of a task tokenizer by default. A small model trained from scratch copies
// slot values it has never seen only when their tokens are common ones: on SNIPS (base preset, 3
// epochs) slot F1 was 42% with 4,096 pieces (~3,707 merges), 59% with 1,024 (~635) and 67% with
// 512 (~123 merges, near characters), at 1.5x the tokens per example (docs/RESULTS.md).
inline constexpr int32_t kTaskTokenizerMerges = 160;

// BPE options for a task model's tokenizer: spaces and CJK characters stay single tokens (so a
// slot value has the same tokens inside the utterance and in the JSON answer, which a small
// model learns to copy much sooner), digits one token each, at most max_merges merged pieces
// (every character seen twice is a piece of its own whatever the limits).
tokenizer::BpeTrainOptions task_tokenizer_options(int32_t vocab_size = 4096,
                                                  int32_t max_merges = kTaskTokenizerMerges);
// What the model reads and writes: every example's prompt and answer, in order.
std::vector<std::string> task_tokenizer_texts(const std::vector<data::Example>& examples);
// A tokenizer trained on what the model reads and writes: every example's prompt and answer.
tokenizer::Vocab train_task_tokenizer(const std::vector<data::Example>& examples,
                                      const tokenizer::BpeTrainOptions& opt);

// Greedy answers for every example, decoded in batches of up to `batch` sequences through
// Model::forward_batch, each stopping at EOS or max_answer_tokens. Returns the raw answer
// texts (parse them with task::parse_task_answer). make_cache gives each sequence its KV cache
// (empty: f32), so task accuracy can be measured under any cache type. Prompts in `format` (the
// model's task's: task_definition.h prompt_format_of).
std::vector<std::string> generate_answers(const model::Model& m, const tokenizer::Tokenizer& tok,
                                          const std::vector<data::Example>& examples,
                                          ThreadPool& pool, int64_t max_answer_tokens = 96,
                                          int64_t batch = 64,
                                          const model::KvCacheFactory& make_cache = {},
                                          const PromptFormat& format = {});

std::vector<TaskPrediction> predict_task(const model::Model& m, const tokenizer::Tokenizer& tok,
                                         const std::vector<data::Example>& examples,
                                         ThreadPool& pool, const PromptFormat& format = {});

}  // namespace shrike::task
