// The training loop over task examples (or any tokenised text): shuffled ragged batches,
// cross-entropy on the answers
// (plus, when distilling, temperature-scaled KL against a teacher's logits), AdamW, clipping,
// warm-up + cosine schedule, dev accuracy after each epoch, checkpoints to resume from.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "data/example.h"
#include "data/task_scores.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"
#include "train/task_eval.h"
#include "train/transformer.h"

namespace shrike::train {

struct TrainOptions {
  int64_t epochs = 3;
  double lr = 1e-3, min_lr_fraction = 0.1, warmup_fraction = 0.03;
  AdamWParams adamw;
  double grad_clip = 1.0;
  int64_t batch_tokens = 4096;  // a batch holds whole sequences up to this many tokens
  uint64_t seed = 1;
  int64_t dev_limit = 600;  // dev examples decoded after each epoch (0: none)
  // Distillation: loss = alpha * temp^2 KL(teacher || student) + (1 - alpha) * CE(labels).
  // Runs forward only during training (Transformer::set_forward_only), restored afterwards.
  Transformer<float>* teacher = nullptr;
  double alpha = 0.5;
  float temp = 2.0f;
  // The token embedding (and an untied output matrix) keep their values: no gradients or
  // optimizer state for them (Transformer::freeze_embeddings).
  bool freeze_embeddings = false;
  std::string checkpoint_path;  // written after each epoch when not empty
  std::string model_name = "shrike-task";
  bool progress = true;  // a progress line on stderr
};

struct EpochReport {
  int64_t epoch = 0;
  double train_loss = 0;  // mean per target token over the epoch
  double seconds = 0, tokens_per_second = 0;
  data::TaskScores dev;
};

// "epoch 2: loss 0.1741, 2945 tok/s, 299 s; dev (600): intent 99.33%, slot F1 65.26%, exact
// 80.83%": one line per epoch for progress output.
std::string describe(const EpochReport& r);

// Trains model in place from state (state.step > 0 resumes: the batches already done are
// skipped, the order being a function of the seed and the epoch). on_epoch is called after each
// epoch. Throws std::invalid_argument for empty data or sequences longer than the context.
void train_task(Transformer<float>& model, const tokenizer::Tokenizer& tok,
                const std::vector<data::Example>& train, const std::vector<data::Example>& dev,
                const TrainOptions& opt, OptimizerState& state, ThreadPool& pool,
                const std::function<void(const EpochReport&)>& on_epoch = {});

// What train_sequences reports as an epoch's dev scores (the task's, for task models).
using SequenceEvaluator = std::function<data::TaskScores(const Transformer<float>&)>;

// The loop under train_task, over sequences already tokenised: targets[t] is the id position t
// predicts (-1: no loss there), so any text (a teacher's own samples, for a draft model) trains
// the same way. vocab goes into the checkpoints; evaluate, when set, fills each epoch's dev
// scores. Throws std::invalid_argument for no sequences, one longer than the context, or targets
// not matching their tokens.
void train_sequences(Transformer<float>& model, const tokenizer::Vocab& vocab,
                     const std::vector<TaskSequence>& seqs, const TrainOptions& opt,
                     OptimizerState& state, ThreadPool& pool,
                     const SequenceEvaluator& evaluate = {},
                     const std::function<void(const EpochReport&)>& on_epoch = {});

// Batches of whole sequences (indices into seqs) of at most batch_tokens tokens each (a longer
// sequence goes alone), in a shuffled order determined by seed and epoch.
std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& lengths,
                                               int64_t batch_tokens, uint64_t seed, int64_t epoch);

}  // namespace shrike::train
