#include "train/teacher_samples.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "decode/sampler.h"
#include "kv/contiguous_kv.h"

namespace shrike::train {
namespace {

// splitmix64: a well-mixed seed per sample from (seed, index).
uint64_t sample_seed(uint64_t seed, uint64_t index) {
  uint64_t z = seed ^ (index * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<std::vector<int32_t>> sample_from_teacher(const model::Model& teacher,
                                                      const TeacherSampleOptions& opt,
                                                      ThreadPool& pool) {
  const model::ModelConfig& c = teacher.config();
  if (opt.count < 1) throw std::invalid_argument("teacher samples: the count must be at least 1");
  if (opt.length < 1 || opt.length + 1 > c.context_length)
    throw std::invalid_argument(
        "teacher samples: the length must be in [1, " + std::to_string(c.context_length - 1) +
        "] (the teacher's context minus BOS), not " + std::to_string(opt.length));
  if (!(opt.temperature > 0))
    throw std::invalid_argument("teacher samples: the temperature must be above 0");
  const int64_t batch = std::max<int64_t>(1, opt.batch);
  std::vector<std::vector<int32_t>> out(size_t(opt.count));
  std::vector<float> logits;
  model::ForwardScratch scratch;
  // A sample's logits must not depend on which others share its step (the batch size, the
  // samples still running), or the samples would.
  model::ForwardOptions invariant;
  invariant.matmul.batch_invariant = true;
  for (int64_t first = 0; first < opt.count; first += batch) {
    const int64_t n = std::min(opt.count - first, batch);
    std::vector<std::unique_ptr<kv::KvCache>> caches;
    std::vector<decode::Sampler> samplers;
    for (int64_t i = 0; i < n; ++i) {
      caches.push_back(std::make_unique<kv::ContiguousKvCache>(c.n_layers, opt.length + 1,
                                                               c.n_kv_heads, c.head_dim));
      decode::SamplerParams p;
      p.temperature = opt.temperature;
      p.seed = sample_seed(opt.seed, uint64_t(first + i));
      samplers.emplace_back(p);
      out[size_t(first + i)] = {c.bos_id};
    }
    std::vector<int64_t> live(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) live[size_t(i)] = i;
    // Each step feeds every live sample its last token and samples the next.
    while (!live.empty()) {
      std::vector<model::BatchSequence> seqs(live.size());
      for (size_t j = 0; j < live.size(); ++j) {
        const std::vector<int32_t>& s = out[size_t(first + live[j])];
        seqs[j].tokens = &s.back();
        seqs[j].n_tokens = 1;
        seqs[j].pos0 = int64_t(s.size()) - 1;
        seqs[j].kv = caches[size_t(live[j])].get();
        seqs[j].n_logits = 1;
      }
      logits.resize(seqs.size() * size_t(c.vocab_size));
      teacher.forward_batch(seqs.data(), int64_t(seqs.size()), logits.data(), pool, scratch,
                            invariant);
      std::vector<int64_t> still;
      for (size_t j = 0; j < live.size(); ++j) {
        std::vector<int32_t>& s = out[size_t(first + live[j])];
        const int32_t t = samplers[size_t(live[j])].sample(logits.data() + j * size_t(c.vocab_size),
                                                           c.vocab_size);
        s.push_back(t);
        const bool ended = t == c.eos_id || t == c.bos_id || int64_t(s.size()) > opt.length;
        if (!ended) still.push_back(live[j]);
      }
      live = std::move(still);
    }
  }
  return out;
}

std::vector<TrainingSequence> next_token_sequences(
    const std::vector<std::vector<int32_t>>& samples) {
  std::vector<TrainingSequence> seqs;
  seqs.reserve(samples.size());
  for (const std::vector<int32_t>& s : samples) {
    TrainingSequence t;
    t.tokens = s;
    t.targets.assign(s.size(), -1);
    for (size_t i = 0; i + 1 < s.size(); ++i) t.targets[i] = s[i + 1];
    seqs.push_back(std::move(t));
  }
  return seqs;
}

}  // namespace shrike::train
