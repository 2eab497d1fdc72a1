// The training loop: a tiny model learns a small task, runs are deterministic for a seed, and
// resuming from a checkpoint continues exactly where the run stopped.
#include "train/trainer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "data/generator.h"
#include "task/task_eval.h"
#include "task/task_training.h"
#include "tokenizer/bpe_trainer.h"
#include "train/checkpoint.h"
#include "train/inference_model.h"
#include "train/presets.h"
#include "train/teacher_samples.h"

namespace shrike::train {
namespace {

using task::encode_task;
using task::predict_task;
using task::train_task;

struct Fixture {
  std::vector<data::Example> examples;
  tokenizer::Vocab vocab;
};

// 24 English examples from the built-in generator and a tokenizer trained on them.
const Fixture& fixture() {
  static const Fixture f = [] {
    data::GeneratorOptions g;
    g.langs = {"en"};
    g.n_train = 24;
    g.noise = 0;
    g.seed = 3;
    Fixture out;
    out.examples = data::generate_dataset(g).train;
    std::vector<std::string> texts;
    for (const auto& ex : out.examples) {
      texts.push_back(task::task_prompt(ex.text));
      texts.push_back(task::task_answer(ex));
    }
    tokenizer::BpeTrainOptions bo;
    bo.vocab_size = 400;
    out.vocab = tokenizer::train_bpe(texts, bo);
    return out;
  }();
  return f;
}

TrainOptions quiet(int64_t epochs) {
  TrainOptions o;
  o.epochs = epochs;
  o.lr = 3e-3;
  o.batch_tokens = 512;
  o.dev_limit = 0;
  o.progress = false;
  o.seed = 9;
  return o;
}

std::unique_ptr<Transformer<float>> fresh_model() {
  auto m = std::make_unique<Transformer<float>>(preset_config("tiny", fixture().vocab.size()));
  m->init_random(5);
  return m;
}

TEST(Trainer, TinyModelLearnsItsTrainingSet) {
  const Fixture& f = fixture();
  const tokenizer::Tokenizer tok(f.vocab);
  auto m = fresh_model();
  ThreadPool pool(2);
  OptimizerState state;
  std::vector<double> losses;
  train_task(*m, tok, f.examples, {}, quiet(40), state, pool,
             [&](const EpochReport& r) { losses.push_back(r.train_loss); });
  ASSERT_EQ(losses.size(), 40u);
  EXPECT_GT(losses.front(), 4.0);  // ~ln(400) at the start
  EXPECT_LT(losses.back(), 0.2);
  const auto scores =
      task::score_task(f.examples, predict_task(*to_inference_model(*m), tok, f.examples, pool));
  EXPECT_GE(scores.intent_accuracy, 0.9);
  EXPECT_GE(scores.slot_f1, 0.8);
}

// Two runs from the same seed give the same weights, and a run stopped after a checkpoint and
// resumed from it ends where the straight run did.
void expect_deterministic_and_resumable(const TrainOptions& opt) {
  const Fixture& f = fixture();
  const tokenizer::Tokenizer tok(f.vocab);
  ThreadPool pool(2);
  auto straight = fresh_model();
  OptimizerState s1;
  train_task(*straight, tok, f.examples, {}, opt, s1, pool);

  auto again = fresh_model();
  OptimizerState s2;
  train_task(*again, tok, f.examples, {}, opt, s2, pool);
  EXPECT_EQ(again->params(), straight->params());

  // The same 4-epoch run, stopped (as by a crash) right after the checkpoint of epoch 2, then
  // resumed from the file.
  // One file per test and process: ctest runs this binary's tests in parallel processes, and
  // two of them sharing a path had one rewrite the checkpoint the other had mapped (SIGBUS).
  const std::string ckpt =
      (std::filesystem::temp_directory_path() /
       ("shrike_trainer_test_" + std::to_string(getpid()) + "_" +
        ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".ckpt.gguf"))
          .string();
  auto first = fresh_model();
  OptimizerState s3;
  TrainOptions interrupted = opt;
  interrupted.checkpoint_path = ckpt;
  struct Stop {};
  EXPECT_THROW(train_task(*first, tok, f.examples, {}, interrupted, s3, pool,
                          [](const EpochReport& r) {
                            if (r.epoch == 2) throw Stop{};
                          }),
               Stop);
  TrainableFile resumed = load_trainable(ckpt);
  EXPECT_EQ(resumed.state.step, s1.step / 2);
  EXPECT_NE(resumed.model->params(), straight->params());
  train_task(*resumed.model, tok, f.examples, {}, opt, resumed.state, pool);
  EXPECT_EQ(resumed.state.step, s1.step);
  EXPECT_EQ(resumed.model->params(), straight->params());
  std::filesystem::remove(ckpt);
}

TEST(Trainer, SameSeedSameWeightsAndResumeContinuesExactly) {
  expect_deterministic_and_resumable(quiet(4));
}

// Dropout's masks come from the seed and the step, so they too repeat and resume exactly.
TEST(Trainer, WithDropoutAndPromptLossSameSeedSameWeightsAndResumeContinuesExactly) {
  TrainOptions o = quiet(4);
  o.dropout = 0.1f;
  o.prompt_loss = 0.5;
  expect_deterministic_and_resumable(o);
}

// The weight average (TrainOptions::ema) does not change what the raw weights learn, is what the
// model leaves with, and is saved in checkpoints, so a resumed run ends where the straight one did.
TEST(Trainer, WeightAverageResumesExactlyAndIsWhatTheModelLeavesWith) {
  const Fixture& f = fixture();
  const tokenizer::Tokenizer tok(f.vocab);
  ThreadPool pool(2);
  auto plain = fresh_model();
  OptimizerState s1;
  train_task(*plain, tok, f.examples, {}, quiet(4), s1, pool);
  EXPECT_TRUE(s1.ema.empty());

  const std::string ckpt =
      (std::filesystem::temp_directory_path() / "shrike_trainer_ema_test.ckpt.gguf").string();
  TrainOptions o = quiet(4);
  o.ema = 0.9;
  o.checkpoint_path = ckpt;
  auto averaged = fresh_model();
  OptimizerState s2;
  train_task(*averaged, tok, f.examples, {}, o, s2, pool);
  const TrainableFile last = load_trainable(ckpt);
  EXPECT_EQ(last.model->params(), plain->params());  // the raw weights, as without the average
  EXPECT_EQ(last.state.ema, averaged->params());     // the model leaves with the average
  EXPECT_NE(averaged->params(), plain->params());
  // An average of recent weights: nearer the last step's weights than the initial ones are.
  const auto initial = fresh_model();
  double to_last = 0, initial_to_last = 0;
  for (size_t i = 0; i < plain->params().size(); ++i) {
    to_last += std::pow(averaged->params()[i] - plain->params()[i], 2);
    initial_to_last += std::pow(initial->params()[i] - plain->params()[i], 2);
  }
  EXPECT_LT(to_last, 0.25 * initial_to_last) << to_last << " vs " << initial_to_last;

  // Stopped (as by a crash) right after the checkpoint of epoch 2, then resumed from the file.
  auto first = fresh_model();
  OptimizerState s3;
  struct Stop {};
  EXPECT_THROW(train_task(*first, tok, f.examples, {}, o, s3, pool,
                          [](const EpochReport& r) {
                            if (r.epoch == 2) throw Stop{};
                          }),
               Stop);
  TrainableFile resumed = load_trainable(ckpt);
  std::filesystem::remove(ckpt);
  EXPECT_EQ(resumed.state.ema.size(), plain->params().size());
  o.checkpoint_path.clear();
  train_task(*resumed.model, tok, f.examples, {}, o, resumed.state, pool);
  EXPECT_EQ(resumed.model->params(), averaged->params());
}

// Mean next-token loss over the prompts' positions (those predicting the prompt's own tokens).
double prompt_loss_of(Transformer<float>& m, const tokenizer::Tokenizer& tok, ThreadPool& pool) {
  TokenBatch b;
  for (const data::Example& ex : fixture().examples) {
    const TrainingSequence s = encode_task(tok, ex);
    std::vector<int32_t> targets(s.tokens.size(), -1);
    for (int64_t t = 0; t + 1 < s.prompt_length; ++t) targets[size_t(t)] = s.tokens[size_t(t) + 1];
    b.add(s.tokens, targets);
  }
  const std::vector<float>& logits = m.forward(b, pool);
  std::vector<float> d(logits.size());
  const int64_t M = m.n_target_rows();
  return cross_entropy(d.data(), logits.data(), m.target_ids().data(), M, m.config().vocab_size,
                       1.0, pool) /
         double(M);
}

// The auxiliary prompt loss trains the model to read its utterances, and the reported loss stays
// the answer's (about ln(400) in the first epoch either way).
TEST(Trainer, PromptLossTeachesTheUtterancesAndReportsTheAnswerLoss) {
  const Fixture& f = fixture();
  const tokenizer::Tokenizer tok(f.vocab);
  ThreadPool pool(2);
  auto plain = fresh_model(), reading = fresh_model();
  OptimizerState s1, s2;
  std::vector<double> plain_losses, reading_losses;
  train_task(*plain, tok, f.examples, {}, quiet(6), s1, pool,
             [&](const EpochReport& r) { plain_losses.push_back(r.train_loss); });
  TrainOptions o = quiet(6);
  o.prompt_loss = 1.0;
  train_task(*reading, tok, f.examples, {}, o, s2, pool,
             [&](const EpochReport& r) { reading_losses.push_back(r.train_loss); });
  const double plain_prompt = prompt_loss_of(*plain, tok, pool);
  const double reading_prompt = prompt_loss_of(*reading, tok, pool);
  EXPECT_LT(reading_prompt, 0.85 * plain_prompt) << plain_prompt << " vs " << reading_prompt;
  EXPECT_NEAR(reading_losses.front(), plain_losses.front(), 0.5);
}

// Batch counts per epoch for the fixture at batch_tokens, epochs 0..n-1 (seed 9, as quiet()).
std::vector<int64_t> batch_counts(const tokenizer::Tokenizer& tok, int64_t batch_tokens,
                                  int64_t n) {
  std::vector<int64_t> lengths;
  for (const auto& ex : fixture().examples)
    lengths.push_back(int64_t(encode_task(tok, ex).tokens.size()));
  std::vector<int64_t> counts;
  for (int64_t e = 0; e < n; ++e)
    counts.push_back(int64_t(make_batches(lengths, batch_tokens, 9, e).size()));
  return counts;
}

TEST(Trainer, EpochsWithDifferentBatchCountsAreEachTrainedWhole) {
  // The shuffled order packs into a different number of batches in each epoch. Find a batch size
  // where epoch 0 has more batches than epoch 1 (a step count taken from epoch 0 alone then
  // starts epoch 2 before its first batch) and where epoch 1 has fewer than epoch 2.
  const Fixture& f = fixture();
  const tokenizer::Tokenizer tok(f.vocab);
  int64_t batch_tokens = 0;
  std::vector<int64_t> counts;
  for (int64_t bt = 96; bt <= 1024 && batch_tokens == 0; bt += 8) {
    counts = batch_counts(tok, bt, 3);
    if (counts[0] > counts[1] && counts[1] < counts[2]) batch_tokens = bt;
  }
  ASSERT_GT(batch_tokens, 0) << "no batch size packs the fixture's epochs differently";

  ThreadPool pool(2);
  TrainOptions o = quiet(3);
  o.batch_tokens = batch_tokens;
  std::vector<int64_t> steps_after;
  auto straight = fresh_model();
  OptimizerState s1;
  train_task(*straight, tok, f.examples, {}, o, s1, pool,
             [&](const EpochReport&) { steps_after.push_back(s1.step); });
  ASSERT_EQ(steps_after.size(), 3u);
  EXPECT_EQ(steps_after[0], counts[0]);
  EXPECT_EQ(steps_after[1], counts[0] + counts[1]);
  EXPECT_EQ(steps_after[2], counts[0] + counts[1] + counts[2]);

  // Resumed after the second epoch (step counts[0] + counts[1]), the run ends where the straight
  // one does.
  const std::string ckpt =
      (std::filesystem::temp_directory_path() / "shrike_trainer_epochs_test.ckpt.gguf").string();
  auto first = fresh_model();
  OptimizerState s2;
  TrainOptions interrupted = o;
  interrupted.checkpoint_path = ckpt;
  struct Stop {};
  EXPECT_THROW(train_task(*first, tok, f.examples, {}, interrupted, s2, pool,
                          [](const EpochReport& r) {
                            if (r.epoch == 2) throw Stop{};
                          }),
               Stop);
  TrainableFile resumed = load_trainable(ckpt);
  EXPECT_EQ(resumed.state.step, counts[0] + counts[1]);
  train_task(*resumed.model, tok, f.examples, {}, o, resumed.state, pool);
  EXPECT_EQ(resumed.state.step, s1.step);
  EXPECT_EQ(resumed.model->params(), straight->params());
  std::filesystem::remove(ckpt);
}

// Mean KL(teacher || student) per answer token over the examples.
double mean_kl(Transformer<float>& teacher, Transformer<float>& student, const TokenBatch& b,
               ThreadPool& pool) {
  const std::vector<float> t = teacher.forward(b, pool);
  const std::vector<float>& s = student.forward(b, pool);
  std::vector<float> d(s.size());
  const int64_t M = student.n_target_rows();
  return kl_distill(d.data(), s.data(), t.data(), nullptr, M, student.config().vocab_size, 1.0f,
                    1.0, pool) /
         double(M);
}

TEST(Trainer, DistillationPullsTheStudentTowardsTheTeacher) {
  const Fixture& f = fixture();
  const tokenizer::Tokenizer tok(f.vocab);
  ThreadPool pool(2);
  auto teacher = fresh_model();
  OptimizerState ts;
  train_task(*teacher, tok, f.examples, {}, quiet(10), ts, pool);
  // Pure KL (alpha 1): the labels are never used; the student must move towards the teacher's
  // distributions, far more than its own initialisation is from them.
  auto student = std::make_unique<Transformer<float>>(preset_config("tiny", f.vocab.size()));
  student->init_random(77);
  TokenBatch all;
  for (const auto& ex : f.examples) {
    const TrainingSequence s = encode_task(tok, ex);
    all.add(s.tokens, s.targets);
  }
  const double before = mean_kl(*teacher, *student, all, pool);
  TrainOptions d = quiet(10);
  d.teacher = teacher.get();
  d.alpha = 1.0;
  d.temp = 1.0f;
  OptimizerState ss;
  train_task(*student, tok, f.examples, {}, d, ss, pool);
  const double after = mean_kl(*teacher, *student, all, pool);
  EXPECT_GT(before, 0.5);
  EXPECT_LT(after, 0.25 * before) << "before " << before << " after " << after;
}

// Multiply-adds per token of a model's matrices (embedding lookup excluded, output included).
int64_t macs_per_token(const model::ModelConfig& c) {
  return body_param_count(c) + c.dim * c.vocab_size;
}

TEST(Trainer, DraftPresetIsSeveralTimesCheaperThanBase) {
  for (int64_t vocab : {400, 3700}) {
    const model::ModelConfig draft = preset_config("draft", vocab),
                             base = preset_config("base", vocab);
    EXPECT_LE(draft.n_layers, 2);
    EXPECT_GE(body_param_count(base), 7 * body_param_count(draft));  // 7.99x
    EXPECT_GE(macs_per_token(base), 4 * macs_per_token(draft)) << vocab;
  }
}

TEST(Trainer, FreshDraftStudentDistillsFromTheTeacher) {
  const Fixture& f = fixture();
  const tokenizer::Tokenizer tok(f.vocab);
  ThreadPool pool(2);
  auto teacher = fresh_model();
  teacher->init_random(6);
  OptimizerState ts;
  train_task(*teacher, tok, f.examples, {}, quiet(6), ts, pool);
  model::ModelConfig tc = teacher->config();
  const model::ModelConfig dc = student_config("draft", tc);
  EXPECT_EQ(dc.vocab_size, tc.vocab_size);
  EXPECT_EQ(dc.context_length, tc.context_length);
  EXPECT_EQ(dc.bos_id, tc.bos_id);
  EXPECT_EQ(dc.eos_id, tc.eos_id);
  EXPECT_EQ(dc.n_layers, preset_config("draft", tc.vocab_size).n_layers);
  EXPECT_EQ(dc.dim, preset_config("draft", tc.vocab_size).dim);

  auto student = std::make_unique<Transformer<float>>(dc);
  student->init_random(7);
  TokenBatch all;
  for (const auto& ex : f.examples) {
    const TrainingSequence s = encode_task(tok, ex);
    all.add(s.tokens, s.targets);
  }
  const double before = mean_kl(*teacher, *student, all, pool);
  TrainOptions d = quiet(3);
  d.teacher = teacher.get();
  d.alpha = 1.0;
  OptimizerState ss;
  train_task(*student, tok, f.examples, {}, d, ss, pool);
  EXPECT_GT(ss.step, 0);
  const double after = mean_kl(*teacher, *student, all, pool);
  EXPECT_LT(after, 0.5 * before) << "before " << before << " after " << after;
  EXPECT_THROW(student_config("huge", tc), std::invalid_argument);
}

// A model's own samples (issue 16: a draft for stories260K, whose training text is not at hand):
// deterministic per sample whatever the batch, each from BOS to its first EOS/BOS or the length.
TEST(TeacherSamples, SeededPerSampleAndEndedByStopTokensOrLength) {
  const Fixture& f = fixture();
  const tokenizer::Tokenizer tok(f.vocab);
  ThreadPool pool(2);
  auto teacher = fresh_model();
  OptimizerState ts;
  train_task(*teacher, tok, f.examples, {}, quiet(4), ts, pool);
  const auto m = to_inference_model(*teacher);
  const model::ModelConfig& c = m->config();
  TeacherSampleOptions o;
  o.count = 12;
  o.length = 40;
  o.seed = 4;
  o.batch = 5;  // the last batch is short
  const auto samples = sample_from_teacher(*m, o, pool);
  ASSERT_EQ(samples.size(), 12u);
  int ended_early = 0;
  for (const auto& s : samples) {
    ASSERT_GE(s.size(), 2u);
    EXPECT_LE(int64_t(s.size()), o.length + 1);
    EXPECT_EQ(s.front(), c.bos_id);
    for (size_t i = 1; i + 1 < s.size(); ++i) EXPECT_TRUE(s[i] != c.bos_id && s[i] != c.eos_id);
    const bool stop = s.back() == c.eos_id || s.back() == c.bos_id;
    EXPECT_TRUE(stop || int64_t(s.size()) == o.length + 1);
    ended_early += stop;
  }
  EXPECT_GT(ended_early, 0);  // the trained teacher ends its answers with EOS
  TeacherSampleOptions one = o;
  one.batch = 1;
  EXPECT_EQ(sample_from_teacher(*m, one, pool), samples);
  TeacherSampleOptions other = o;
  other.seed = 5;
  EXPECT_NE(sample_from_teacher(*m, other, pool), samples);

  const auto seqs = next_token_sequences(samples);
  ASSERT_EQ(seqs.size(), samples.size());
  EXPECT_EQ(seqs[0].tokens, samples[0]);
  for (size_t i = 0; i + 1 < samples[0].size(); ++i)
    EXPECT_EQ(seqs[0].targets[i], samples[0][i + 1]);
  EXPECT_EQ(seqs[0].targets.back(), -1);

  TeacherSampleOptions bad = o;
  bad.length = c.context_length;  // BOS would not fit
  EXPECT_THROW(sample_from_teacher(*m, bad, pool), std::invalid_argument);
  bad = o;
  bad.count = 0;
  EXPECT_THROW(sample_from_teacher(*m, bad, pool), std::invalid_argument);
  bad = o;
  bad.temperature = 0;
  EXPECT_THROW(sample_from_teacher(*m, bad, pool), std::invalid_argument);
}

// Distillation on the teacher's samples alone (no task data, every position a target) pulls a
// smaller fresh student towards the teacher on samples it never trained on.
TEST(TeacherSamples, DraftDistilledOnThemApproachesTheTeacher) {
  const Fixture& f = fixture();
  const tokenizer::Tokenizer tok(f.vocab);
  ThreadPool pool(2);
  auto teacher = fresh_model();
  OptimizerState ts;
  train_task(*teacher, tok, f.examples, {}, quiet(10), ts, pool);
  const auto m = to_inference_model(*teacher);
  TeacherSampleOptions o;
  o.count = 64;
  o.length = 60;
  o.seed = 1;
  const auto train_seqs = next_token_sequences(sample_from_teacher(*m, o, pool));
  o.seed = 2;
  o.count = 16;
  TokenBatch held_out;
  for (const auto& s : next_token_sequences(sample_from_teacher(*m, o, pool)))
    held_out.add(s.tokens, s.targets);
  ShapeOverrides one_layer;
  one_layer.layers = 1;
  const model::ModelConfig dc = student_config("tiny", teacher->config(), one_layer);
  EXPECT_EQ(dc.n_layers, 1);
  Transformer<float> student(dc);
  student.init_random(8);
  const double before = mean_kl(*teacher, student, held_out, pool);
  TrainOptions d = quiet(8);
  d.teacher = teacher.get();
  d.alpha = 1.0;
  d.temp = 1.0f;
  OptimizerState ss;
  train_sequences(student, f.vocab, train_seqs, d, ss, pool);
  const double after = mean_kl(*teacher, student, held_out, pool);
  EXPECT_GT(before, 0.5);
  EXPECT_LT(after, 0.3 * before) << "before " << before << " after " << after;
  EXPECT_THROW(train_sequences(student, f.vocab, {}, d, ss, pool), std::invalid_argument);
}

TEST(Trainer, BadInputsAreRefused) {
  const Fixture& f = fixture();
  const tokenizer::Tokenizer tok(f.vocab);
  ThreadPool pool(1);
  auto m = fresh_model();
  OptimizerState s;
  EXPECT_THROW(train_task(*m, tok, {}, {}, quiet(1), s, pool), std::invalid_argument);
  TrainOptions zero = quiet(1);
  zero.epochs = 0;
  EXPECT_THROW(train_task(*m, tok, f.examples, {}, zero, s, pool), std::invalid_argument);
  std::vector<data::Example> too_long = {f.examples[0]};
  too_long[0].text = std::string(4000, 'x') + " y";
  EXPECT_THROW(train_task(*m, tok, too_long, {}, quiet(1), s, pool), std::invalid_argument);
  EXPECT_THROW(preset_config("huge", 100), std::invalid_argument);
}

TEST(Trainer, BatchesCoverEveryExampleOnceAndRespectTheBudget) {
  const std::vector<int64_t> lengths = {5, 9, 3, 12, 7, 7, 30, 2};
  const auto batches = make_batches(lengths, 16, 1, 0);
  std::vector<int> seen(lengths.size(), 0);
  for (const auto& b : batches) {
    int64_t tokens = 0;
    for (int64_t i : b) ++seen[size_t(i)], tokens += lengths[size_t(i)];
    EXPECT_TRUE(tokens <= 16 || b.size() == 1);
  }
  for (int s : seen) EXPECT_EQ(s, 1);
  EXPECT_NE(make_batches(lengths, 16, 1, 0), make_batches(lengths, 16, 1, 1));
  EXPECT_EQ(make_batches(lengths, 16, 1, 1), make_batches(lengths, 16, 1, 1));
}

}  // namespace
}  // namespace shrike::train
