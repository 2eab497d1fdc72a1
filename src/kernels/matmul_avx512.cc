// AVX-512 matmul kernels (also compiled as matmul_vnni.cc with SHRIKE_MM_VNNI=1).
//
// ODR safety: this translation unit is compiled with AVX-512 flags, so everything in it is either
// an intrinsic, or has internal linkage (anonymous namespace), or is one of the exported
// isa_matmul_* entry points. No STL, no inline functions of shared headers.
//
// Microkernel: P panels (16 rows each, one zmm per panel and column/group) x T tokens of
// accumulators, run over the whole depth; each weight vector is loaded once and used T times.
//   float types: acc[p][t] += W[panel p][col c] (16 rows) * broadcast x[t][c]
//   quantised:   per block of 32, int32 s[p][t] starts at -offset*sum(xq) and accumulates
//                u8(weights) x s8(activations) products (vpdpbusd, or vpmaddubsw+vpmaddwd);
//                then acc[p][t] += float(s) * (d_w[16 rows] * d_x[t]).
#include <immintrin.h>

#include <cstdint>

#include "kernels/matmul_internal.h"

#ifndef SHRIKE_MM_VNNI
#define SHRIKE_MM_VNNI 0
#endif

namespace shrike::kernels::detail {
namespace {

constexpr int kF32 = 0, kF16 = 1, kBF16 = 2;

template <int WT>
inline __m512 load_w(const uint8_t* p) {
  if constexpr (WT == kF32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(p));
  } else if constexpr (WT == kF16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  } else {
    return _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
  }
}

inline __mmask16 row_mask(int64_t rows, int64_t panel) {
  const int64_t left = rows - panel * kPanel;
  return left >= 16 ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
}

inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return v;
}

// PK: activations read from the packed copy (16 tokens of one column contiguous: one cache line
// per column feeds all 16 broadcasts) instead of T separate rows.
template <int WT, bool PK, int P, int T>
void fkernel(const GemmArgs& a, int64_t p, int64_t t0) {
  constexpr int64_t es = WT == kF32 ? 64 : 32;
  const int64_t K = a.cols, pb = a.panel_bytes;
  const uint8_t* w = a.w + p * pb;
  const float* x = PK ? a.xp + t0 * K : a.x + t0 * K;  // (t0 is a multiple of 16 when PK)
  __m512 acc[P][T];
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
  // Small batches (weights from DRAM, used by every token block): the first token block pulls
  // the next P panels into cache while it computes, so memory and arithmetic overlap.
  const bool pf = !PK && t0 == 0 && a.n <= 16;
  for (int64_t c = 0; c < K; ++c) {
    __m512 wv[P];
#pragma GCC unroll 16
    for (int i = 0; i < P; ++i) wv[i] = load_w<WT>(w + i * pb + c * es);
    if (pf && ((c * es) & 63) == 0)
#pragma GCC unroll 16
      for (int i = 0; i < P; ++i)
        _mm_prefetch(reinterpret_cast<const char*>(w + (P + i) * pb + c * es), _MM_HINT_T0);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const __m512 xb = _mm512_set1_ps(PK ? x[c * 16 + t] : x[t * K + c]);
#pragma GCC unroll 16
      for (int i = 0; i < P; ++i) acc[i][t] = _mm512_fmadd_ps(wv[i], xb, acc[i][t]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i) {
    const __mmask16 m = row_mask(a.rows, p + i);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t)
      _mm512_mask_storeu_ps(a.y + (t0 + t) * a.rows + (p + i) * kPanel, m, acc[i][t]);
  }
}

// s += u8 w . s8 a over each group of 4 bytes (one int32 lane per row).
inline __m512i dot_u8s8(__m512i s, __m512i w, __m512i a) {
#if SHRIKE_MM_VNNI
  return _mm512_dpbusd_epi32(s, w, a);
#else
  return _mm512_add_epi32(
      s, _mm512_madd_epi16(_mm512_maddubs_epi16(w, a), _mm512_set1_epi16(1)));
#endif
}

