#include "train/trainer.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace shrike::train {
namespace {

uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::string format_duration(double s) {
  char buf[32];
  const int64_t t = int64_t(s + 0.5);
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(t / 3600), (long long)(t / 60 % 60));
  else
    std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(t / 60), (long long)(t % 60));
  return buf;
}

// The sequence with next-token targets over its prompt as well (positions before the one that
// predicts the first answer token), and each target row marked prompt (1) or answer (0).
void add_with_prompt_targets(TokenBatch& batch, const TrainingSequence& s,
                             std::vector<uint8_t>& prompt_row) {
  std::vector<int32_t> targets = s.targets;
  for (int64_t t = 0; t + 1 < s.prompt_length; ++t)
    if (targets[size_t(t)] < 0) targets[size_t(t)] = s.tokens[size_t(t) + 1];
  for (size_t t = 0; t < targets.size(); ++t)
    if (targets[t] >= 0) prompt_row.push_back(int64_t(t) + 1 < s.prompt_length && s.targets[t] < 0);
  batch.add(s.tokens, targets);
}

// The running average after a step: it starts at the first step's weights, and its decay ramps up
// ((1 + step) / (10 + step), capped at ema) so that early weights do not linger in it.
void update_weight_average(OptimizerState& state, const std::vector<float>& params, double ema,
                           ThreadPool& pool) {
  if (state.ema.size() != params.size()) {
    state.ema = params;
    return;
  }
  const float d = float(std::min(ema, (1.0 + double(state.step)) / (10.0 + double(state.step))));
  pool.parallel_for(int64_t(params.size()), 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      state.ema[size_t(i)] = d * state.ema[size_t(i)] + (1 - d) * params[size_t(i)];
  });
}

// The average in the model's place while it is scored, the raw weights back afterwards.
struct WeightAverageInModel {
  std::vector<float>& params;
  std::vector<float>& average;
  bool active;
  WeightAverageInModel(Transformer<float>& model, OptimizerState& state, bool on)
      : params(model.params()), average(state.ema), active(on && average.size() == params.size()) {
    if (active) std::swap_ranges(params.begin(), params.end(), average.begin());
  }
  ~WeightAverageInModel() {
    if (active) std::swap_ranges(params.begin(), params.end(), average.begin());
  }
};

}  // namespace

std::string describe(const EpochReport& r) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "epoch %lld: loss %.4f, %.0f tok/s, %.0f s", (long long)r.epoch,
                r.train_loss, r.tokens_per_second, r.seconds);
  std::string out = buf;
  if (r.dev.n > 0)  // nothing to score without dev examples (or for plain text)
    out += "; dev (" + std::to_string(r.dev.n) + "): " + r.dev.summary;
  return out;
}

std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& lengths,
                                               int64_t batch_tokens, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(lengths.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int64_t(i);
  // Fisher-Yates with a counter-based generator: the same order on every platform.
  uint64_t counter = mix(seed ^ mix(uint64_t(epoch) + 1));
  for (size_t i = order.size(); i > 1; --i) {
    const size_t j = size_t(mix(counter++) % i);
    std::swap(order[i - 1], order[j]);
  }
  std::vector<std::vector<int64_t>> batches;
  int64_t tokens = 0;
  for (int64_t i : order) {
    if (batches.empty() || tokens + lengths[size_t(i)] > batch_tokens) {
      batches.emplace_back();
      tokens = 0;
    }
    batches.back().push_back(i);
    tokens += lengths[size_t(i)];
  }
  return batches;
}

