// AVX-512 matmul kernels (also compiled as matmul_vnni.cc with SHRIKE_MM_VNNI=1).
//
// ODR safety: this translation unit is compiled with AVX-512 flags, so everything in it is either
// an intrinsic, or has internal linkage (anonymous namespace), or is one of the exported
// isa_matmul_* entry points. No STL, no inline functions of shared headers.
//
// Microkernel: P panels (16 rows each, one zmm per panel and column/group) x T tokens of
// accumulators, run over the whole depth; each weight vector is loaded once and used T times.
//   float types: acc[p][t] += W[panel p][col c] (16 rows) * broadcast x[t][c]
//                (FP8: the bytes become f16 by a shift, i.e. W / 256; the row scales x 256 are
//                applied once at the end)
//   quantised:   per block of 32, int32 s[p][t] starts at -offset*sum(xq) and accumulates
//                u8(weights) x s8(activations) products (vpdpbusd, or vpmaddubsw+vpmaddwd);
//                then acc[p][t] += float(s) * (d_w[16 rows] * d_x[t]) (Q8_0 / Q4_0), or
//                acc[p][t] += float(s) * d_x[t] and one multiply by the row scales at the end
//                (Q8_C). Q4_G128: see q4g_kernel.
#include <immintrin.h>

#include <cstdint>

#include "kernels/matmul_internal.h"

#ifndef SHRIKE_MM_VNNI
#define SHRIKE_MM_VNNI 0
#endif