template <bool Q4, int P, int T>
void qkernel(const GemmArgs& a, int64_t p, int64_t t0) {
  constexpr int64_t bytes_per_block = Q4 ? kPanel * 18 : kPanel * 34;  // per (panel, block)
  const int64_t K = a.cols, nb = K / 32, pb = a.panel_bytes;
  const uint8_t* w = a.w + p * pb;
  const int8_t* xq = a.xq + t0 * K;
  const float* xd = a.xd + t0 * nb;
  const int32_t* xs = a.xs + t0 * nb;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512 acc[P][T];
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
  // Small batches of 9..16 tokens (two token blocks per panel): the first block prefetches the
  // next P panels (see fkernel). With a single token block it measured slower than leaving it
  // to the hardware prefetcher.
  const bool pf = t0 == 0 && a.n > 8 && a.n <= 16;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wsc = w + b * bytes_per_block;  // 16 scales, then the quants
    const uint8_t* wq = wsc + 32;
    const int8_t* xb = xq + b * 32;
    if (pf)
#pragma GCC unroll 16
      for (int64_t o = 0; o < P * bytes_per_block; o += 64)
        _mm_prefetch(reinterpret_cast<const char*>(wsc + P * pb + (o / bytes_per_block) * pb +
                                                   o % bytes_per_block), _MM_HINT_T0);
    __m512i s[P][T];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const __m512i init = _mm512_set1_epi32(xs[t * nb + b]);
#pragma GCC unroll 16
      for (int i = 0; i < P; ++i) s[i][t] = init;
    }
    if constexpr (Q4) {
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        __m512i lo[P], hi[P];
#pragma GCC unroll 16
        for (int i = 0; i < P; ++i) {
          const __m512i raw = _mm512_loadu_si512(wq + i * pb + g * 64);
          lo[i] = _mm512_and_si512(raw, m4);
          hi[i] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
        }
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          const __m512i al = _mm512_set1_epi32(load_i32(xb + t * K + 4 * g));
          const __m512i ah = _mm512_set1_epi32(load_i32(xb + t * K + 16 + 4 * g));
#pragma GCC unroll 16
          for (int i = 0; i < P; ++i) {
#if SHRIKE_MM_VNNI
            s[i][t] = dot_u8s8(s[i][t], lo[i], al);
            s[i][t] = dot_u8s8(s[i][t], hi[i], ah);
#else
            // Nibble products are small (|15 * 127 * 2| per pair): two vpmaddubsw results add in
            // 16 bits without overflow, saving one vpmaddwd + vpaddd.
            const __m512i p16 = _mm512_add_epi16(_mm512_maddubs_epi16(lo[i], al),
                                                 _mm512_maddubs_epi16(hi[i], ah));
            s[i][t] = _mm512_add_epi32(s[i][t], _mm512_madd_epi16(p16, _mm512_set1_epi16(1)));
#endif
          }
        }
      }
    } else {
#pragma GCC unroll 16
      for (int g = 0; g < 8; ++g) {
#if SHRIKE_MM_VNNI
        __m512i wv[P];
#pragma GCC unroll 16
        for (int i = 0; i < P; ++i) wv[i] = _mm512_loadu_si512(wq + i * pb + g * 64);
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          const __m512i av = _mm512_set1_epi32(load_i32(xb + t * K + 4 * g));
#pragma GCC unroll 16
          for (int i = 0; i < P; ++i) s[i][t] = _mm512_dpbusd_epi32(s[i][t], wv[i], av);
        }
#else
        // Without VNNI: |w| x (a with w's sign), vpmaddubsw cannot overflow (|w| <= 128, |a| <= 127).
        __m512i wa[P];
        __mmask64 neg[P];
#pragma GCC unroll 16
        for (int i = 0; i < P; ++i) {
          const __m512i ws = _mm512_xor_si512(_mm512_loadu_si512(wq + i * pb + g * 64),
                                              _mm512_set1_epi8(char(0x80)));
          wa[i] = _mm512_abs_epi8(ws);
          neg[i] = _mm512_movepi8_mask(ws);
        }
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          const __m512i av = _mm512_set1_epi32(load_i32(xb + t * K + 4 * g));
#pragma GCC unroll 16
          for (int i = 0; i < P; ++i) {
            const __m512i sa = _mm512_mask_sub_epi8(av, neg[i], _mm512_setzero_si512(), av);
            s[i][t] = _mm512_add_epi32(
                s[i][t], _mm512_madd_epi16(_mm512_maddubs_epi16(wa[i], sa), _mm512_set1_epi16(1)));
          }
        }
#endif
      }
    }
    __m512 dw[P];
#pragma GCC unroll 16
    for (int i = 0; i < P; ++i)
      dw[i] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wsc + i * pb)));
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const __m512 dx = _mm512_set1_ps(xd[t * nb + b]);
#pragma GCC unroll 16
      for (int i = 0; i < P; ++i)
        acc[i][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i][t]), _mm512_mul_ps(dw[i], dx), acc[i][t]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i) {
    const __mmask16 m = row_mask(a.rows, p + i);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t)
      _mm512_mask_storeu_ps(a.y + (t0 + t) * a.rows + (p + i) * kPanel, m, acc[i][t]);
  }
}

