// AVX2 (+FMA, F16C) matmul kernels. Same packed layout as AVX-512: a 16-row panel is read as two
// 8-row halves (one ymm each). Same ODR rules as matmul_avx512.cc: intrinsics and internal
// linkage only.
#include <immintrin.h>

#include <cstdint>

#include "kernels/matmul_internal.h"

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

// 8 weights (half a panel column).
template <int WT>
inline __m256 load_w(const uint8_t* p) {
  if constexpr (WT == kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  } else if constexpr (WT == kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  } else if constexpr (WT == kFP8) {
    // e4m3 -> f16 exactly (value / 256): the 7 low bits up by 7, the sign to bit 15 (see
    // matmul_avx512.cc).
    const __m128i v = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return _mm256_cvtph_ps(_mm_and_si128(_mm_slli_epi16(v, 7), _mm_set1_epi16(short(0xBF80))));
  } else {
    return _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  }
}

inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return v;
}

// Half h of a row-scaled panel's scales.
inline __m256 half_scales(const uint8_t* panel, int h) {
  return _mm256_loadu_ps(reinterpret_cast<const float*>(panel) + 8 * h);
}

// Stores the 8 rows of half h of panel p for one token, clipped to `rows`.
inline void store_half(const GemmArgs& a, int64_t p, int h, int64_t t, __m256 v) {
  const int64_t r0 = p * kPanel + h * 8;
  const int64_t left = a.rows - r0;
  float* y = a.y + t * a.rows + r0;
  if (left >= 8) {
    _mm256_storeu_ps(y, v);
  } else if (left > 0) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_maskstore_ps(y, _mm256_cmpgt_epi32(_mm256_set1_epi32(int(left)), idx), v);
  }
}

// H = 2P half panels x T tokens. FP8: each weight vector is converted once for the T tokens;
// the row scales x 256 are applied at the end.
template <int WT, int P, int T>
void fkernel(const GemmArgs& a, int64_t p, int64_t t0) {
  constexpr int H = 2 * P;
  constexpr int64_t es = col_bytes<WT>();
  const int64_t K = a.cols, pb = a.panel_bytes;
  const uint8_t* w = a.w + p * pb + col_offset<WT>();
  const float* x = a.x + t0 * K;
  __m256 acc[H][T];
#pragma GCC unroll 8
  for (int h = 0; h < H; ++h)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[h][t] = _mm256_setzero_ps();
  for (int64_t c = 0; c < K; ++c) {
    __m256 wv[H];
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h) wv[h] = load_w<WT>(w + (h / 2) * pb + c * es + (h % 2) * (es / 2));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256 xb = _mm256_broadcast_ss(x + t * K + c);
#pragma GCC unroll 8
      for (int h = 0; h < H; ++h) acc[h][t] = _mm256_fmadd_ps(wv[h], xb, acc[h][t]);
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < H; ++h) {
    if constexpr (WT == kFP8) {
      const __m256 sc =
          _mm256_mul_ps(half_scales(a.w + (p + h / 2) * pb, h % 2), _mm256_set1_ps(256.0f));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[h][t] = _mm256_mul_ps(acc[h][t], sc);
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) store_half(a, p + h / 2, h % 2, t0 + t, acc[h][t]);
  }
}

// Block-quantised families sharing one kernel: per block of 32 columns, an int8 dot product.
constexpr int kQ8_0 = 0, kQ4_0 = 1, kQ8C = 2;

// Bytes of one (panel, block of 32 columns); where the first block starts in the panel; bytes
// before a block's quants (its 16 f16 scales; Q8_C has none).
template <int QT>
constexpr int64_t block_bytes() {
  return QT == kQ4_0 ? kPanel * 18 : QT == kQ8_0 ? kPanel * 34 : kPanel * 32;
}
template <int QT>
constexpr int64_t block_offset() {
  return QT == kQ8C ? kScaleBytes : 0;
}
template <int QT>
constexpr int64_t quant_offset() {
  return QT == kQ8C ? 0 : 32;
}

