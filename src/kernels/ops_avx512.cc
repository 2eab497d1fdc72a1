// AVX-512 element-wise and attention kernels (code in ops_simd.inc).
#include <immintrin.h>

#include <cstdint>

#include "kernels/ops_internal.h"

namespace shrike::kernels::detail {
namespace {
struct V {
  using R = __m512;
  static constexpr int W = 16;
  static __mmask16 mask(int m) { return __mmask16((1u << m) - 1); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static R loadn(const float* p, int m) { return _mm512_maskz_loadu_ps(mask(m), p); }
  static R loadn_fill(const float* p, int m, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), mask(m), p);
  }
  // IEEE halves widened to f32.
  static R loadh(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static R loadhn(const uint16_t* p, int m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask(m), p));
  }
  // int8 widened to f32 (exact).
  static R loadq(const int8_t* p) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static R loadqn(const int8_t* p, int m) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mask(m), p)));
  }
  static void storen(float* p, R v, int m) { _mm512_mask_storeu_ps(p, mask(m), v); }
  static R maskz(R v, int m) { return _mm512_maskz_mov_ps(mask(m), v); }
  static R zero() { return _mm512_setzero_ps(); }
  static R set1(float f) { return _mm512_set1_ps(f); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R div(R a, R b) { return _mm512_div_ps(a, b); }
  static R min(R a, R b) { return _mm512_min_ps(a, b); }
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
  static R fmadd(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R fmsub(R a, R b, R c) { return _mm512_fmsub_ps(a, b, c); }
  static R fmaddsub(R a, R b, R c) { return _mm512_fmaddsub_ps(a, b, c); }
  static R round(R a) {
    return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static R pow2i(R n) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
  }
  static R dup_even(R a) { return _mm512_moveldup_ps(a); }
  static R dup_odd(R a) { return _mm512_movehdup_ps(a); }
  static R swap_pairs(R a) { return _mm512_permute_ps(a, 0xB1); }
  static float hsum(R a) { return _mm512_reduce_add_ps(a); }
  static float hmax(R a) { return _mm512_reduce_max_ps(a); }
  // out[i] = sum of the i-th argument's lanes.
  static void hsum4(R a, R b, R c, R d, float* out) {
    const R ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));  // a0 b0 a1 b1
    const R cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
    const R abcd = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, 0x44), _mm512_shuffle_ps(ab, cd, 0xEE));
    const __m256 h =
        _mm256_add_ps(_mm512_castps512_ps256(abcd),
                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(abcd), 1)));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
  }
};
}  // namespace
}  // namespace shrike::kernels::detail

#define SHRIKE_OPS_ENTRY isa_ops_avx512
#include "ops_simd.inc"
