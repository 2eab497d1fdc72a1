// Speculative decoding primitives, on token ids and logit / probability rows (no model here): a
// prompt-lookup (n-gram) proposer, greedy verification, speculative (rejection) sampling that
// keeps the target's processed distribution exactly (Leviathan et al. 2023, Chen et al. 2023),
// an adaptive draft length per sequence, the batch-level rule for when to speculate at all, and
// acceptance statistics. The engine proposes k tokens, runs the target over the last accepted
// token plus the k drafts (k + 1 logit rows of one sequence in one forward pass), verifies, and
// rolls the KV cache back past the rejected drafts.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "decode/sampler.h"

namespace shrike::decode {

// Prompt lookup: the continuation of the most recent earlier occurrence of the sequence's last n
// tokens, for n from max_ngram down to min_ngram. The index is incremental: append() costs
// O(max_ngram - min_ngram + 1) hash-map updates per token and propose() as many lookups, so a
// long prompt is indexed once rather than scanned every step.
class NgramProposer {
 public:
  // Throws std::invalid_argument unless 1 <= min_ngram <= max_ngram <= kMaxNgram.
  explicit NgramProposer(int32_t min_ngram = 1, int32_t max_ngram = 3);
  static constexpr int32_t kMaxNgram = 16;

  // The sequence's tokens so far: the prompt, then every token emitted (accepted drafts and the
  // target's own). Rejected drafts are never appended, so there is nothing to roll back.
  void append(std::span<const int32_t> tokens);
  void append(int32_t token) { append(std::span<const int32_t>(&token, 1)); }
  void clear();

  // Up to k tokens that followed the most recent earlier occurrence of the longest matching
  // suffix (fewer when the sequence ends sooner; none without a match or for k <= 0).
  // matched: the length of that suffix (0 without a match).
  std::vector<int32_t> propose(int32_t k, int32_t* matched = nullptr) const;
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  uint64_t hash(size_t end, int32_t n) const;  // of tokens_[end - n, end)

  int32_t min_ngram_, max_ngram_;
  std::vector<int32_t> tokens_;
  // Per n (index n - min_ngram): hash of an n-gram -> the position just after its latest
  // occurrence that already has a token after it (so the sequence's own suffix is not a match).
  std::vector<std::unordered_map<uint64_t, int32_t>> index_;
};

// The outcome of verifying one sequence's drafts: the accepted drafts followed by one token of
// the target's own (the correction, or the bonus token when every draft was accepted), so
// tokens.size() == accepted + 1 and each step emits at least one token.
struct Verification {
  std::vector<int32_t> tokens;
  int32_t accepted = 0;
};

// Greedy: target[i] is the target's argmax after the context plus draft[0, i) (k + 1 of them for
// k drafts). Accepts the longest prefix where draft[i] == target[i], then target[accepted].
// Throws std::invalid_argument unless target.size() == draft.size() + 1.
Verification verify_greedy(std::span<const int32_t> draft, std::span<const int32_t> target);

// Verification with the request's sampler: target_logits holds k + 1 rows of n_vocab, row i the
// target's logits after prompt, output and draft[0, i). Each row gets the sampler's processing
// (penalties counting the drafts before it as output, temperature, top-k, top-p, min-p), so the
// emitted tokens are distributed exactly as sampling one token at a time would be:
// - greedy sampler: verify_greedy on the rows' argmaxes (penalties included), as sample() picks;
// - otherwise draft[i] is accepted with probability min(1, p(x) / q(x)); on rejection the token
//   is drawn from norm(max(0, p - q)); with every draft accepted the bonus token is sample()'s
//   draw from row k. draft_probs: k rows of n_vocab, the draft model's (processed) distribution
//   each draft was drawn from; nullptr for a deterministic proposer (q a point mass on the
//   draft, as for NgramProposer).
// The draws come from sampler.generator(). Logits are restored before returning. Throws
// std::invalid_argument for a draft token outside the vocabulary, or as Sampler::sample().
Verification verify(Sampler& sampler, std::span<const int32_t> draft, const float* draft_probs,
                    float* target_logits, int64_t n_vocab, std::span<const int32_t> prompt,
                    std::span<const int32_t> output);

// Draft length per sequence from an exponentially weighted acceptance rate: after each verified
// step the rate moves towards accepted / proposed by `weight`; below `lower` the draft length
// drops by one (down to min_k), above `raise` it grows by one (up to max_k).
struct AdaptiveDraftOptions {
  int32_t min_k = 1, max_k = 8, initial_k = 4;
  double weight = 0.3;
  double lower = 0.4, raise = 0.8;
};

class AdaptiveDraftLength {
 public:
  // Throws std::invalid_argument for inconsistent options.
  explicit AdaptiveDraftLength(AdaptiveDraftOptions o = {});
  int32_t k() const { return k_; }
  double acceptance_rate() const { return rate_; }
  // A step that proposed nothing (no n-gram match) says nothing about the acceptance rate.
  void update(int32_t proposed, int32_t accepted);

