// AVX2 (+FMA, F16C) matmul kernels. Same packed layout as AVX-512: a 16-row panel is read as two
// 8-row halves (one ymm each). Same ODR rules as matmul_avx512.cc: intrinsics and internal
// linkage only.
#include <immintrin.h>

#include <cstdint>

#include "kernels/matmul_internal.h"

namespace shrike::kernels::detail {
namespace {

constexpr int kF32 = 0, kF16 = 1, kBF16 = 2;

template <int WT>
inline __m256 load_w(const uint8_t* p) {
  if constexpr (WT == kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  } else if constexpr (WT == kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
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

// H = 2P half panels x T tokens.
template <int WT, int P, int T>
void fkernel(const GemmArgs& a, int64_t p, int64_t t0) {
  constexpr int H = 2 * P;
  constexpr int64_t es = WT == kF32 ? 64 : 32;
  const int64_t K = a.cols, pb = a.panel_bytes;
  const uint8_t* w = a.w + p * pb;
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
  for (int h = 0; h < H; ++h)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) store_half(a, p + h / 2, h % 2, t0 + t, acc[h][t]);
}

template <bool Q4, int P, int T>
void qkernel(const GemmArgs& a, int64_t p, int64_t t0) {
  constexpr int H = 2 * P;
  constexpr int64_t bb = Q4 ? kPanel * 18 : kPanel * 34;
  const int64_t K = a.cols, nb = K / 32, pb = a.panel_bytes;
  const uint8_t* w = a.w + p * pb;
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
              w + (h / 2) * pb + b * bb + 32 + g * 64 + (h % 2) * 32));
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
            const __m256i p16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], al),
                                                 _mm256_maddubs_epi16(hi[h], ah));
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
                                       w + (h / 2) * pb + b * bb + 32 + g * 64 + (h % 2) * 32)),
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
        acc[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[h][t]), _mm256_mul_ps(dw[h], dx), acc[h][t]);
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
  constexpr int64_t es = WT == kF32 ? 64 : 32;
  const int64_t K = a.cols;
  const uint8_t* w = a.w + p * a.panel_bytes;
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
  store_half(a, p, 0, 0, _mm256_add_ps(l0, l1));
  store_half(a, p, 1, 0, _mm256_add_ps(h0, h1));
}

template <int WT>
struct FloatFam {
  static constexpr int kTmax = 6;
  static constexpr bool kDecode = true;
  static void decode(const GemmArgs& a, int64_t p) { fdecode<WT>(a, p); }
  template <int P, int T>
  static void run(const GemmArgs& a, int64_t p, int64_t t0) { fkernel<WT, P, T>(a, p, t0); }
};
template <bool Q4>
struct QuantFam {
  // 16 ymm registers: int and float accumulators plus the unpacked weights of 2 x T tiles.
  static constexpr int kTmax = 2;
  static constexpr bool kDecode = false;  // integer chains are short: the 1x1 tile suffices
  static void decode(const GemmArgs&, int64_t) {}
  template <int P, int T>
  static void run(const GemmArgs& a, int64_t p, int64_t t0) { qkernel<Q4, P, T>(a, p, t0); }
};

template <class Fam, int P>
void all_tokens(const GemmArgs& a, int64_t p) {
  constexpr int TM = Fam::kTmax;
  int64_t t = 0;
  for (; t + TM <= a.n; t += TM) Fam::template run<P, TM>(a, p, t);
  switch (a.n - t) {
    case 1: Fam::template run<P, 1>(a, p, t); break;
    case 2: if constexpr (TM > 2) Fam::template run<P, 2>(a, p, t); break;
    case 3: if constexpr (TM > 3) Fam::template run<P, 3>(a, p, t); break;
    case 4: if constexpr (TM > 4) Fam::template run<P, 4>(a, p, t); break;
    case 5: if constexpr (TM > 5) Fam::template run<P, 5>(a, p, t); break;
    default: break;
  }
}

template <class Fam>
void drive(const GemmArgs& a, int64_t p0, int64_t p1) {
  int64_t p = p0;
  if constexpr (Fam::kDecode) {
    if (a.n == 1 && !a.invariant) {
      for (; p < p1; ++p) Fam::decode(a, p);
      return;
    }
  }
  for (; p < p1; ++p) all_tokens<Fam, 1>(a, p);
}

void gemm(const GemmArgs& a, int64_t p0, int64_t p1) {
  switch (a.type) {
    case DType::F32: drive<FloatFam<kF32>>(a, p0, p1); break;
    case DType::F16: drive<FloatFam<kF16>>(a, p0, p1); break;
    case DType::BF16: drive<FloatFam<kBF16>>(a, p0, p1); break;
    case DType::Q8_0: drive<QuantFam<false>>(a, p0, p1); break;
    case DType::Q4_0: drive<QuantFam<true>>(a, p0, p1); break;
    default: break;
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
    const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(iv[0], iv[1]), _mm256_add_epi32(iv[2], iv[3]));
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

IsaMatmul isa_matmul_avx2() { return IsaMatmul{gemm, quantize_row_x, 0, 2, 0}; }

}  // namespace shrike::kernels::detail