namespace shrike::kernels::detail {
namespace {

constexpr int kF32 = 0, kF16 = 1, kBF16 = 2, kFP8 = 3;
// Row-scale types (Q8_C, FP8) start each panel with the 16 rows' f32 scales.
constexpr int64_t kScaleBytes = kPanel * 4;

// Bytes per column of a float-type panel, and where the columns start.
template <int WT>
constexpr int64_t col_bytes() {
  return WT == kF32 ? 64 : WT == kFP8 ? 16 : 32;
}
template <int WT>
constexpr int64_t col_offset() {
  return WT == kFP8 ? kScaleBytes : 0;
}

template <int WT>
inline __m512 load_w(const uint8_t* p) {
  if constexpr (WT == kF32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(p));
  } else if constexpr (WT == kF16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  } else if constexpr (WT == kFP8) {
    // e4m3 -> f16, exactly: the 7 low bits move up by 7 into f16's exponent and mantissa fields
    // (subnormals included) and the sign to bit 15 (sign extension, then bit 14 cleared). The
    // f16 value is the e4m3 value / 256.
    const __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm512_cvtph_ps(
        _mm256_and_si256(_mm256_slli_epi16(v, 7), _mm256_set1_epi16(short(0xBF80))));
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

// FP8: the panel's row scales x 256 (the f16 image of a weight is its value / 256).
inline __m512 fp8_scales(const uint8_t* panel) {
  return _mm512_mul_ps(_mm512_loadu_ps(reinterpret_cast<const float*>(panel)),
                       _mm512_set1_ps(256.0f));
}

// PK: activations read from the packed copy (16 tokens of one column contiguous: one cache line
// per column feeds all 16 broadcasts) instead of T separate rows.
template <int WT, bool PK, int P, int T>
void fkernel(const GemmArgs& a, int64_t p, int64_t t0) {
  constexpr int64_t es = col_bytes<WT>();
  const int64_t K = a.cols, pb = a.panel_bytes;
  const uint8_t* w = a.w + p * pb + col_offset<WT>();
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
    if constexpr (WT == kFP8) {
      const __m512 sc = fp8_scales(a.w + (p + i) * pb);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) acc[i][t] = _mm512_mul_ps(acc[i][t], sc);
    }
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
  return _mm512_add_epi32(s, _mm512_madd_epi16(_mm512_maddubs_epi16(w, a), _mm512_set1_epi16(1)));
#endif
}

// s += n0 . a0 + n1 . a1 for nibbles n (0..15): without VNNI the two vpmaddubsw results add in
// 16 bits without overflow (|15 * 127 * 2| per pair each), saving one vpmaddwd + vpaddd.
inline __m512i dot2_u4s8(__m512i s, __m512i n0, __m512i a0, __m512i n1, __m512i a1) {
#if SHRIKE_MM_VNNI
  return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(s, n0, a0), n1, a1);
#else
  const __m512i p16 = _mm512_add_epi16(_mm512_maddubs_epi16(n0, a0), _mm512_maddubs_epi16(n1, a1));
  return _mm512_add_epi32(s, _mm512_madd_epi16(p16, _mm512_set1_epi16(1)));
#endif
}

// Block-quantised families sharing one kernel: per block of 32 columns, an int8 dot product.
constexpr int kQ8_0 = 0, kQ4_0 = 1, kQ8C = 2;

// Bytes of one (panel, block of 32 columns); and where the first block starts in the panel.
template <int QT>
constexpr int64_t block_bytes() {
  return QT == kQ4_0 ? kPanel * 18 : QT == kQ8_0 ? kPanel * 34 : kPanel * 32;
}
template <int QT>
constexpr int64_t block_offset() {
  return QT == kQ8C ? kScaleBytes : 0;
}
// Bytes before a block's quants (its 16 f16 scales; Q8_C has none).
template <int QT>
constexpr int64_t quant_offset() {
  return QT == kQ8C ? 0 : 32;
}

template <int QT, int P, int T>
void qkernel(const GemmArgs& a, int64_t p, int64_t t0) {
  constexpr bool Q4 = QT == kQ4_0;
  constexpr int64_t bytes_per_block = block_bytes<QT>();  // per (panel, block)
  const int64_t K = a.kq, nb = K / 32, pb = a.panel_bytes;
  const uint8_t* w = a.w + p * pb + block_offset<QT>();
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
    const uint8_t* wsc = w + b * bytes_per_block;  // 16 scales (not Q8_C), then the quants
    const uint8_t* wq = wsc + quant_offset<QT>();
    const int8_t* xb = xq + b * 32;
    if (pf)
#pragma GCC unroll 16
      for (int64_t o = 0; o < P * bytes_per_block; o += 64)
        _mm_prefetch(reinterpret_cast<const char*>(wsc + P * pb + (o / bytes_per_block) * pb +
                                                   o % bytes_per_block),
                     _MM_HINT_T0);
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
          for (int i = 0; i < P; ++i) s[i][t] = dot2_u4s8(s[i][t], lo[i], al, hi[i], ah);
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
        // Without VNNI: |w| x (a with w's sign); vpmaddubsw cannot overflow (|w| <= 128,
        // |a| <= 127).
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
    if constexpr (QT == kQ8C) {
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const __m512 dx = _mm512_set1_ps(xd[t * nb + b]);
#pragma GCC unroll 16
        for (int i = 0; i < P; ++i)
          acc[i][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i][t]), dx, acc[i][t]);
      }
    } else {
      __m512 dw[P];
#pragma GCC unroll 16
      for (int i = 0; i < P; ++i)
        dw[i] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wsc + i * pb)));
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const __m512 dx = _mm512_set1_ps(xd[t * nb + b]);
#pragma GCC unroll 16
        for (int i = 0; i < P; ++i)
          acc[i][t] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i][t]), _mm512_mul_ps(dw[i], dx), acc[i][t]);
      }
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i) {
    const __mmask16 m = row_mask(a.rows, p + i);
    if constexpr (QT == kQ8C) {
      const __m512 sc = _mm512_loadu_ps(reinterpret_cast<const float*>(a.w + (p + i) * pb));
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) acc[i][t] = _mm512_mul_ps(acc[i][t], sc);
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t)
      _mm512_mask_storeu_ps(a.y + (t0 + t) * a.rows + (p + i) * kPanel, m, acc[i][t]);
  }
}

// Q4_G128 (groups of 128 columns with scale d and minimum m per row; activations quantised per
// block of 32): per group, row r and token t,
//   f = sum over the 4 blocks b, in order, of float(s_b) * xd_b   (s_b: int32 nibble . xq dot)
//   acc += d * f;  acc += m * xm   (xm: the group's sum of quantised activations)
// Every kernel and the decode kernel take exactly these steps, so the result does not depend on
// the batch. One block at a time here (8 int32 accumulators per 2 x 4 tile); 16 quant groups of
// 64 bytes per group of columns, block b being the low (b < 2) or high nibbles of groups
// 8(b%2)..8(b%2)+7.
constexpr int64_t kQ4GGroupBytes = kPanel * 68;

