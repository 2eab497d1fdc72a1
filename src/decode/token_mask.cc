#include "decode/token_mask.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

namespace shrike::decode {
namespace {

// For each byte of mask bits, the eight 32-bit lane masks it stands for (all ones: keep), so a
// mixed word is applied with bitwise selects the compiler vectorises, without a branch per
// token (a bit-by-bit loop mispredicts on masks like "identifier tokens only").
constexpr std::array<std::array<uint32_t, 8>, 256> kLanes = [] {
  std::array<std::array<uint32_t, 8>, 256> t{};
  for (size_t b = 0; b < 256; ++b)
    for (size_t k = 0; k < 8; ++k) t[b][k] = (b >> k) & 1 ? 0xFFFFFFFFu : 0u;
  return t;
}();

constexpr uint32_t kNegInfBits = 0xFF800000u;

}  // namespace

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
    if (end - base < 64) {  // the vocabulary's last, partial word
      for (int64_t i = base; i < end; ++i)
        if (!((bits >> (i - base)) & 1)) logits[i] = kNegInf;
      continue;
    }
    uint32_t v[64];
    std::memcpy(v, logits + base, sizeof v);
    for (size_t g = 0; g < 8; ++g) {
      const auto& lanes = kLanes[(bits >> (8 * g)) & 0xFF];
      for (size_t k = 0; k < 8; ++k)
        v[8 * g + k] = (v[8 * g + k] & lanes[k]) | (~lanes[k] & kNegInfBits);
    }
    std::memcpy(logits + base, v, sizeof v);
  }
}

int32_t masked_argmax(const float* logits, int64_t n_vocab, const TokenBitset& allowed) {
  const auto& words = allowed.words();
  int64_t first = -1, best = -1;
  float best_logit = -std::numeric_limits<float>::infinity();
  for (size_t w = 0; w < words.size() && int64_t(w) * 64 < n_vocab; ++w)
    for (uint64_t bits = words[w]; bits != 0; bits &= bits - 1) {
      const int64_t id = int64_t(w) * 64 + std::countr_zero(bits);
      if (id >= n_vocab) break;
      if (first < 0) first = id;
      if (logits[id] > best_logit) {  // strictly: the lowest id on ties; NaN never
        best = id;
        best_logit = logits[id];
      }
    }
  return int32_t(best >= 0 ? best : first);
}

}  // namespace shrike::decode
