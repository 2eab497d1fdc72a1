// The training loop over tokenised sequences (a task's examples are turned into them by the task
// layer, task/task_training.h): shuffled ragged batches, cross-entropy on the targets
// (plus, when distilling, temperature-scaled KL against a teacher's logits), AdamW, clipping,
// warm-up + cosine schedule, dev accuracy after each epoch, checkpoints to resume from.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "tokenizer/vocab.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"
#include "train/transformer.h"

namespace shrike::train {

struct TrainOptions {
  int64_t epochs = 3;
  double lr = 1e-3, min_lr_fraction = 0.1, warmup_fraction = 0.03;
  AdamWParams adamw;
  double grad_clip = 1.0;
  // Residual dropout (Transformer::set_dropout): the fraction of each attention and FFN branch
  // output zeroed in training; a model that memorises a small dataset generalises better with it.
  float dropout = 0;
  // Weight of an auxiliary next-token loss on a task sequence's prompt (the utterance): the model
  // also learns to read the text it answers about (0: the answer alone is scored). The reported
  // loss stays the answer's.
  double prompt_loss = 0;
  // Decay of an exponential moving average of the weights (0: off), updated after every step and
  // what training leaves in the model (and the dev scores see): the average of the last ~1/(1 -
  // ema) steps' weights, which generalises better than the last step's alone. The raw weights go
  // on training; checkpoints keep both.
  double ema = 0;
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

// One training sequence: targets[t] is the id position t predicts (-1: no loss there). A task
// example scores its answer only (task/task_training.h); a language-model text every position.
struct TrainingSequence {
  std::vector<int32_t> tokens, targets;
  int64_t prompt_length = 0;  // tokens before the first target (0 for plain text)
};

// An epoch's scores on held-out data, from whoever evaluates (the task layer: intent accuracy,
// slot F1, exact match). n = 0: nothing was scored.
struct DevScores {
  int64_t n = 0;
  std::string summary;  // "intent 99.33%, slot F1 65.26%, exact 80.83%"
};

struct EpochReport {
  int64_t epoch = 0;
  double train_loss = 0;  // mean per target token over the epoch
  double seconds = 0, tokens_per_second = 0;
  DevScores dev;
};

// "epoch 2: loss 0.1741, 2945 tok/s, 299 s; dev (600): intent 99.33%, slot F1 65.26%, exact
// 80.83%": one line per epoch for progress output.
std::string describe(const EpochReport& r);

// What train_sequences reports as an epoch's dev scores.
using SequenceEvaluator = std::function<DevScores(const Transformer<float>&)>;

// Trains model in place from state (state.step > 0 resumes: the batches already done are
// skipped, the order being a function of the seed and the epoch), over sequences already
// tokenised, so any text (a task's examples, a teacher's own samples for a draft model) trains
// the same way. vocab goes into the checkpoints; evaluate, when set, fills each epoch's dev
// scores; on_epoch is called after each epoch. Throws std::invalid_argument for no sequences, one
// longer than the context, or targets not matching their tokens.
void train_sequences(Transformer<float>& model, const tokenizer::Vocab& vocab,
                     const std::vector<TrainingSequence>& seqs, const TrainOptions& opt,
                     OptimizerState& state, ThreadPool& pool,
                     const SequenceEvaluator& evaluate = {},
                     const std::function<void(const EpochReport&)>& on_epoch = {});

// Batches of whole sequences (indices into seqs) of at most batch_tokens tokens each (a longer
// sequence goes alone), in a shuffled order determined by seed and epoch.
std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& lengths,
                                               int64_t batch_tokens, uint64_t seed, int64_t epoch);

}  // namespace shrike::train
