#include "decode/speculative.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace shrike::decode {
namespace {

// A draw from weights that need not sum to 1 (total > 0).
int32_t draw(const std::vector<TokenProb>& dist, double total, std::mt19937_64& rng) {
  const double target = std::uniform_real_distribution<double>(0.0, total)(rng);
  double mass = 0;
  for (const auto& tp : dist) {
    mass += tp.prob;
    if (target < mass) return tp.token;
  }
  // Rounding put the target past the last weight: the last token that has any.
  for (auto it = dist.rbegin(); it != dist.rend(); ++it)
    if (it->prob > 0) return it->token;
  return dist.back().token;
}

double prob_of(const std::vector<TokenProb>& dist, int32_t token) {
  for (const auto& tp : dist)
    if (tp.token == token) return tp.prob;
  return 0;
}

}  // namespace

NgramProposer::NgramProposer(int32_t min_ngram, int32_t max_ngram)
    : min_ngram_(min_ngram), max_ngram_(max_ngram) {
  if (min_ngram < 1 || max_ngram < min_ngram || max_ngram > kMaxNgram)
    throw std::invalid_argument(
        "ngram proposer: need 1 <= min_ngram <= max_ngram <= " + std::to_string(kMaxNgram) +
        ", got " + std::to_string(min_ngram) + ".." + std::to_string(max_ngram));
  index_.resize(size_t(max_ngram - min_ngram + 1));
}

// FNV-1a over the token ids: cheap, and a collision only costs a proposal (propose checks the
// tokens, and verification would reject a wrong draft anyway).
uint64_t NgramProposer::hash(size_t end, int32_t n) const {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = end - size_t(n); i < end; ++i) {
    h ^= uint32_t(tokens_[i]);
    h *= 1099511628211ull;
  }
  return h;
}

void NgramProposer::append(std::span<const int32_t> tokens) {
  for (int32_t t : tokens) {
    // The n-grams ending at the current last token get a follower now: index them (a later
    // occurrence overwrites, so the map keeps the most recent).
    const size_t end = tokens_.size();
    for (int32_t n = min_ngram_; n <= max_ngram_ && size_t(n) <= end; ++n)
      index_[size_t(n - min_ngram_)][hash(end, n)] = int32_t(end);
    tokens_.push_back(t);
  }
}

void NgramProposer::clear() {
  tokens_.clear();
  for (auto& m : index_) m.clear();
}

std::vector<int32_t> NgramProposer::propose(int32_t k, int32_t* matched) const {
  const size_t size = tokens_.size();
  if (matched != nullptr) *matched = 0;
  if (k <= 0) return {};
  for (int32_t n = std::min<int64_t>(max_ngram_, int64_t(size)); n >= min_ngram_; --n) {
    const auto& map = index_[size_t(n - min_ngram_)];
    const auto it = map.find(hash(size, n));
    if (it == map.end()) continue;
    const size_t follow = size_t(it->second);
    if (!std::equal(tokens_.begin() + long(follow) - n, tokens_.begin() + long(follow),
                    tokens_.end() - n))
      continue;  // hash collision
    const size_t stop = std::min(size, follow + size_t(k));
    if (matched != nullptr) *matched = n;
    return {tokens_.begin() + long(follow), tokens_.begin() + long(stop)};
  }
  return {};
}

Verification verify_greedy(std::span<const int32_t> draft, std::span<const int32_t> target) {
  if (target.size() != draft.size() + 1)
    throw std::invalid_argument("verify_greedy: " + std::to_string(target.size()) +
                                " target tokens for " + std::to_string(draft.size()) +
                                " drafts (need one more)");
  Verification v;
  while (size_t(v.accepted) < draft.size() &&
         draft[size_t(v.accepted)] == target[size_t(v.accepted)])
    ++v.accepted;
  v.tokens.assign(target.begin(), target.begin() + v.accepted + 1);
  return v;
}

Verification verify(Sampler& sampler, std::span<const int32_t> draft, const float* draft_probs,
                    float* target_logits, int64_t n_vocab, std::span<const int32_t> prompt,
                    std::span<const int32_t> output) {
  for (int32_t t : draft)
    if (t < 0 || t >= n_vocab)
      throw std::invalid_argument("speculative: draft token id " + std::to_string(t) +
                                  " outside the vocabulary of " + std::to_string(n_vocab));
  // Row i sees the drafts before it as output (for the penalties), as sampling them one at a
  // time would have.
  std::vector<int32_t> seq(output.begin(), output.end());
  seq.insert(seq.end(), draft.begin(), draft.end());
  const auto output_before = [&](size_t i) {
    return std::span<const int32_t>(seq).first(output.size() + i);
  };
  const auto row = [&](size_t i) { return target_logits + int64_t(i) * n_vocab; };

  Verification v;
  std::vector<TokenProb> p;
  for (size_t i = 0; i < draft.size(); ++i) {
    const int32_t x = draft[i];
    sampler.probabilities(row(i), n_vocab, prompt, output_before(i), &p);
    const double px = prob_of(p, x);
    const double qx = draft_probs != nullptr ? double(draft_probs[int64_t(i) * n_vocab + x]) : 1.0;
    // Greedy: p is a point mass, so this accepts exactly the argmax and spends no draw.
    const bool accept =
        sampler.greedy()
            ? px > 0
            : std::uniform_real_distribution<double>(0.0, 1.0)(sampler.generator()) * qx < px;
    if (accept) {
      v.tokens.push_back(x);
      ++v.accepted;
      continue;
    }
    if (sampler.greedy()) {  // the residual of a point mass is that point mass: the argmax
      v.tokens.push_back(p.front().token);
      return v;
    }
    // Rejected: the residual max(0, p - q), whose support lies within p's.
    double total = 0;
    for (auto& tp : p) {
      const double q = draft_probs != nullptr ? double(draft_probs[int64_t(i) * n_vocab + tp.token])
                                              : (tp.token == x ? 1.0 : 0.0);
      tp.prob = std::max(0.0, tp.prob - q);
      total += tp.prob;
    }
    if (total <= 0) {  // p <= q everywhere yet x rejected: only rounding gets here; p is right
      sampler.probabilities(row(i), n_vocab, prompt, output_before(i), &p);
      total = 1;
    }
    v.tokens.push_back(draw(p, total, sampler.generator()));
    return v;
  }
  // Every draft accepted: the bonus token, sampled from the last row as a plain step would.
  v.tokens.push_back(
      sampler.sample(row(draft.size()), n_vocab, prompt, output_before(draft.size())).token);
  return v;
}