// Decode (n = 1) kernels: one panel at a time so the weights are read as one sequential stream
// (several panels at once were measurably slower from DRAM), with independent accumulators to
// hide FMA / vpdpbusd latency.
template <int WT>
void fdecode(const GemmArgs& a, int64_t p) {
  constexpr int64_t es = WT == kF32 ? 64 : 32;
  const int64_t K = a.cols;
  const uint8_t* w = a.w + p * a.panel_bytes;
  const float* x = a.x;
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t c = 0;
  for (; c + 4 <= K; c += 4) {
    a0 = _mm512_fmadd_ps(load_w<WT>(w + c * es), _mm512_set1_ps(x[c]), a0);
    a1 = _mm512_fmadd_ps(load_w<WT>(w + (c + 1) * es), _mm512_set1_ps(x[c + 1]), a1);
    a2 = _mm512_fmadd_ps(load_w<WT>(w + (c + 2) * es), _mm512_set1_ps(x[c + 2]), a2);
    a3 = _mm512_fmadd_ps(load_w<WT>(w + (c + 3) * es), _mm512_set1_ps(x[c + 3]), a3);
  }
  for (; c < K; ++c) a0 = _mm512_fmadd_ps(load_w<WT>(w + c * es), _mm512_set1_ps(x[c]), a0);
  const __m512 r = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
  _mm512_mask_storeu_ps(a.y + p * kPanel, row_mask(a.rows, p), r);
}

template <bool Q4>
void qdecode(const GemmArgs& a, int64_t p) {
  constexpr int64_t bytes_per_block = Q4 ? kPanel * 18 : kPanel * 34;
  const int64_t nb = a.cols / 32;
  const uint8_t* w = a.w + p * a.panel_bytes;
  const int8_t* xq = a.xq;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  // One float accumulator, blocks in order: the same sum as qkernel's (batch invariance); the
  // integer work per block is long enough to hide the FMA latency.
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wsc = w + b * bytes_per_block;
    const uint8_t* wq = wsc + 32;
    const int8_t* xb = xq + b * 32;
    __m512i s0 = _mm512_set1_epi32(a.xs[b]), s1 = _mm512_setzero_si512();
    if constexpr (Q4) {
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        const __m512i raw = _mm512_loadu_si512(wq + g * 64);
        s0 = dot_u8s8(s0, _mm512_and_si512(raw, m4), _mm512_set1_epi32(load_i32(xb + 4 * g)));
        s1 = dot_u8s8(s1, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4),
                      _mm512_set1_epi32(load_i32(xb + 16 + 4 * g)));
      }
    } else {
#pragma GCC unroll 16
      for (int g = 0; g < 8; g += 2) {
#if SHRIKE_MM_VNNI
        s0 = _mm512_dpbusd_epi32(s0, _mm512_loadu_si512(wq + g * 64),
                                 _mm512_set1_epi32(load_i32(xb + 4 * g)));
        s1 = _mm512_dpbusd_epi32(s1, _mm512_loadu_si512(wq + (g + 1) * 64),
                                 _mm512_set1_epi32(load_i32(xb + 4 * g + 4)));
#else
        for (int u = 0; u < 2; ++u) {
          const __m512i ws = _mm512_xor_si512(_mm512_loadu_si512(wq + (g + u) * 64),
                                              _mm512_set1_epi8(char(0x80)));
          const __m512i av = _mm512_set1_epi32(load_i32(xb + 4 * (g + u)));
          const __m512i sa = _mm512_mask_sub_epi8(av, _mm512_movepi8_mask(ws), _mm512_setzero_si512(), av);
          const __m512i d = _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(ws), sa),
                                              _mm512_set1_epi16(1));
          if (u == 0) s0 = _mm512_add_epi32(s0, d); else s1 = _mm512_add_epi32(s1, d);
        }
#endif
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wsc)));
    const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(a.xd[b]));
    const __m512 sf = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
    acc = _mm512_fmadd_ps(sf, sc, acc);
  }
  _mm512_mask_storeu_ps(a.y + p * kPanel, row_mask(a.rows, p), acc);
}

// Kernel families: Fam::run<P, T>(args, panel, token0).
template <int WT, bool PK>
struct FloatFam {
  template <int P, int T>
  static void run(const GemmArgs& a, int64_t p, int64_t t0) { fkernel<WT, PK, P, T>(a, p, t0); }
};
template <bool Q4>
struct QuantFam {
  template <int P, int T>
  static void run(const GemmArgs& a, int64_t p, int64_t t0) { qkernel<Q4, P, T>(a, p, t0); }
};

