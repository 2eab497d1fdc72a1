// The intent/slot task as token sequences, and greedy answers from a model for evaluation:
// what `shrike train` (dev accuracy per epoch), `shrike distill` and `shrike eval` share.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "data/example.h"
#include "data/task_format.h"
#include "model/model.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/tokenizer.h"
#include "train/task_prompt.h"
#include "train/transformer.h"

namespace shrike::train {

// BOS + task_prompt(text), then task_answer(example) + EOS; targets are the next token over the
// answer (and EOS) only: the model learns to answer, not to reproduce utterances.
struct TaskSequence {
  std::vector<int32_t> tokens, targets;
  int64_t prompt_length = 0;
};
TaskSequence encode_task(const tokenizer::Tokenizer& tok, const data::Example& ex);
// encode_task_prompt (the prompt alone, as inference feeds it) is in train/task_prompt.h.

// BPE options for a task model's tokenizer: spaces and CJK characters stay single tokens (so a
// slot value has the same tokens inside the utterance and in the JSON answer, which a small
// model learns to copy much sooner), digits one token each.
tokenizer::BpeTrainOptions task_tokenizer_options(int32_t vocab_size = 4096);
// A tokenizer trained on what the model reads and writes: every example's prompt and answer.
tokenizer::Vocab train_task_tokenizer(const std::vector<data::Example>& examples,
                                      const tokenizer::BpeTrainOptions& opt);

// The inference engine's model over the trainer's f32 parameters (copied and repacked).
std::unique_ptr<model::Model> to_inference_model(const Transformer<float>& t);

// Greedy answers for every example, decoded in batches of up to `batch` sequences through
// Model::forward_batch, each stopping at EOS or max_answer_tokens. Returns the raw answer
// texts (parse them with data::parse_task_answer). make_cache gives each sequence its KV cache
// (empty: f32), so task accuracy can be measured under any cache type.
std::vector<std::string> generate_answers(const model::Model& m, const tokenizer::Tokenizer& tok,
                                          const std::vector<data::Example>& examples,
                                          ThreadPool& pool, int64_t max_answer_tokens = 96,
                                          int64_t batch = 64,
                                          const model::KvCacheFactory& make_cache = {});

std::vector<data::TaskPrediction> predict_task(const model::Model& m,
                                               const tokenizer::Tokenizer& tok,
                                               const std::vector<data::Example>& examples,
                                               ThreadPool& pool);

}  // namespace shrike::train