 private:
  AdaptiveDraftOptions o_;
  int32_t k_;
  double rate_;
};

// Whether drafting pays, from what drafts of one kind (e.g. prompt lookup's matches of one
// length) have done so far: each draft token is taken as accepted with probability r, the ones
// after it only if it was, so the i-th draft adds r^i expected tokens to a step and costs
// row_cost (one more verified row, relative to a one-token step). The longest draft worth
// verifying is the largest i with r^i > row_cost. r is estimated from decayed counts of
// accepted drafts and of first rejections (a step of k drafts that accepts a < k is a tokens
// accepted and one rejected), with one of each as the prior.
class DraftWorth {
 public:
  // Throws std::invalid_argument unless 0 < decay <= 1.
  explicit DraftWorth(double decay = 0.95);
  double rate() const { return (accepted_ + 1) / (accepted_ + rejected_ + 2); }
  // The longest draft worth verifying, at most max_k (0: drafting does not pay).
  int32_t worth(int32_t max_k, double row_cost) const;
  void update(int32_t proposed, int32_t accepted);

 private:
  double decay_;
  double accepted_ = 0, rejected_ = 0;
};

// What one more token in a step costs relative to a one-token step, measured: a least-squares
// line time = a + b * tokens over the recent steps of at most max_tokens tokens (older steps
// weigh less by `decay` per step); the cost is b / (a + b). Small models whose weights stay in
// cache are compute-bound, and each verified row costs a third of a step or more; large ones
// are memory-bound and a row costs a few percent.
class StepCost {
 public:
  explicit StepCost(int64_t max_tokens = 8, double decay = 0.995)
      : max_(max_tokens), decay_(decay) {}
  void observe(int64_t tokens, double seconds);
  // The measured cost, or `fallback` until steps of different sizes have been seen.
  double row_cost(double fallback) const;
  // The fitted time of a one-token step (a + b), or 0 until it is determined.
  double one_token_seconds() const;

 private:
  int64_t max_;
  double decay_;
  double s0_ = 0, s1_ = 0, s2_ = 0, t0_ = 0, t1_ = 0;
};

// The draft length that pays best with a draft model (0: none does), from measured costs. Each
// draft token is accepted with probability `acceptance` (the ones after it only if it was), so
// k drafts give E(k) = (1 - a^(k+1)) / (1 - a) tokens per step (accepted ones and the target's
// own); they cost k draft passes of `draft_cost` and k more verified rows of `row_cost`, both
// relative to a one-token target step. Returns the k in [1, max_k] with the largest
// E(k) / (1 + k * (draft_cost + row_cost)), if that beats plain decoding's 1 by `margin`
// (work around the model that this does not count: drafting bookkeeping, longer
// verification), else 0.
int32_t best_draft_length(double acceptance, double draft_cost, double row_cost, int32_t max_k,
                          double margin = 1.1);

// Speculation trades compute for fewer memory-bound steps: it pays only while a step's weights
// read dominates, i.e. the batch is small. True when a step of batch_tokens (every sequence's
// tokens in it, before drafts) is below the threshold; draft_token_budget is how many draft
// tokens fit below it.
bool should_speculate(int64_t batch_tokens, int64_t max_batch_tokens);
int64_t draft_token_budget(int64_t batch_tokens, int64_t max_batch_tokens);

struct SpeculativeStats {
  int64_t steps = 0;     // verification steps
  int64_t proposed = 0;  // draft tokens proposed
  int64_t accepted = 0;  // of them accepted
  void add(int32_t step_proposed, int32_t step_accepted);
  double acceptance_rate() const { return proposed > 0 ? double(accepted) / double(proposed) : 0; }
  double mean_accepted_per_step() const { return steps > 0 ? double(accepted) / double(steps) : 0; }
  // Tokens emitted per target forward pass: accepted drafts plus the target's one per step.
  double tokens_per_step() const {
    return steps > 0 ? double(accepted + steps) / double(steps) : 0;
  }
};

}  // namespace shrike::decode