template <int QT, int P, int T>
void qkernel(const GemmArgs& a, int64_t p, int64_t t0) {
  constexpr bool Q4 = QT == kQ4_0;
  constexpr int H = 2 * P;
  constexpr int64_t bb = block_bytes<QT>();
  constexpr int64_t qo = quant_offset<QT>();
  const int64_t K = a.kq, nb = K / 32, pb = a.panel_bytes;
  const uint8_t* w = a.w + p * pb + block_offset<QT>();
  const int8_t* xq = a.xq + t0 * K;
  const float* xd = a.xd + t0 * nb;
  const int32_t* xs = a.xs + t0 * nb;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[H][T];
#pragma GCC unroll 8
  for (int h = 0; h < H; ++h)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[h][t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* xb = xq + b * 32;
    __m256i s[H][T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256i init = _mm256_set1_epi32(xs[t * nb + b]);
#pragma GCC unroll 8
      for (int h = 0; h < H; ++h) s[h][t] = init;
    }
    if constexpr (Q4) {
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        __m256i lo[H], hi[H];
#pragma GCC unroll 8
        for (int h = 0; h < H; ++h) {
          const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
              w + (h / 2) * pb + b * bb + qo + g * 64 + (h % 2) * 32));
          lo[h] = _mm256_and_si256(raw, m4);
          hi[h] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        }
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const __m256i al = _mm256_set1_epi32(load_i32(xb + t * K + 4 * g));
          const __m256i ah = _mm256_set1_epi32(load_i32(xb + t * K + 16 + 4 * g));
#pragma GCC unroll 8
          for (int h = 0; h < H; ++h) {
            // Nibble products are small: two vpmaddubsw results add in 16 bits without overflow.
            const __m256i p16 =
                _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], al), _mm256_maddubs_epi16(hi[h], ah));
            s[h][t] = _mm256_add_epi32(s[h][t], _mm256_madd_epi16(p16, ones));
          }
        }
      }
    } else {
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        __m256i wa[H], ws[H];
#pragma GCC unroll 8
        for (int h = 0; h < H; ++h) {
          ws[h] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                       w + (h / 2) * pb + b * bb + qo + g * 64 + (h % 2) * 32)),
                                   _mm256_set1_epi8(char(0x80)));
          wa[h] = _mm256_abs_epi8(ws[h]);
        }
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const __m256i av = _mm256_set1_epi32(load_i32(xb + t * K + 4 * g));
#pragma GCC unroll 8
          for (int h = 0; h < H; ++h)
            s[h][t] = _mm256_add_epi32(
                s[h][t],
                _mm256_madd_epi16(_mm256_maddubs_epi16(wa[h], _mm256_sign_epi8(av, ws[h])), ones));
        }
      }
    }
    if constexpr (QT == kQ8C) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256 dx = _mm256_broadcast_ss(xd + t * nb + b);
#pragma GCC unroll 8
        for (int h = 0; h < H; ++h)
          acc[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[h][t]), dx, acc[h][t]);
      }
    } else {
      __m256 dw[H];
#pragma GCC unroll 8
      for (int h = 0; h < H; ++h)
        dw[h] = _mm256_cvtph_ps(_mm_loadu_si128(
            reinterpret_cast<const __m128i*>(w + (h / 2) * pb + b * bb + (h % 2) * 16)));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256 dx = _mm256_broadcast_ss(xd + t * nb + b);
#pragma GCC unroll 8
        for (int h = 0; h < H; ++h)
          acc[h][t] =
              _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[h][t]), _mm256_mul_ps(dw[h], dx), acc[h][t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < H; ++h) {
    if constexpr (QT == kQ8C) {
      const __m256 sc = half_scales(a.w + (p + h / 2) * pb, h % 2);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[h][t] = _mm256_mul_ps(acc[h][t], sc);
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) store_half(a, p + h / 2, h % 2, t0 + t, acc[h][t]);
  }
}

// Q4_G128: the same steps as matmul_avx512.cc's q4g_kernel (per group: f = sum over the 4 blocks
// in order of float(s_b) * xd_b; acc += d * f; acc += m * xm), on half panels.
constexpr int64_t kQ4GGroupBytes = kPanel * 68;

