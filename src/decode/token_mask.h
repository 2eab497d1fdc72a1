// A set of allowed token ids (one bit per vocabulary entry) and its application to logits. Kept in
// decode, which depends on nothing, so the sampler can take a constraint's mask without knowing
// how it was computed (src/constrain computes them from an automaton and the token bytes).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace shrike::decode {

class TokenBitset {
 public:
  TokenBitset() = default;
  explicit TokenBitset(int64_t n) : n_(n), words_(size_t((n + 63) / 64), 0) {}

  int64_t size() const { return n_; }
  bool test(int64_t i) const { return (words_[size_t(i >> 6)] >> (i & 63)) & 1; }
  void set(int64_t i) { words_[size_t(i >> 6)] |= uint64_t(1) << (i & 63); }
  void reset(int64_t i) { words_[size_t(i >> 6)] &= ~(uint64_t(1) << (i & 63)); }
  int64_t count() const {
    int64_t c = 0;
    for (uint64_t w : words_) c += std::popcount(w);
    return c;
  }
  // The lowest set id, or -1 when none is set.
  int64_t first() const {
    for (size_t w = 0; w < words_.size(); ++w)
      if (words_[w]) return int64_t(w * 64) + std::countr_zero(words_[w]);
    return -1;
  }
  const std::vector<uint64_t>& words() const { return words_; }

 private:
  int64_t n_ = 0;
  std::vector<uint64_t> words_;
};

// Sets logits[i] = -inf for every i < n_vocab not in `allowed` (ids past allowed.size() count as
// not allowed). Word at a time: a word with no allowed id is 64 plain stores.
void apply_token_mask(float* logits, int64_t n_vocab, const TokenBitset& allowed);

// The allowed id (< n_vocab) with the largest logit, the lowest on ties, reading only the allowed
// ids (a constrained position allows a few dozen of thousands): what argmax gives after
// apply_token_mask, without writing the row, whenever an allowed logit is a number above -inf.
// Otherwise (every allowed logit -inf or NaN) the lowest allowed id; -1 when none is allowed.
int32_t masked_argmax(const float* logits, int64_t n_vocab, const TokenBitset& allowed);

}  // namespace shrike::decode