template <int P, int T>
void q4g_kernel(const GemmArgs& a, int64_t p, int64_t t0) {
  const int64_t K = a.kq, nb = K / 32, ng = K / 128, pb = a.panel_bytes;
  const uint8_t* w = a.w + p * pb;
  const int8_t* xq = a.xq + t0 * K;
  const float* xd = a.xd + t0 * nb;
  const float* xm = a.xm + t0 * ng;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512 acc[P][T];
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
  const bool pf = t0 == 0 && a.n > 8 && a.n <= 16;  // as qkernel
  for (int64_t g = 0; g < ng; ++g) {
    const uint8_t* wg = w + g * kQ4GGroupBytes;  // d, m, then the quants
    if (pf)
#pragma GCC unroll 4
      for (int i = 0; i < P; ++i)
        for (int64_t o = 0; o < kQ4GGroupBytes; o += 64)
          _mm_prefetch(reinterpret_cast<const char*>(wg + (P + i) * pb + o), _MM_HINT_T0);
    __m512 f[P][T];
#pragma GCC unroll 4
    for (int b = 0; b < 4; ++b) {
      const uint8_t* wq = wg + 64 + (b % 2) * 8 * 64;
      const int8_t* xb = xq + g * 128 + b * 32;
      __m512i s[P][T];
#pragma GCC unroll 16
      for (int i = 0; i < P; ++i)
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) s[i][t] = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int j = 0; j < 8; j += 2) {
        __m512i n0[P], n1[P];
#pragma GCC unroll 16
        for (int i = 0; i < P; ++i) {
          __m512i r0 = _mm512_loadu_si512(wq + i * pb + j * 64);
          __m512i r1 = _mm512_loadu_si512(wq + i * pb + (j + 1) * 64);
          if (b >= 2) {
            r0 = _mm512_srli_epi16(r0, 4);
            r1 = _mm512_srli_epi16(r1, 4);
          }
          n0[i] = _mm512_and_si512(r0, m4);
          n1[i] = _mm512_and_si512(r1, m4);
        }
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          const __m512i a0 = _mm512_set1_epi32(load_i32(xb + t * K + 4 * j));
          const __m512i a1 = _mm512_set1_epi32(load_i32(xb + t * K + 4 * j + 4));
#pragma GCC unroll 16
          for (int i = 0; i < P; ++i) s[i][t] = dot2_u4s8(s[i][t], n0[i], a0, n1[i], a1);
        }
      }
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const __m512 dx = _mm512_set1_ps(xd[t * nb + g * 4 + b]);
#pragma GCC unroll 16
        for (int i = 0; i < P; ++i)
          f[i][t] = b == 0 ? _mm512_mul_ps(_mm512_cvtepi32_ps(s[i][t]), dx)
                           : _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i][t]), dx, f[i][t]);
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < P; ++i) {
      const __m512 d =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wg + i * pb)));
      const __m512 m =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wg + i * pb + 32)));
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        acc[i][t] = _mm512_fmadd_ps(d, f[i][t], acc[i][t]);
        acc[i][t] = _mm512_fmadd_ps(m, _mm512_set1_ps(xm[t * ng + g]), acc[i][t]);
      }
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
  constexpr int64_t es = col_bytes<WT>();
  const int64_t K = a.cols;
  const uint8_t* w = a.w + p * a.panel_bytes + col_offset<WT>();
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
  __m512 r = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
  if constexpr (WT == kFP8) r = _mm512_mul_ps(r, fp8_scales(a.w + p * a.panel_bytes));
  _mm512_mask_storeu_ps(a.y + p * kPanel, row_mask(a.rows, p), r);
}

// FP8 decode without the f16 conversion (vcvtph2ps limits the f16 route to about 20 GB/s, below
// the memory bandwidth): (sign-extended byte << 20) & 0x87F00000 is an f32 whose value is the
// e4m3 value x 2^-120 exactly, e4m3 subnormals becoming f32 subnormals. x comes scaled by 2^k
// (GemmArgs::x8) so the products stay normal; the caller checks that subnormal inputs are not
// flushed (MXCSR.DAZ).
inline __m512 load_fp8_as_f32(const uint8_t* p) {
  const __m512i v = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm512_castsi512_ps(
      _mm512_and_si512(_mm512_slli_epi32(v, 20), _mm512_set1_epi32(int(0x87F00000u))));
}

