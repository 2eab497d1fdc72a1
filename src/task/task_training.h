// The task's side of training: its examples as training sequences (the answer scored, not the
// utterance), the training loop over examples with the task's dev scores after each epoch, and
// the scored sequences of a KL evaluation. train/ and quant/ see only token sequences.
#pragma once

#include <functional>
#include <vector>

#include "core/thread_pool.h"
#include "data/example.h"
#include "quant/kl_eval.h"
#include "task/task_scores.h"
#include "tokenizer/tokenizer.h"
#include "train/trainer.h"

namespace shrike::task {

// BOS + task_prompt(text), then task_answer(example) + EOS; targets are the next token over the
// answer (and EOS) only: the model learns to answer, not to reproduce utterances.
train::TrainingSequence encode_task(const tokenizer::Tokenizer& tok, const data::Example& ex,
                                    const PromptFormat& format = {});
// encode_task_prompt (the prompt alone, as inference feeds it) is in task/task_prompt.h.

// An epoch's dev line: "intent 99.33%, slot F1 65.26%, exact 80.83%".
train::DevScores dev_scores(const TaskScores& s);

// Trains model in place on the examples (prompts in `format`: a user's task keeps its own)
// (train::train_sequences over encode_task), the dev examples (at most opt.dev_limit) scored after
// each epoch. Throws std::invalid_argument for no examples, a tokenizer of another vocabulary size,
// or an example longer than the context.
void train_task(train::Transformer<float>& model, const tokenizer::Tokenizer& tok,
                const std::vector<data::Example>& train, const std::vector<data::Example>& dev,
                const train::TrainOptions& opt, train::OptimizerState& state, ThreadPool& pool,
                const std::function<void(const train::EpochReport&)>& on_epoch = {},
                const PromptFormat& format = {});

// A task example as training encodes it (encode_task: BOS + prompt + gold answer + EOS), scoring
// only the positions that predict the answer and EOS.
std::vector<quant::ScoredSequence> task_sequences(const tokenizer::Tokenizer& tok,
                                                  const std::vector<data::Example>& examples,
                                                  const PromptFormat& format = {});

}  // namespace shrike::task
