#include "decode/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#if defined(__SSE2__)
#include <emmintrin.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif

namespace shrike::decode {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The order sampling scans candidates in: higher logit first, lower id on ties. A strict total
// order (NaN logits are replaced by -inf first), so every sort gives the same sequence.
constexpr auto comes_first = [](const auto& a, const auto& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
};

void check_vocab(const float* logits, int64_t n_vocab) {
  if (logits == nullptr || n_vocab <= 0 || n_vocab > std::numeric_limits<int32_t>::max())
    throw std::invalid_argument("sampler: vocabulary size " + std::to_string(n_vocab) +
                                (logits == nullptr ? " with no logits" : " out of range"));
}

void check_tokens(std::span<const int32_t> tokens, int64_t n_vocab, const char* what) {
  for (int32_t t : tokens)
    if (t < 0 || t >= n_vocab)
      throw std::invalid_argument(std::string("sampler: ") + what + " token id " +
                                  std::to_string(t) + " outside the vocabulary of " +
                                  std::to_string(n_vocab));
}

// log(sum(exp(x))) in double, shifted by the maximum so nothing overflows.
double log_sum_exp(const float* x, int64_t n) {
  float max = kNegInf;
  for (int64_t i = 0; i < n; ++i)
    if (x[i] > max) max = x[i];
  if (!std::isfinite(max)) return max;  // all -inf (or NaN): no distribution
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double(x[i]) - max);
  return max + std::log(sum);
}

}  // namespace

std::string sampler_params_error(const SamplerParams& p) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature))
    return "temperature must be a finite number >= 0";
  if (p.top_k < 0) return "top_k must be >= 0 (0: no limit)";
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return "top_p must be in (0, 1]";
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return "min_p must be in [0, 1]";
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f))
    return "presence_penalty must be in [-2, 2]";
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f))
    return "frequency_penalty must be in [-2, 2]";
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty))
    return "repetition_penalty must be a finite number > 0";
  if (p.top_logprobs < 0 || p.top_logprobs > 20) return "top_logprobs must be in [0, 20]";
  return {};
}

int32_t argmax(const float* x, int64_t n) {
  // The maximum over independent vector lanes, then the first index holding it. A scan keeping
  // one best index is a compare chain through every element (~3 us at a 4k vocabulary, paid per
  // greedy token and per draft token). The answer is that scan's: the first of the largest; NaN
  // elements are passed over (max(lane, x) keeps the lane), a NaN at 0 gives 0.
  if (n <= 0) return 0;
  float m = x[0];
  int64_t i = 0;
#if defined(__SSE2__)
  __m128 a = _mm_set1_ps(m), b = a;
  for (; i + 8 <= n; i += 8) {  // maxps(x, lane): the lane where x is NaN
    a = _mm_max_ps(_mm_loadu_ps(x + i), a);
    b = _mm_max_ps(_mm_loadu_ps(x + i + 4), b);
  }
  alignas(16) float lanes[8];
  _mm_store_ps(lanes, a);
  _mm_store_ps(lanes + 4, b);
  for (float v : lanes) m = std::max(m, v);
#elif defined(__ARM_NEON)
  float32x4_t a = vdupq_n_f32(m), b = a;
  for (; i + 8 <= n; i += 8) {  // x > lane ? x : lane: the lane where x is NaN
    const float32x4_t xa = vld1q_f32(x + i), xb = vld1q_f32(x + i + 4);
    a = vbslq_f32(vcgtq_f32(xa, a), xa, a);
    b = vbslq_f32(vcgtq_f32(xb, b), xb, b);
  }
  float lanes[8];
  vst1q_f32(lanes, a);
  vst1q_f32(lanes + 4, b);
  for (float v : lanes) m = std::max(m, v);
#endif
  for (; i < n; ++i) m = std::max(m, x[i]);
  for (int64_t k = 0; k < n; ++k)
    if (x[k] == m) return int32_t(k);
  return 0;
}