void fp8_decode_direct(const GemmArgs& a, int64_t p) {
  const int64_t K = a.cols;
  const uint8_t* panel = a.w + p * a.panel_bytes;
  const uint8_t* w = panel + kScaleBytes;
  const float* x = a.x8;
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t c = 0;
  for (; c + 4 <= K; c += 4) {
    a0 = _mm512_fmadd_ps(load_fp8_as_f32(w + c * 16), _mm512_set1_ps(x[c]), a0);
    a1 = _mm512_fmadd_ps(load_fp8_as_f32(w + (c + 1) * 16), _mm512_set1_ps(x[c + 1]), a1);
    a2 = _mm512_fmadd_ps(load_fp8_as_f32(w + (c + 2) * 16), _mm512_set1_ps(x[c + 2]), a2);
    a3 = _mm512_fmadd_ps(load_fp8_as_f32(w + (c + 3) * 16), _mm512_set1_ps(x[c + 3]), a3);
  }
  for (; c < K; ++c) a0 = _mm512_fmadd_ps(load_fp8_as_f32(w + c * 16), _mm512_set1_ps(x[c]), a0);
  __m512 r = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
  r = _mm512_mul_ps(_mm512_mul_ps(r, _mm512_loadu_ps(reinterpret_cast<const float*>(panel))),
                    _mm512_set1_ps(a.x8_unscale));
  _mm512_mask_storeu_ps(a.y + p * kPanel, row_mask(a.rows, p), r);
}

// MXCSR.DAZ (denormals are zero) would flush the e4m3 subnormals of fp8_decode_direct.
inline bool subnormal_inputs_kept() {
  return (_mm_getcsr() & 0x40) == 0;
}

template <int QT>
void qdecode(const GemmArgs& a, int64_t p) {
  constexpr bool Q4 = QT == kQ4_0;
  constexpr int64_t bytes_per_block = block_bytes<QT>();
  const int64_t nb = a.kq / 32;
  const uint8_t* w = a.w + p * a.panel_bytes + block_offset<QT>();
  const int8_t* xq = a.xq;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  // One float accumulator, blocks in order: the same sum as qkernel's (batch invariance); the
  // integer work per block is long enough to hide the FMA latency.
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wsc = w + b * bytes_per_block;
    const uint8_t* wq = wsc + quant_offset<QT>();
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
          const __m512i ws =
              _mm512_xor_si512(_mm512_loadu_si512(wq + (g + u) * 64), _mm512_set1_epi8(char(0x80)));
          const __m512i av = _mm512_set1_epi32(load_i32(xb + 4 * (g + u)));
          const __m512i sa =
              _mm512_mask_sub_epi8(av, _mm512_movepi8_mask(ws), _mm512_setzero_si512(), av);
          const __m512i d = _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(ws), sa),
                                              _mm512_set1_epi16(1));
          if (u == 0)
            s0 = _mm512_add_epi32(s0, d);
          else
            s1 = _mm512_add_epi32(s1, d);
        }
#endif
      }
    }
    const __m512 sf = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
    if constexpr (QT == kQ8C) {
      acc = _mm512_fmadd_ps(sf, _mm512_set1_ps(a.xd[b]), acc);
    } else {
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wsc)));
      acc = _mm512_fmadd_ps(sf, _mm512_mul_ps(dw, _mm512_set1_ps(a.xd[b])), acc);
    }
  }
  if constexpr (QT == kQ8C)
    acc = _mm512_mul_ps(acc,
                        _mm512_loadu_ps(reinterpret_cast<const float*>(a.w + p * a.panel_bytes)));
  _mm512_mask_storeu_ps(a.y + p * kPanel, row_mask(a.rows, p), acc);
}

