#include "decode/sampler.h"

#include <algorithm>
#include <cmath>

namespace shrike::decode {

int32_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return int32_t(best);
}

int32_t Sampler::sample(float* logits, int64_t n_vocab) {
  if (params_.temperature <= 0.0f || params_.top_k == 1) return argmax(logits, n_vocab);

  candidates_.clear();
  for (int64_t i = 0; i < n_vocab; ++i)
    candidates_.emplace_back(logits[i] / params_.temperature, int32_t(i));
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && size_t(params_.top_k) < keep) {
    keep = size_t(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + long(keep), candidates_.end(),
                      by_logit);
    candidates_.resize(keep);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  // Softmax over the kept candidates (sorted, so the first is the max).
  const float max = candidates_.front().first;
  double sum = 0;
  for (auto& c : candidates_) {
    c.first = std::exp(c.first - max);
    sum += c.first;
  }
  // Nucleus: the smallest prefix whose probability reaches top_p.
  if (params_.top_p < 1.0f) {
    double cumulative = 0;
    size_t n = 0;
    while (n < candidates_.size()) {
      cumulative += candidates_[n].first / sum;
      ++n;
      if (cumulative >= params_.top_p) break;
    }
    candidates_.resize(n);
    sum = 0;
    for (const auto& c : candidates_) sum += c.first;
  }
  std::uniform_real_distribution<double> uniform(0.0, sum);
  double r = uniform(rng_);
  for (const auto& c : candidates_) {
    r -= c.first;
    if (r <= 0) return c.second;
  }
  return candidates_.back().second;
}

}  // namespace shrike::decode