// Finds where the running weight of the candidates of [0, end), taken in order, first reaches
// target: the index p such that [0, p] then holds the p + 1 candidates that come first (in no
// particular order) and candidates_[p] is the one in place p. *mass: the weight of [0, p].
//
// Sorting a 150k vocabulary per token (as the first version did) costs milliseconds; this is
// O(n): one pass splits off the likely tokens (weight >= 1e-4 of the most likely: for a language
// model a few dozen holding nearly all the mass), then nth_element halves the range holding the
// target until it is small enough to sort. Weight falls along the order, so the likely tokens
// are the first ones. A draw is the same as the first version's sequential scan except when the
// target lies within rounding (1e-16 relative) of a boundary between two tokens, because the
// partial sums are added in another order.
size_t Sampler::locate(size_t end, double target, double* mass) {
  constexpr size_t kWindow = 64;
  constexpr float kLikely = 1e-4f;
  const auto at = [this](size_t i) { return candidates_.begin() + long(i); };
  size_t lo = 0, hi = end;
  double before = 0;  // weight of [0, lo)
  const auto narrow = [&](size_t mid) {
    double upper = 0;
    for (size_t i = lo; i < mid; ++i) upper += candidates_[i].weight;
    if (before + upper >= target) {
      hi = mid;
    } else {
      before += upper;
      lo = mid;
    }
  };
  if (hi - lo > kWindow) {
    const auto likely_end =
        std::partition(at(lo), at(hi), [](const Candidate& c) { return c.weight >= kLikely; });
    narrow(size_t(likely_end - candidates_.begin()));
  }
  while (hi - lo > kWindow) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(at(lo), at(mid), at(hi), comes_first);
    narrow(mid);
  }
  std::sort(at(lo), at(hi), comes_first);
  for (size_t i = lo; i < hi; ++i) {
    before += candidates_[i].weight;
    if (before >= target) {
      *mass = before;
      return i;
    }
  }
  *mass = before;  // target beyond the total by rounding: the last candidate
  return hi - 1;
}

// Temperature, top-k, softmax, top-p, min-p (the draw is pick's), in that order, with the float
// and double operations of the first version (weights exp(x - max) in float, sums and the
// uniform draw in double), so a seed draws the same tokens (see locate for the one caveat).
int32_t Sampler::prepare(const float* logits, int64_t n_vocab, size_t* keep_out, double* sum_out) {
  if (greedy()) return argmax(logits, n_vocab);

  candidates_.clear();
  candidates_.reserve(size_t(n_vocab));
  float max = kNegInf;
  for (int64_t i = 0; i < n_vocab; ++i) {
    float x = logits[i] / params_.temperature;
    if (std::isnan(x)) x = kNegInf;  // keeps the order total
    candidates_.push_back({x, int32_t(i), 0.0f});
    max = std::max(max, x);
  }
  if (params_.top_k > 0 && size_t(params_.top_k) < candidates_.size()) {
    const auto kth = candidates_.begin() + params_.top_k;
    std::nth_element(candidates_.begin(), kth, candidates_.end(), comes_first);
    candidates_.erase(kth, candidates_.end());
  }
  // All -inf (everything masked) or +inf logits (or a temperature so small that logits overflow):
  // no distribution to draw from, so take the first in order, as greedy would.
  if (!std::isfinite(max))
    return std::min_element(candidates_.begin(), candidates_.end(), comes_first)->token;

  double total = 0;
  for (auto& c : candidates_) {
    c.weight = std::exp(c.logit - max);
    total += c.weight;
  }
  size_t keep = candidates_.size();  // candidates_[0, keep) are the first keep in order
  double sum = total;
  // Nucleus: the smallest prefix whose probability reaches top_p.
  if (params_.top_p < 1.0f) keep = locate(keep, double(params_.top_p) * total, &sum) + 1;
  // min-p: p < min_p * p_max is weight < min_p, since the most likely token weighs exp(0) = 1.
  // Weight falls along the order, so the tokens kept are again the first ones.
  if (params_.min_p > 0.0f) {
    const auto kept = std::partition(candidates_.begin(), candidates_.begin() + long(keep),
                                     [&](const Candidate& c) { return c.weight >= params_.min_p; });
    size_t n = size_t(kept - candidates_.begin());
    if (n == 0) {  // min_p > 1: keep the most likely alone
      std::iter_swap(
          candidates_.begin(),
          std::min_element(candidates_.begin(), candidates_.begin() + long(keep), comes_first));
      n = 1;
    }
    if (n < keep) {
      keep = n;
      sum = 0;
      for (size_t i = 0; i < keep; ++i) sum += candidates_[i].weight;
    }
  }
  *keep_out = keep;
  *sum_out = sum;
  return -1;
}

