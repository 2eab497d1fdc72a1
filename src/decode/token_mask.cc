#include "decode/token_mask.h"

#include <algorithm>
#include <limits>

namespace shrike::decode {

void apply_token_mask(float* logits, int64_t n_vocab, const TokenBitset& allowed) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const auto& words = allowed.words();
  for (int64_t base = 0; base < n_vocab; base += 64) {
    const int64_t end = std::min<int64_t>(base + 64, n_vocab);
    const size_t w = size_t(base >> 6);
    const uint64_t bits = w < words.size() ? words[w] : 0;
    if (bits == ~uint64_t(0) && end - base == 64) continue;
    if (bits == 0) {
      std::fill(logits + base, logits + end, kNegInf);
      continue;
    }
    for (int64_t i = base; i < end; ++i)
      if (!((bits >> (i - base)) & 1)) logits[i] = kNegInf;
  }
}

}  // namespace shrike::decode