// Runs the kernel for the `rem` (< kTmax) leftover tokens.
template <class Fam, int P, int T>
void run_tail(const GemmArgs& a, int64_t p, int64_t t, int64_t rem) {
  if constexpr (T >= 1) {
    if (rem == T) {
      Fam::template run<P, T>(a, p, t);
    } else {
      run_tail<Fam, P, T - 1>(a, p, t, rem);
    }
  }
}

// All tokens of P panels starting at p: blocks of kTmax tokens, then the remainder.
template <class Fam, int P, int TM>
void all_tokens(const GemmArgs& a, int64_t p) {
  int64_t t = 0;
  for (; t + TM <= a.n; t += TM) Fam::template run<P, TM>(a, p, t);
  if (t < a.n) run_tail<Fam, P, TM - 1>(a, p, t, a.n - t);
}

template <int WT>
void fdrive(const GemmArgs& a, int64_t p0, int64_t p1) {
  int64_t p = p0;
  if (a.n == 1 && !a.invariant) {
    for (; p < p1; ++p) fdecode<WT>(a, p);
  } else if (a.n == 1) {
    // Batch-invariant decode: one accumulator chain per row summing the columns in the batched
    // kernels' order; 8 panels at once keep enough FMAs in flight.
    for (; p + 8 <= p1; p += 8) fkernel<WT, false, 8, 1>(a, p, 0);
    for (; p < p1; ++p) fkernel<WT, false, 1, 1>(a, p, 0);
  } else if (a.n <= 8 || a.xp == nullptr) {
    // Small batches: 2 panels x n tokens (enough independent FMA chains), x rows read directly.
    using F = FloatFam<WT, false>;
    for (; p + 2 <= p1; p += 2) all_tokens<F, 2, 8>(a, p);
    for (; p < p1; ++p) all_tokens<F, 1, 8>(a, p);
  } else {
    // Prefill: 1 panel x 16 tokens = 16 accumulators, x from the packed copy; each x element is
    // an embedded-broadcast operand of exactly one FMA. The panel is re-read from L1/L2 for each
    // block of 16 tokens.
    using F = FloatFam<WT, true>;
    for (; p < p1; ++p) all_tokens<F, 1, 16>(a, p);
  }
}

template <bool Q4>
void qdrive(const GemmArgs& a, int64_t p0, int64_t p1) {
  using F = QuantFam<Q4>;
  int64_t p = p0;
  if (a.n == 1) {
    for (; p < p1; ++p) qdecode<Q4>(a, p);
  } else if (a.n <= 8) {
    // Small batches: one panel (one sequential weight stream) x all tokens.
    for (; p < p1; ++p) all_tokens<F, 1, 8>(a, p);
  } else {
    // Prefill: 2 panels x 4 tokens (8 int32 + 8 f32 accumulators).
    for (; p + 2 <= p1; p += 2) all_tokens<F, 2, 4>(a, p);
    for (; p < p1; ++p) all_tokens<F, 1, 4>(a, p);
  }
}

void gemm(const GemmArgs& a, int64_t p0, int64_t p1) {
  switch (a.type) {
    case DType::F32: fdrive<kF32>(a, p0, p1); break;
    case DType::F16: fdrive<kF16>(a, p0, p1); break;
    case DType::BF16: fdrive<kBF16>(a, p0, p1); break;
    case DType::Q8_0: qdrive<false>(a, p0, p1); break;
    case DType::Q4_0: qdrive<true>(a, p0, p1); break;
    default: break;
  }
}

void quantize_row_x(const float* x, int64_t n, int8_t* q, float* d, int32_t* s, int32_t offset) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / 32; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + b * 32), v1 = _mm512_loadu_ps(x + b * 32 + 16);
    const __m512 m = _mm512_max_ps(_mm512_andnot_ps(sign, v0), _mm512_andnot_ps(sign, v1));
    const float amax = _mm512_reduce_max_ps(m);
    const float dd = amax / 127.0f;
    const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
    const __m512 vid = _mm512_set1_ps(id);
    const __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vid));
    const __m512i i1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vid));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * 32), _mm512_cvtsepi32_epi8(i0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * 32 + 16), _mm512_cvtsepi32_epi8(i1));
    d[b] = dd;
    s[b] = -offset * _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
  }
}

}  // namespace

#if SHRIKE_MM_VNNI
IsaMatmul isa_matmul_avx512vnni() { return IsaMatmul{gemm, quantize_row_x, 128, 4, 9}; }
#else
IsaMatmul isa_matmul_avx512() { return IsaMatmul{gemm, quantize_row_x, 0, 4, 9}; }
#endif

}  // namespace shrike::kernels::detail