template <int P, int T>
void q4g_kernel(const GemmArgs& a, int64_t p, int64_t t0) {
  constexpr int H = 2 * P;
  const int64_t K = a.kq, nb = K / 32, ng = K / 128, pb = a.panel_bytes;
  const uint8_t* w = a.w + p * pb;
  const int8_t* xq = a.xq + t0 * K;
  const float* xd = a.xd + t0 * nb;
  const float* xm = a.xm + t0 * ng;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[H][T];
#pragma GCC unroll 8
  for (int h = 0; h < H; ++h)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[h][t] = _mm256_setzero_ps();
  for (int64_t g = 0; g < ng; ++g) {
    const uint8_t* wg = w + g * kQ4GGroupBytes;
    __m256 f[H][T];
#pragma GCC unroll 4
    for (int b = 0; b < 4; ++b) {
      const uint8_t* wq = wg + 64 + (b % 2) * 8 * 64;
      const int8_t* xb = xq + g * 128 + b * 32;
      __m256i s[H][T];
#pragma GCC unroll 8
      for (int h = 0; h < H; ++h)
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) s[h][t] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int j = 0; j < 8; j += 2) {
#pragma GCC unroll 8
        for (int h = 0; h < H; ++h) {
          const uint8_t* q = wq + (h / 2) * pb + j * 64 + (h % 2) * 32;
          __m256i r0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
          __m256i r1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64));
          if (b >= 2) {
            r0 = _mm256_srli_epi16(r0, 4);
            r1 = _mm256_srli_epi16(r1, 4);
          }
          const __m256i n0 = _mm256_and_si256(r0, m4), n1 = _mm256_and_si256(r1, m4);
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            const __m256i p16 = _mm256_add_epi16(
                _mm256_maddubs_epi16(n0, _mm256_set1_epi32(load_i32(xb + t * K + 4 * j))),
                _mm256_maddubs_epi16(n1, _mm256_set1_epi32(load_i32(xb + t * K + 4 * j + 4))));
            s[h][t] = _mm256_add_epi32(s[h][t], _mm256_madd_epi16(p16, ones));
          }
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256 dx = _mm256_broadcast_ss(xd + t * nb + g * 4 + b);
#pragma GCC unroll 8
        for (int h = 0; h < H; ++h)
          f[h][t] = b == 0 ? _mm256_mul_ps(_mm256_cvtepi32_ps(s[h][t]), dx)
                           : _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[h][t]), dx, f[h][t]);
      }
    }
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h) {
      const uint8_t* o = wg + (h / 2) * pb + (h % 2) * 16;
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(o)));
      const __m256 m = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(o + 32)));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        acc[h][t] = _mm256_fmadd_ps(d, f[h][t], acc[h][t]);
        acc[h][t] = _mm256_fmadd_ps(m, _mm256_broadcast_ss(xm + t * ng + g), acc[h][t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < H; ++h)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) store_half(a, p + h / 2, h % 2, t0 + t, acc[h][t]);
}

// Decode: one panel at a time (one sequential weight stream), two column-interleaved
// accumulators per half panel for four independent FMA chains.
template <int WT>
void fdecode(const GemmArgs& a, int64_t p) {
  constexpr int64_t es = col_bytes<WT>();
  const int64_t K = a.cols;
  const uint8_t* w = a.w + p * a.panel_bytes + col_offset<WT>();
  const float* x = a.x;
  __m256 l0 = _mm256_setzero_ps(), h0 = l0, l1 = l0, h1 = l0;
  int64_t c = 0;
  for (; c + 2 <= K; c += 2) {
    const __m256 x0 = _mm256_broadcast_ss(x + c), x1 = _mm256_broadcast_ss(x + c + 1);
    l0 = _mm256_fmadd_ps(load_w<WT>(w + c * es), x0, l0);
    h0 = _mm256_fmadd_ps(load_w<WT>(w + c * es + es / 2), x0, h0);
    l1 = _mm256_fmadd_ps(load_w<WT>(w + (c + 1) * es), x1, l1);
    h1 = _mm256_fmadd_ps(load_w<WT>(w + (c + 1) * es + es / 2), x1, h1);
  }
  if (c < K) {
    const __m256 x0 = _mm256_broadcast_ss(x + c);
    l0 = _mm256_fmadd_ps(load_w<WT>(w + c * es), x0, l0);
    h0 = _mm256_fmadd_ps(load_w<WT>(w + c * es + es / 2), x0, h0);
  }
  __m256 lo = _mm256_add_ps(l0, l1), hi = _mm256_add_ps(h0, h1);
  if constexpr (WT == kFP8) {
    const uint8_t* panel = a.w + p * a.panel_bytes;
    lo = _mm256_mul_ps(lo, _mm256_mul_ps(half_scales(panel, 0), _mm256_set1_ps(256.0f)));
    hi = _mm256_mul_ps(hi, _mm256_mul_ps(half_scales(panel, 1), _mm256_set1_ps(256.0f)));
  }
  store_half(a, p, 0, 0, lo);
  store_half(a, p, 1, 0, hi);
}

