// AVX2 (+FMA, F16C) matmul kernels: the traits of matmul_simd.inc for 8-lane vectors (a 16-row
// panel column is two ymm "parts"). Compiled with the AVX2 flags; intrinsics and internal linkage
// only (see matmul_simd.inc).
#include <immintrin.h>

#include <cstdint>

#include "kernels/matmul_simd.inc"

namespace shrike::kernels::detail {
namespace {

struct Avx2 {
  using F = __m256;
  using I = __m256i;
  static constexpr int L = 8;

  // Tuning. 16 ymm registers: small tiles, no software prefetch, no packed x.
  static constexpr int32_t kQ8Offset = 0;  // Q8 weights read signed (w + 128 ^ 0x80)
  static constexpr int64_t kPanelAlign = 2;
  static constexpr int64_t kXPackMinN = 0;
  static constexpr bool kPrefetch = false;
  static constexpr int kDecodeChains = 2;  // x 2 parts: four independent FMA chains
  static constexpr int kInvariantDecodePanels = 1;
  static constexpr int kFloatPanels = 1, kFloatTmax = 6;
  // FP8 with more than kFloatTmax tokens converts chunks of a panel to f16 once (fp8_batch).
  static constexpr bool kFp8Chunked = true;
  // Integer chains are short: the 1 x 1 tile serves decode. Int and float accumulators plus the
  // unpacked weights of 2 x T tiles fill the registers at T = 2.
  static constexpr bool kQuantDecode = false;
  static constexpr int kQuantSmallTmax = 2, kQuantPanels = 1, kQuantTmax = 2;
  static constexpr bool kQuantSmallMultiPanel = false;  // see qdrive
  // K-quants (kqdrive): one panel; 2 tokens per batch tile (Q6_K: 16 int32 accumulators).
  static constexpr int kKQuantDecodePanels = 1, kKQuantTmax = 2;

  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float f) { return _mm256_set1_ps(f); }
  static F bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F abs(F a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static float hmax(F v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
  }
  static F load_f16(const void* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(static_cast<const __m128i*>(p)));
  }
  static F load_bf16(const void* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p))), 16));
  }
  // e4m3 -> f16 exactly (value / 256): the 7 low bits move up by 7 into f16's exponent and
  // mantissa fields (subnormals included) and the sign to bit 15 (sign extension, then bit 14
  // cleared).
  static __m128i fp8_to_f16(__m128i bytes) {
    return _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(bytes), 7),
                         _mm_set1_epi16(short(0xBF80)));
  }
  static F load_fp8_f16(const void* p) {
    return _mm256_cvtph_ps(fp8_to_f16(_mm_loadl_epi64(static_cast<const __m128i*>(p))));
  }
  static void fp8_column_to_f16(const uint8_t* p, uint16_t* out) {
    const __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out),
                       _mm256_and_si256(_mm256_slli_epi16(v, 7), _mm256_set1_epi16(short(0xBF80))));
  }
  static F load_fp8_f32(const void* p) {
    const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(static_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(
        _mm256_and_si256(_mm256_slli_epi32(v, 20), _mm256_set1_epi32(int(0x87F00000u))));
  }
  static __m256i first(int64_t left) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(left)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  template <int T>
  static void store_rows(float* y, int64_t stride, int64_t left, const F* v) {
    if (left >= L) {
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) _mm256_storeu_ps(y + t * stride, v[t]);
    } else if (left > 0) {
      const __m256i m = first(left);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) _mm256_maskstore_ps(y + t * stride, m, v[t]);
    }
  }
  static F load_rows(const float* y, int64_t left) {
    if (left >= L) return _mm256_loadu_ps(y);
    if (left <= 0) return _mm256_setzero_ps();
    return _mm256_maskload_ps(y, first(left));
  }
  // MXCSR.DAZ (denormals are zero) would flush the e4m3 subnormals of fdecode<kFP8Direct>.
  static bool subnormals_kept() {
    return (_mm_getcsr() & 0x40) == 0;
  }

  static I izero() {
    return _mm256_setzero_si256();
  }
  static I iset1(int32_t v) {
    return _mm256_set1_epi32(v);
  }
  static I bcast4(const int8_t* p) {
    return _mm256_set1_epi32(load_i32(p));
  }
  static I load_q(const void* p) {
    return _mm256_loadu_si256(static_cast<const __m256i*>(p));
  }
  static I add(I a, I b) {
    return _mm256_add_epi32(a, b);
  }
  static I lo4(I raw) {
    return _mm256_and_si256(raw, _mm256_set1_epi8(0x0F));
  }
  static I ior(I a, I b) {
    return _mm256_or_si256(a, b);
  }
  static I or_lo4(I n, I b) {
    return ior(lo4(n), b);
  }
  static I or_hi4(I n, I b) {
    return ior(hi4(n), b);
  }
  static I mullo(I a, I b) {
    return _mm256_mullo_epi32(a, b);
  }
  static I load_s8i(const uint8_t* p) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  // 16-bit shifts: Mask keeps only bits that came from the same byte.
  template <int S, int Mask>
  static I shift_mask(I v) {
    if constexpr (S > 0) v = _mm256_slli_epi16(v, S);
    if constexpr (S < 0) v = _mm256_srli_epi16(v, -S);
    return _mm256_and_si256(v, _mm256_set1_epi8(char(Mask)));
  }
  static F load_u8f(const uint8_t* p) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static I hi4(I raw) {
    return _mm256_and_si256(_mm256_srli_epi16(raw, 4), _mm256_set1_epi8(0x0F));
  }
  static I dot_u8s8(I s, I w, I a) {
    return _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1)));
  }
  // Nibble products are small: the two vpmaddubsw results add in 16 bits without overflow.
  static I dot2_u4s8(I s, I n0, I a0, I n1, I a1) {
    const I p16 = _mm256_add_epi16(_mm256_maddubs_epi16(n0, a0), _mm256_maddubs_epi16(n1, a1));
    return _mm256_add_epi32(s, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
  }
  // Q8 weights as |w| and w (for its sign); vpmaddubsw cannot overflow (|w| <= 128, |a| <= 127).
  struct Q8W {
    I abs, sgn;
  };
  static Q8W q8_weights(const void* p) {
    const I ws = _mm256_xor_si256(load_q(p), _mm256_set1_epi8(char(0x80)));
    return Q8W{_mm256_abs_epi8(ws), ws};
  }
  static I q8_dot(I s, const Q8W& w, I a) {
    return _mm256_add_epi32(
        s, _mm256_madd_epi16(_mm256_maddubs_epi16(w.abs, _mm256_sign_epi8(a, w.sgn)),
                             _mm256_set1_epi16(1)));
  }
  static F cvt(I s) {
    return _mm256_cvtepi32_ps(s);
  }
  static I cvt_round(F v) {
    return _mm256_cvtps_epi32(v);
  }
  static int32_t hsum(I v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
  }
  // 32 int32 -> 32 saturated int8 (packs interleave 128-bit lanes; a permute restores the order).
  static void store_q32(int8_t* q, const I* v) {
    const I p = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                        _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
};

}  // namespace

IsaMatmul isa_matmul_avx2() {
  return simd_matmul<Avx2>();
}

}  // namespace shrike::kernels::detail