// Q4_G128 decode: blocks 0 and 2 (low and high nibbles of quant groups 0..7) from the same loads,
// then blocks 1 and 3; four int32 chains, then q4g_kernel's float steps.
void q4g_decode(const GemmArgs& a, int64_t p) {
  const int64_t ng = a.kq / 128;
  const uint8_t* w = a.w + p * a.panel_bytes;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t g = 0; g < ng; ++g) {
    const uint8_t* wg = w + g * kQ4GGroupBytes;
    const int8_t* xg = a.xq + g * 128;
    __m512i s[4];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {  // h: blocks h (low nibbles) and h + 2 (high nibbles)
      __m512i lo = _mm512_setzero_si512(), hi = lo;
#pragma GCC unroll 4
      for (int j = 0; j < 8; j += 2) {
        const __m512i r0 = _mm512_loadu_si512(wg + 64 + (8 * h + j) * 64);
        const __m512i r1 = _mm512_loadu_si512(wg + 64 + (8 * h + j + 1) * 64);
        const int8_t* xl = xg + 32 * h + 4 * j;
        lo = dot2_u4s8(lo, _mm512_and_si512(r0, m4), _mm512_set1_epi32(load_i32(xl)),
                       _mm512_and_si512(r1, m4), _mm512_set1_epi32(load_i32(xl + 4)));
        hi = dot2_u4s8(hi, _mm512_and_si512(_mm512_srli_epi16(r0, 4), m4),
                       _mm512_set1_epi32(load_i32(xl + 64)),
                       _mm512_and_si512(_mm512_srli_epi16(r1, 4), m4),
                       _mm512_set1_epi32(load_i32(xl + 68)));
      }
      s[h] = lo;
      s[h + 2] = hi;
    }
    const float* xd = a.xd + g * 4;
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(s[0]), _mm512_set1_ps(xd[0]));
    f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[1]), _mm512_set1_ps(xd[1]), f);
    f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[2]), _mm512_set1_ps(xd[2]), f);
    f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[3]), _mm512_set1_ps(xd[3]), f);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wg)));
    const __m512 m = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wg + 32)));
    acc = _mm512_fmadd_ps(d, f, acc);
    acc = _mm512_fmadd_ps(m, _mm512_set1_ps(a.xm[g]), acc);
  }
  _mm512_mask_storeu_ps(a.y + p * kPanel, row_mask(a.rows, p), acc);
}

// Kernel families: Fam::run<P, T>(args, panel, token0).
template <int WT, bool PK>
struct FloatFam {
  template <int P, int T>
  static void run(const GemmArgs& a, int64_t p, int64_t t0) {
    fkernel<WT, PK, P, T>(a, p, t0);
  }
};
template <int QT>
struct QuantFam {
  static void decode(const GemmArgs& a, int64_t p) { qdecode<QT>(a, p); }
  template <int P, int T>
  static void run(const GemmArgs& a, int64_t p, int64_t t0) {
    qkernel<QT, P, T>(a, p, t0);
  }
};
struct Q4GFam {
  static void decode(const GemmArgs& a, int64_t p) { q4g_decode(a, p); }
  template <int P, int T>
  static void run(const GemmArgs& a, int64_t p, int64_t t0) {
    q4g_kernel<P, T>(a, p, t0);
  }
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
  if (WT == kFP8 && a.n == 1 && !a.invariant && a.x8 != nullptr && subnormal_inputs_kept()) {
    for (; p < p1; ++p) fp8_decode_direct(a, p);
  } else if (a.n == 1 && !a.invariant) {
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
    // block of 16 tokens (FP8: and converted once per block of 16 tokens).
    using F = FloatFam<WT, true>;
    for (; p < p1; ++p) all_tokens<F, 1, 16>(a, p);
  }
}

template <class F>
void qdrive(const GemmArgs& a, int64_t p0, int64_t p1) {
  int64_t p = p0;
  if (a.n == 1) {
    for (; p < p1; ++p) F::decode(a, p);
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
    case DType::F32:
      fdrive<kF32>(a, p0, p1);
      break;
    case DType::F16:
      fdrive<kF16>(a, p0, p1);
      break;
    case DType::BF16:
      fdrive<kBF16>(a, p0, p1);
      break;
    case DType::FP8_E4M3:
      fdrive<kFP8>(a, p0, p1);
      break;
    case DType::Q8_0:
      qdrive<QuantFam<kQ8_0>>(a, p0, p1);
      break;
    case DType::Q4_0:
      qdrive<QuantFam<kQ4_0>>(a, p0, p1);
      break;
    case DType::Q8_C:
      qdrive<QuantFam<kQ8C>>(a, p0, p1);
      break;
    case DType::Q4_G128:
      qdrive<Q4GFam>(a, p0, p1);
      break;
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
IsaMatmul isa_matmul_avx512vnni() {
  return IsaMatmul{gemm, quantize_row_x, 128, 4, 9};
}
#else
IsaMatmul isa_matmul_avx512() {
  return IsaMatmul{gemm, quantize_row_x, 0, 4, 9};
}
#endif

}  // namespace shrike::kernels::detail