// FP8 decode reading e4m3 bytes as f32 bit patterns (value x 2^-120) with x scaled by 2^k: see
// matmul_avx512.cc's fp8_decode_direct.
inline __m256 load_fp8_as_f32(const uint8_t* p) {
  const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(
      _mm256_and_si256(_mm256_slli_epi32(v, 20), _mm256_set1_epi32(int(0x87F00000u))));
}

void fp8_decode_direct(const GemmArgs& a, int64_t p) {
  const int64_t K = a.cols;
  const uint8_t* panel = a.w + p * a.panel_bytes;
  const uint8_t* w = panel + kScaleBytes;
  const float* x = a.x8;
  __m256 l0 = _mm256_setzero_ps(), h0 = l0, l1 = l0, h1 = l0;
  int64_t c = 0;
  for (; c + 2 <= K; c += 2) {
    const __m256 x0 = _mm256_broadcast_ss(x + c), x1 = _mm256_broadcast_ss(x + c + 1);
    l0 = _mm256_fmadd_ps(load_fp8_as_f32(w + c * 16), x0, l0);
    h0 = _mm256_fmadd_ps(load_fp8_as_f32(w + c * 16 + 8), x0, h0);
    l1 = _mm256_fmadd_ps(load_fp8_as_f32(w + (c + 1) * 16), x1, l1);
    h1 = _mm256_fmadd_ps(load_fp8_as_f32(w + (c + 1) * 16 + 8), x1, h1);
  }
  if (c < K) {
    const __m256 x0 = _mm256_broadcast_ss(x + c);
    l0 = _mm256_fmadd_ps(load_fp8_as_f32(w + c * 16), x0, l0);
    h0 = _mm256_fmadd_ps(load_fp8_as_f32(w + c * 16 + 8), x0, h0);
  }
  const __m256 u = _mm256_set1_ps(a.x8_unscale);
  store_half(a, p, 0, 0,
             _mm256_mul_ps(_mm256_mul_ps(_mm256_add_ps(l0, l1), half_scales(panel, 0)), u));
  store_half(a, p, 1, 0,
             _mm256_mul_ps(_mm256_mul_ps(_mm256_add_ps(h0, h1), half_scales(panel, 1)), u));
}

// MXCSR.DAZ (denormals are zero) would flush the e4m3 subnormals of fp8_decode_direct.
inline bool subnormal_inputs_kept() {
  return (_mm_getcsr() & 0x40) == 0;
}

template <int WT>
struct FloatFam {
  static constexpr int kTmax = 6;  // FP8: up to kTmax tokens (more: fp8_batch)
  static constexpr bool kDecode = true;
  static void decode(const GemmArgs& a, int64_t p) {
    if constexpr (WT == kFP8) {
      if (a.x8 != nullptr) return fp8_decode_direct(a, p);
    }
    fdecode<WT>(a, p);
  }
  template <int P, int T>
  static void run(const GemmArgs& a, int64_t p, int64_t t0) {
    fkernel<WT, P, T>(a, p, t0);
  }
};
template <int QT>
struct QuantFam {
  // 16 ymm registers: int and float accumulators plus the unpacked weights of 2 x T tiles.
  static constexpr int kTmax = 2;
  static constexpr bool kDecode = false;  // integer chains are short: the 1x1 tile suffices
  static void decode(const GemmArgs&, int64_t) {}
  template <int P, int T>
  static void run(const GemmArgs& a, int64_t p, int64_t t0) {
    qkernel<QT, P, T>(a, p, t0);
  }
};
struct Q4GFam {
  static constexpr int kTmax = 2;
  static constexpr bool kDecode = false;
  static void decode(const GemmArgs&, int64_t) {}
  template <int P, int T>
  static void run(const GemmArgs& a, int64_t p, int64_t t0) {
    q4g_kernel<P, T>(a, p, t0);
  }
};