int32_t Sampler::pick(const float* logits, int64_t n_vocab) {
  size_t keep = 0;
  double sum = 0;
  if (const int32_t certain = prepare(logits, n_vocab, &keep, &sum); certain >= 0) return certain;
  std::uniform_real_distribution<double> uniform(0.0, sum);
  double drawn_mass;
  return candidates_[locate(keep, uniform(rng_), &drawn_mass)].token;
}

// Only the tokens present are touched: counts_ is all zeros between calls, and each entry set
// here is reset before returning. The raw logits are kept in saved_ to be put back.
void Sampler::apply_penalties(float* logits, int64_t n_vocab, std::span<const int32_t> prompt,
                              std::span<const int32_t> output) {
  saved_.clear();
  const bool repetition = params_.repetition_penalty != 1.0f;
  const bool additive = params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
  if (!repetition && !additive) return;
  check_tokens(output, n_vocab, "output");
  if (repetition) check_tokens(prompt, n_vocab, "prompt");

  if (counts_.size() < size_t(n_vocab)) counts_.resize(size_t(n_vocab), 0);
  touched_.clear();
  for (int32_t t : output)
    if (counts_[size_t(t)]++ == 0) touched_.push_back(t);
  if (repetition) {
    constexpr int32_t kPromptOnly = -1;
    for (int32_t t : prompt)
      if (counts_[size_t(t)] == 0) {
        counts_[size_t(t)] = kPromptOnly;
        touched_.push_back(t);
      }
  }
  for (int32_t t : touched_) {
    float& x = logits[t];
    saved_.emplace_back(t, x);
    if (repetition) x = x > 0 ? x / params_.repetition_penalty : x * params_.repetition_penalty;
    const int32_t count = counts_[size_t(t)];
    if (count > 0) x -= params_.frequency_penalty * float(count) + params_.presence_penalty;
    counts_[size_t(t)] = 0;
  }
}

SampleResult Sampler::sample(float* logits, int64_t n_vocab, std::span<const int32_t> prompt,
                             std::span<const int32_t> output, const TokenBitset* allowed) {
  check_vocab(logits, n_vocab);
  if (allowed) apply_token_mask(logits, n_vocab, *allowed);
  apply_penalties(logits, n_vocab, prompt, output);
  SampleResult result;
  result.token = pick(logits, n_vocab);
  for (const auto& [t, raw] : saved_) logits[t] = raw;
  add_logprobs(logits, n_vocab, result);
  return result;
}

void Sampler::add_logprobs(const float* logits, int64_t n_vocab, SampleResult& result) {
  if (!params_.logprobs && params_.top_logprobs <= 0) return;
  const double log_norm = log_sum_exp(logits, n_vocab);
  if (params_.logprobs) result.logprob = float(double(logits[result.token]) - log_norm);
  if (params_.top_logprobs > 0) {
    // The most likely by raw logit, lower id first on ties: the sampling order at temperature 1.
    candidates_.clear();
    for (int64_t i = 0; i < n_vocab; ++i)
      candidates_.push_back({std::isnan(logits[i]) ? kNegInf : logits[i], int32_t(i), 0.0f});
    const auto top_end =
        candidates_.begin() + std::min<long>(params_.top_logprobs, long(candidates_.size()));
    std::nth_element(candidates_.begin(), top_end, candidates_.end(), comes_first);
    std::sort(candidates_.begin(), top_end, comes_first);
    for (auto c = candidates_.begin(); c != top_end; ++c)
      result.top.push_back({c->token, float(double(c->logit) - log_norm)});
  }
}

int32_t Sampler::sample(float* logits, int64_t n_vocab, const TokenBitset* allowed) {
  check_vocab(logits, n_vocab);
  if (allowed) apply_token_mask(logits, n_vocab, *allowed);
  return pick(logits, n_vocab);
}

void Sampler::probabilities(float* logits, int64_t n_vocab, std::span<const int32_t> prompt,
                            std::span<const int32_t> output, std::vector<TokenProb>* out) {
  check_vocab(logits, n_vocab);
  apply_penalties(logits, n_vocab, prompt, output);
  size_t keep = 0;
  double sum = 0;
  const int32_t certain = prepare(logits, n_vocab, &keep, &sum);
  for (const auto& [t, raw] : saved_) logits[t] = raw;
  out->clear();
  if (certain >= 0) {
    out->push_back({certain, 1.0});
    return;
  }
  for (size_t i = 0; i < keep; ++i)
    if (candidates_[i].weight > 0)
      out->push_back({candidates_[i].token, double(candidates_[i].weight) / sum});
}

}  // namespace shrike::decode