AdaptiveDraftLength::AdaptiveDraftLength(AdaptiveDraftOptions o) : o_(o), k_(o.initial_k) {
  if (o.min_k < 1 || o.max_k < o.min_k || o.initial_k < o.min_k || o.initial_k > o.max_k ||
      !(o.weight > 0 && o.weight <= 1) || !(o.lower >= 0 && o.lower <= o.raise && o.raise <= 1))
    throw std::invalid_argument(
        "adaptive draft length: need 1 <= min_k <= initial_k <= max_k, weight in (0, 1], "
        "0 <= lower <= raise <= 1");
  // Start between the thresholds: the first steps neither shrink nor grow k on no evidence.
  rate_ = (o.lower + o.raise) / 2;
}

void AdaptiveDraftLength::update(int32_t proposed, int32_t accepted) {
  if (proposed <= 0) return;
  const double step_rate = double(std::clamp(accepted, 0, proposed)) / double(proposed);
  rate_ += o_.weight * (step_rate - rate_);
  if (rate_ < o_.lower) k_ = std::max(o_.min_k, k_ - 1);
  if (rate_ > o_.raise) k_ = std::min(o_.max_k, k_ + 1);
}

DraftWorth::DraftWorth(double decay) : decay_(decay) {
  if (!(decay > 0 && decay <= 1)) throw std::invalid_argument("draft worth: need 0 < decay <= 1");
}

int32_t DraftWorth::worth(int32_t max_k, double row_cost) const {
  const double r = rate();
  int32_t k = 0;
  for (double gain = r; k < max_k && gain > row_cost; gain *= r) ++k;
  return k;
}

void StepCost::observe(int64_t tokens, double seconds) {
  if (tokens < 1 || tokens > max_ || !(seconds > 0)) return;
  const double n = double(tokens);
  s0_ = s0_ * decay_ + 1;
  s1_ = s1_ * decay_ + n;
  s2_ = s2_ * decay_ + n * n;
  t0_ = t0_ * decay_ + seconds;
  t1_ = t1_ * decay_ + n * seconds;
}

double StepCost::row_cost(double fallback) const {
  const double det = s0_ * s2_ - s1_ * s1_;
  // Too few steps, or all of one size: the slope is not determined.
  if (s0_ < 8 || det < 1e-3 * s0_ * s0_) return fallback;
  const double b = (s0_ * t1_ - s1_ * t0_) / det;
  const double a = (t0_ - b * s1_) / s0_;
  if (!(a + b > 0)) return fallback;
  return std::clamp(b / (a + b), 0.01, 0.95);
}

double StepCost::one_token_seconds() const {
  const double det = s0_ * s2_ - s1_ * s1_;
  if (s0_ < 8 || det < 1e-3 * s0_ * s0_) return 0;
  const double b = (s0_ * t1_ - s1_ * t0_) / det;
  const double a = (t0_ - b * s1_) / s0_;
  return a + b > 0 ? a + b : 0;
}

int32_t best_draft_length(double acceptance, double draft_cost, double row_cost, int32_t max_k,
                          double margin) {
  const double a = std::clamp(acceptance, 0.0, 0.999);
  int32_t best = 0;
  double best_gain = margin;
  double tokens = 1, p = 1;  // E(k) and a^k
  for (int32_t k = 1; k <= max_k; ++k) {
    p *= a;
    tokens += p;
    const double gain = tokens / (1 + double(k) * (draft_cost + row_cost));
    if (gain > best_gain) {
      best_gain = gain;
      best = k;
    }
  }
  return best;
}

void DraftWorth::update(int32_t proposed, int32_t accepted) {
  if (proposed <= 0) return;
  accepted = std::clamp(accepted, 0, proposed);
  accepted_ = accepted_ * decay_ + accepted;
  rejected_ = rejected_ * decay_ + (accepted < proposed ? 1 : 0);
}

bool should_speculate(int64_t batch_tokens, int64_t max_batch_tokens) {
  return batch_tokens < max_batch_tokens;
}

int64_t draft_token_budget(int64_t batch_tokens, int64_t max_batch_tokens) {
  return std::max<int64_t>(0, max_batch_tokens - batch_tokens);
}

void SpeculativeStats::add(int32_t step_proposed, int32_t step_accepted) {
  ++steps;
  proposed += step_proposed;
  accepted += step_accepted;
}

}  // namespace shrike::decode