template <class Fam, int P>
void all_tokens(const GemmArgs& a, int64_t p) {
  constexpr int TM = Fam::kTmax;
  int64_t t = 0;
  for (; t + TM <= a.n; t += TM) Fam::template run<P, TM>(a, p, t);
  switch (a.n - t) {
    case 1:
      Fam::template run<P, 1>(a, p, t);
      break;
    case 2:
      if constexpr (TM > 2) Fam::template run<P, 2>(a, p, t);
      break;
    case 3:
      if constexpr (TM > 3) Fam::template run<P, 3>(a, p, t);
      break;
    case 4:
      if constexpr (TM > 4) Fam::template run<P, 4>(a, p, t);
      break;
    case 5:
      if constexpr (TM > 5) Fam::template run<P, 5>(a, p, t);
      break;
    default:
      break;
  }
}

template <class Fam>
void drive(const GemmArgs& a, int64_t p0, int64_t p1) {
  int64_t p = p0;
  if constexpr (Fam::kDecode) {
    if (a.n == 1 && !a.invariant) {
      GemmArgs d = a;
      if (!subnormal_inputs_kept()) d.x8 = nullptr;  // FP8: the f16 route
      for (; p < p1; ++p) Fam::decode(d, p);
      return;
    }
  }
  for (; p < p1; ++p) all_tokens<Fam, 1>(a, p);
}

// FP8 with several tokens: converting in registers costs as much as the FMAs here, so each chunk
// of a panel is converted to f16 once (exactly) into a stack buffer and a tile of up to 6 tokens
// runs over it for every token block. Between chunks the partial sums go through y (f32 stores
// and loads are exact), so each row still sums its columns in order, as fkernel<kFP8> does for
// a single token: batch invariance holds.
constexpr int64_t kFp8Chunk = 256;  // columns per chunk: 8 KB of f16

inline __m256 load_half(const GemmArgs& a, int64_t p, int h, int64_t t) {
  const int64_t r0 = p * kPanel + h * 8;
  const int64_t left = a.rows - r0;
  const float* y = a.y + t * a.rows + r0;
  if (left >= 8) return _mm256_loadu_ps(y);
  if (left <= 0) return _mm256_setzero_ps();
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_maskload_ps(y, _mm256_cmpgt_epi32(_mm256_set1_epi32(int(left)), idx));
}

// Tokens t0..t0+T-1 of panel p over columns [c0, c1), whose f16 images are at wh.
template <int T>
void fp8_chunk_tile(const GemmArgs& a, int64_t p, int64_t t0, const uint16_t* wh, int64_t c0,
                    int64_t c1) {
  const int64_t K = a.cols;
  const float* x = a.x + t0 * K;
  __m256 acc[2][T];
#pragma GCC unroll 8
  for (int h = 0; h < 2; ++h)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      acc[h][t] = c0 == 0 ? _mm256_setzero_ps() : load_half(a, p, h, t0 + t);
  for (int64_t c = c0; c < c1; ++c) {
    const uint16_t* col = wh + (c - c0) * kPanel;
    const __m256 w0 = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(col)));
    const __m256 w1 = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(col + 8)));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256 xb = _mm256_broadcast_ss(x + t * K + c);
      acc[0][t] = _mm256_fmadd_ps(w0, xb, acc[0][t]);
      acc[1][t] = _mm256_fmadd_ps(w1, xb, acc[1][t]);
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < 2; ++h) {
    if (c1 == K) {
      const __m256 sc =
          _mm256_mul_ps(half_scales(a.w + p * a.panel_bytes, h), _mm256_set1_ps(256.0f));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[h][t] = _mm256_mul_ps(acc[h][t], sc);
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) store_half(a, p, h, t0 + t, acc[h][t]);
  }
}