void train_sequences(Transformer<float>& model, const tokenizer::Vocab& vocab,
                     const std::vector<TrainingSequence>& seqs, const TrainOptions& opt,
                     OptimizerState& state, ThreadPool& pool, const SequenceEvaluator& evaluate,
                     const std::function<void(const EpochReport&)>& on_epoch) {
  if (seqs.empty()) throw std::invalid_argument("train: no training sequences");
  if (opt.epochs < 1) throw std::invalid_argument("train: epochs must be at least 1");
  const model::ModelConfig& c = model.config();
  if (opt.teacher && opt.teacher->config().vocab_size != c.vocab_size)
    throw std::invalid_argument("distill: teacher and student vocabularies differ");
  std::vector<int64_t> lengths;
  lengths.reserve(seqs.size());
  for (const TrainingSequence& s : seqs) {
    if (int64_t(s.tokens.size()) > c.context_length)
      throw std::invalid_argument("train: a sequence of " + std::to_string(s.tokens.size()) +
                                  " tokens exceeds the context length " +
                                  std::to_string(c.context_length));
    if (s.targets.size() != s.tokens.size())
      throw std::invalid_argument("train: a sequence's targets do not match its tokens");
    lengths.push_back(int64_t(s.tokens.size()));
  }
  // Each epoch's shuffled order packs into its own number of batches, so the schedule counts
  // every epoch's, and a resumed step finds its epoch and batch by walking them.
  std::vector<int64_t> epoch_batches;
  int64_t total_steps = 0;
  for (int64_t e = 0; e < opt.epochs; ++e) {
    epoch_batches.push_back(int64_t(make_batches(lengths, opt.batch_tokens, opt.seed, e).size()));
    total_steps += epoch_batches.back();
  }
  int64_t first_epoch = 0, epoch_start = 0;  // epoch_start: the step its first batch is
  while (first_epoch < opt.epochs && state.step >= epoch_start + epoch_batches[size_t(first_epoch)])
    epoch_start += epoch_batches[size_t(first_epoch++)];
  const int64_t warmup = std::max<int64_t>(1, int64_t(opt.warmup_fraction * double(total_steps)));

  if (opt.ema <= 0) state.ema.clear();  // a checkpoint's average is not carried into a run without
  model.freeze_embeddings(opt.freeze_embeddings);
  if (opt.freeze_embeddings && !opt.checkpoint_path.empty())
    throw std::invalid_argument(
        "train: checkpoints of a model with frozen embeddings are not "
        "supported (its optimizer state covers part of the parameters)");
  // The teacher runs forward only: no gradients, one layer's activations at a time, and its
  // logits a chunk of rows at a time beside the student's. alpha 0 is a label-only fine-tune:
  // the teacher is not consulted at all.
  Transformer<float>* teacher = opt.alpha > 0 ? opt.teacher : nullptr;
  struct ForwardOnly {  // restored when training ends, however it ends
    Transformer<float>* t;
    ~ForwardOnly() {
      if (t) t->set_forward_only(false), t->release_activations();
    }
  } forward_only{teacher};
  if (teacher) teacher->set_forward_only(true);
  struct NoDropoutAfter {  // the trained model leaves without dropout, however training ends
    Transformer<float>& m;
    ~NoDropoutAfter() { m.set_dropout(0, 0); }
  } no_dropout_after{model};

  // BLAS runs the matrix products on as many threads as the pool has.
  openblas_set_num_threads(pool.size());
  TokenBatch batch;
  std::vector<uint8_t> prompt_row, answer_mask;  // per target row: 1 = an auxiliary prompt row
  std::vector<float> t_logits, d_kl;
  const auto t_start = std::chrono::steady_clock::now();
  int64_t tokens_done = 0, steps_this_run = 0;
  for (int64_t epoch = first_epoch; epoch < opt.epochs;
       epoch_start += epoch_batches[size_t(epoch)], ++epoch) {
    const auto batches = make_batches(lengths, opt.batch_tokens, opt.seed, epoch);
    const auto t_epoch = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t loss_tokens = 0, epoch_tokens = 0;
    for (int64_t b = state.step - epoch_start; b < int64_t(batches.size()); ++b) {
      batch.clear();
      prompt_row.clear();
      for (int64_t i : batches[size_t(b)]) {
        const TrainingSequence& s = seqs[size_t(i)];
        if (opt.prompt_loss > 0 && s.prompt_length > 1) {
          add_with_prompt_targets(batch, s, prompt_row);
        } else {
          batch.add(s.tokens, s.targets);
          for (int32_t t : s.targets)
            if (t >= 0) prompt_row.push_back(0);
        }
      }
      model.zero_grads();
      // Masks from (seed, step): a resumed run draws the ones it would have drawn.
      model.set_dropout(opt.dropout, mix(opt.seed ^ mix(uint64_t(state.step) + 7)));
      model.forward_hidden(batch, pool);
      if (teacher) teacher->forward_hidden(batch, pool);
      int64_t answer_rows = 0;
      for (uint8_t p : prompt_row) answer_rows += p == 0;
      const double scale = 1.0 / double(std::max<int64_t>(1, answer_rows));
      const double ce_weight = teacher ? 1.0 - opt.alpha : 1.0;
      // The output layer and both losses a chunk of rows at a time: with a 151,936-token
      // vocabulary the whole batch's logits would be ~0.6 MB a row for each of the student's,
      // the teacher's and their gradients.
      const double loss = model.backward_chunked(
          [&](int64_t r0, int64_t r1, const float* logits, float* d_logits) {
            const int64_t n = r1 - r0;
            double l = 0;
            // Runs of answer rows and of prompt rows: the prompt's at their own weight, and only
            // the answer's in the reported loss.
            for (int64_t a = r0; a < r1;) {
              int64_t e = a;
              while (e < r1 && prompt_row[size_t(e)] == prompt_row[size_t(a)]) ++e;
              const double w = prompt_row[size_t(a)] ? opt.prompt_loss : 1.0;
              const double run_loss = cross_entropy(
                  d_logits + (a - r0) * c.vocab_size, logits + (a - r0) * c.vocab_size,
                  model.target_ids().data() + a, e - a, c.vocab_size, scale * ce_weight * w, pool);
              if (!prompt_row[size_t(a)]) l += ce_weight * run_loss;
              a = e;
            }
            if (teacher) {
              t_logits.resize(size_t(n * c.vocab_size));
              d_kl.resize(t_logits.size());
              teacher->head_logits(r0, r1, t_logits.data());
              // The teacher's distribution is matched on the answer only.
              answer_mask.resize(size_t(n));
              for (int64_t r = 0; r < n; ++r) answer_mask[size_t(r)] = !prompt_row[size_t(r0 + r)];
              l += opt.alpha * kl_distill(d_kl.data(), logits, t_logits.data(), answer_mask.data(),
                                          n, c.vocab_size, opt.temp, scale * opt.alpha, pool);
              for (size_t i = 0; i < d_kl.size(); ++i) d_logits[i] += d_kl[i];
            }
            return l;
          },
          pool);
      clip_grad_norm(model.grads(), opt.grad_clip);
      const double lr = learning_rate(state.step, total_steps, warmup, opt.lr, opt.min_lr_fraction);
      adamw_step(model.params(), model.grads(), model.layout(), state, lr, opt.adamw, pool,
                 model.grad_begin());
      if (opt.ema > 0) update_weight_average(state, model.params(), opt.ema, pool);
      loss_sum += loss;
      loss_tokens += answer_rows;
      epoch_tokens += int64_t(batch.tokens.size());
      tokens_done += int64_t(batch.tokens.size());
      if (opt.progress) {
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
        const double tps = double(tokens_done) / std::max(1e-9, elapsed);
        const double steps_left = double(total_steps - state.step);
        const double sec_per_step = elapsed / double(++steps_this_run);
        std::fprintf(stderr,
                     "\repoch %lld/%lld step %lld/%lld loss %.4f lr %.2e %.0f tok/s ETA %s   ",
                     (long long)(epoch + 1), (long long)opt.epochs, (long long)state.step,
                     (long long)total_steps, loss_sum / double(std::max<int64_t>(1, loss_tokens)),
                     lr, tps, format_duration(steps_left * sec_per_step).c_str());
      }
    }
    EpochReport r;
    r.epoch = epoch + 1;
    r.train_loss = loss_sum / double(std::max<int64_t>(1, loss_tokens));
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_epoch).count();
    r.tokens_per_second = double(epoch_tokens) / std::max(1e-9, r.seconds);
    if (evaluate) {
      WeightAverageInModel average(model, state, opt.ema > 0);
      r.dev = evaluate(model);
    }
    if (opt.progress) std::fprintf(stderr, "\n");
    if (!opt.checkpoint_path.empty())
      save_model(model, vocab, opt.model_name, opt.checkpoint_path, &state);
    if (on_epoch) on_epoch(r);
  }
  // The model leaves with the average; the checkpoints keep the raw weights to go on from.
  if (opt.ema > 0 && state.ema.size() == model.params().size())
    std::copy(state.ema.begin(), state.ema.end(), model.params().begin());
}

}  // namespace shrike::train
