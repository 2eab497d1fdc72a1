// Products of F16 / BF16 weights repacked as BF16 column pairs (matmul_internal.h) with BF16
// activations, by AVX512_BF16's vdpbf16ps: one instruction takes 16 rows x 2 columns, twice the
// multiply-adds of an f32 FMA, so prefill (bound by arithmetic) can run up to twice as fast;
// decode reads the same 2 bytes per weight as the f16 kernels. The only unit compiled with
// -mavx512bf16; like the other ISA units it exports plain functions only.
#include <immintrin.h>

#include <algorithm>

#include "kernels/matmul_internal.h"

namespace shrike::kernels::detail {
namespace {

inline __m512 dot_pairs(__m512 acc, __m512i w, __m512i x) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh&>(w), reinterpret_cast<__m512bh&>(x));
}

// The 16 sums of panel p for token t, rows past the matrix's end left alone.
inline void store_panel(const GemmArgs& a, int64_t p, int64_t t, __m512 v) {
  const int64_t r0 = p * kPanel, left = a.rows - r0;
  float* y = a.y + t * a.rows + r0;
  if (left >= kPanel)
    _mm512_storeu_ps(y, v);
  else
    _mm512_mask_storeu_ps(y, __mmask16((1u << left) - 1), v);
}

// P panels x T tokens from token t0: each (row, token) is one accumulator summing the column
// pairs in order, whatever P and T are, so a token's result does not depend on its batch.
template <int P, int T>
void tile(const GemmArgs& a, int64_t p, int64_t t0) {
  const int64_t J = bf16_pair_count(a.cols), pb = a.panel_bytes;
  const uint8_t* w = a.w + p * pb;
  const auto* x = reinterpret_cast<const int32_t*>(a.xbf) + t0 * J;
  __m512 acc[P][T];
#pragma GCC unroll 8
  for (int i = 0; i < P; ++i)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
  for (int64_t j = 0; j < J; ++j) {
    __m512i wv[P];
#pragma GCC unroll 8
    for (int i = 0; i < P; ++i) wv[i] = _mm512_load_si512(w + i * pb + j * 64);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512i xb = _mm512_set1_epi32(x[t * J + j]);
#pragma GCC unroll 8
      for (int i = 0; i < P; ++i) acc[i][t] = dot_pairs(acc[i][t], wv[i], xb);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < P; ++i)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) store_panel(a, p + i, t0 + t, acc[i][t]);
}

// All tokens of P panels: tiles of kTokens, then the remainder.
constexpr int kTokens = 6;
template <int P>
void all_tokens(const GemmArgs& a, int64_t p) {
  int64_t t = 0;
  for (; t + kTokens <= a.n; t += kTokens) tile<P, kTokens>(a, p, t);
  switch (a.n - t) {
    case 1:
      return tile<P, 1>(a, p, t);
    case 2:
      return tile<P, 2>(a, p, t);
    case 3:
      return tile<P, 3>(a, p, t);
    case 4:
      return tile<P, 4>(a, p, t);
    case 5:
      return tile<P, 5>(a, p, t);
    default:
      return;
  }
}

// Decode (n = 1) of panel p: kChains accumulators over interleaved column pairs hide the
// instruction's latency (not batch-invariant: the sum is split).
constexpr int kChains = 4;
void decode(const GemmArgs& a, int64_t p) {
  const int64_t J = bf16_pair_count(a.cols);
  const uint8_t* w = a.w + p * a.panel_bytes;
  const auto* x = reinterpret_cast<const int32_t*>(a.xbf);
  __m512 acc[kChains];
  for (auto& v : acc) v = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + kChains <= J; j += kChains)
#pragma GCC unroll 4
    for (int u = 0; u < kChains; ++u)
      acc[u] = dot_pairs(acc[u], _mm512_load_si512(w + (j + u) * 64), _mm512_set1_epi32(x[j + u]));
  for (; j < J; ++j)
    acc[0] = dot_pairs(acc[0], _mm512_load_si512(w + j * 64), _mm512_set1_epi32(x[j]));
  store_panel(a, p, 0, _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

// Prefill and batches: 4 panels x 6 tokens (24 accumulators; per column pair 4 weight loads and
// 6 broadcasts feed 24 dot products). On the 1.1B shape (2 threads, Zen 5, 512 tokens) it ran
// 1.03x 2 x 8 and 1.01x 3 x 8; 2 x 12 ran 0.73x. Batch-invariant single tokens: 4 panels x 1.
// Every (row, token) keeps one accumulator whatever the tile, so tiles never change a sum.
void gemm(const GemmArgs& a, int64_t p0, int64_t p1) {
  int64_t p = p0;
  if (a.n == 1 && !a.invariant) {
    for (; p < p1; ++p) decode(a, p);
    return;
  }
  if (a.n == 1) {
    for (; p + 4 <= p1; p += 4) tile<4, 1>(a, p, 0);
  } else {
    for (; p + 4 <= p1; p += 4) all_tokens<4>(a, p);
  }
  for (; p < p1; ++p) all_tokens<1>(a, p);
}

}  // namespace

GemmFn bf16_pair_gemm() {
  return gemm;
}

void bf16_round_rows(const float* x, int64_t n, int64_t cols, uint16_t* out) {
  const int64_t width = 2 * bf16_pair_count(cols);
  for (int64_t t = 0; t < n; ++t) {
    const float* src = x + t * cols;
    uint16_t* dst = out + t * width;
    for (int64_t c = 0; c < width; c += 16) {
      const int64_t left = std::min<int64_t>(16, cols - c);
      const __mmask16 m =
          left >= 16 ? __mmask16(0xffff) : __mmask16((1u << std::max<int64_t>(left, 0)) - 1);
      const __m512 v = _mm512_maskz_loadu_ps(m, src + c);  // columns past cols read as 0
      const __m256bh b = _mm512_cvtneps_pbh(v);
      const __mmask16 sm = __mmask16((1u << std::min<int64_t>(16, width - c)) - 1);
      _mm256_mask_storeu_epi16(dst + c, sm, reinterpret_cast<const __m256i&>(b));
    }
  }
}

}  // namespace shrike::kernels::detail