void fp8_batch(const GemmArgs& a, int64_t p0, int64_t p1) {
  alignas(32) uint16_t wh[kFp8Chunk * kPanel];
  const int64_t K = a.cols;
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* w = a.w + p * a.panel_bytes + kScaleBytes;
    for (int64_t c0 = 0; c0 < K; c0 += kFp8Chunk) {
      const int64_t c1 = c0 + kFp8Chunk < K ? c0 + kFp8Chunk : K;
      for (int64_t c = c0; c < c1; ++c) {  // e4m3 -> f16, as load_w<kFP8>
        const __m256i v =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + c * 16)));
        _mm256_store_si256(
            reinterpret_cast<__m256i*>(wh + (c - c0) * kPanel),
            _mm256_and_si256(_mm256_slli_epi16(v, 7), _mm256_set1_epi16(short(0xBF80))));
      }
      int64_t t = 0;
      for (; t + 6 <= a.n; t += 6) fp8_chunk_tile<6>(a, p, t, wh, c0, c1);
      switch (a.n - t) {
        case 1:
          fp8_chunk_tile<1>(a, p, t, wh, c0, c1);
          break;
        case 2:
          fp8_chunk_tile<2>(a, p, t, wh, c0, c1);
          break;
        case 3:
          fp8_chunk_tile<3>(a, p, t, wh, c0, c1);
          break;
        case 4:
          fp8_chunk_tile<4>(a, p, t, wh, c0, c1);
          break;
        case 5:
          fp8_chunk_tile<5>(a, p, t, wh, c0, c1);
          break;
        default:
          break;
      }
    }
  }
}

void gemm(const GemmArgs& a, int64_t p0, int64_t p1) {
  switch (a.type) {
    case DType::F32:
      drive<FloatFam<kF32>>(a, p0, p1);
      break;
    case DType::F16:
      drive<FloatFam<kF16>>(a, p0, p1);
      break;
    case DType::BF16:
      drive<FloatFam<kBF16>>(a, p0, p1);
      break;
    case DType::FP8_E4M3:
      if (a.n > FloatFam<kFP8>::kTmax) {  // else one tile converts each weight once
        fp8_batch(a, p0, p1);
      } else {
        drive<FloatFam<kFP8>>(a, p0, p1);
      }
      break;
    case DType::Q8_0:
      drive<QuantFam<kQ8_0>>(a, p0, p1);
      break;
    case DType::Q4_0:
      drive<QuantFam<kQ4_0>>(a, p0, p1);
      break;
    case DType::Q8_C:
      drive<QuantFam<kQ8C>>(a, p0, p1);
      break;
    case DType::Q4_G128:
      drive<Q4GFam>(a, p0, p1);
      break;
  }
}

inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

inline int32_t hsum8i(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

void quantize_row_x(const float* x, int64_t n, int8_t* q, float* d, int32_t* s, int32_t offset) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / 32; ++b) {
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(x + b * 32 + 8 * j);
      m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[j]));
    }
    const float amax = hmax8(m);
    const float dd = amax / 127.0f;
    const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i iv[4];
    for (int j = 0; j < 4; ++j) iv[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], vid));
    const __m256i sum =
        _mm256_add_epi32(_mm256_add_epi32(iv[0], iv[1]), _mm256_add_epi32(iv[2], iv[3]));
    // Pack 32 int32 -> 32 int8 (packs interleave 128-bit lanes; fix with a permute).
    const __m256i p01 = _mm256_packs_epi32(iv[0], iv[1]);
    const __m256i p23 = _mm256_packs_epi32(iv[2], iv[3]);
    __m256i p = _mm256_packs_epi16(p01, p23);
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * 32), p);
    d[b] = dd;
    s[b] = -offset * hsum8i(sum);
  }
}

}  // namespace

IsaMatmul isa_matmul_avx2() {
  return IsaMatmul{gemm, quantize_row_x, 0, 2, 0};
}

}  // namespace shrike::kernels::detail
