// AVX2 element-wise and attention kernels (code in ops_simd.inc).
#include <immintrin.h>

#include <cstdint>

#include "kernels/ops_internal.h"

namespace shrike::kernels::detail {
namespace {
struct V {
  using R = __m256;
  static constexpr int W = 8;
  static __m256i mask(int m) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  static R loadn(const float* p, int m) {
    return m == W ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask(m));
  }
  static R loadn_fill(const float* p, int m, float fill) {
    if (m == W) return _mm256_loadu_ps(p);
    const __m256i k = mask(m);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, k), _mm256_castsi256_ps(k));
  }
  // IEEE halves widened to f32 (F16C, part of the AVX2 flag set).
  static R loadh(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static R loadhn(const uint16_t* p, int m) {
    if (m == W) return loadh(p);
    alignas(16) uint16_t buf[W] = {};  // no 16-bit masked load before AVX-512
    for (int i = 0; i < m; ++i) buf[i] = p[i];
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(buf)));
  }
  // int8 widened to f32 (exact).
  static R loadq(const int8_t* p) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static R loadqn(const int8_t* p, int m) {
    if (m == W) return loadq(p);
    alignas(16) int8_t buf[16] = {};  // no byte-masked load before AVX-512
    for (int i = 0; i < m; ++i) buf[i] = p[i];
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(buf))));
  }
  static void storen(float* p, R v, int m) {
    if (m == W)
      _mm256_storeu_ps(p, v);
    else
      _mm256_maskstore_ps(p, mask(m), v);
  }
  static R maskz(R v, int m) { return m == W ? v : _mm256_and_ps(v, _mm256_castsi256_ps(mask(m))); }
  static R zero() { return _mm256_setzero_ps(); }
  static R set1(float f) { return _mm256_set1_ps(f); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R div(R a, R b) { return _mm256_div_ps(a, b); }
  static R min(R a, R b) { return _mm256_min_ps(a, b); }
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  static R fmadd(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R fmsub(R a, R b, R c) { return _mm256_fmsub_ps(a, b, c); }
  static R fmaddsub(R a, R b, R c) { return _mm256_fmaddsub_ps(a, b, c); }
  static R round(R a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static R pow2i(R n) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
  }
  static R dup_even(R a) { return _mm256_moveldup_ps(a); }
  static R dup_odd(R a) { return _mm256_movehdup_ps(a); }
  static R swap_pairs(R a) { return _mm256_permute_ps(a, 0xB1); }
  static float hsum(R a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
  }
  static void hsum4(R a, R b, R c, R d, float* out) {
    const R ab = _mm256_add_ps(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b));
    const R cd = _mm256_add_ps(_mm256_unpacklo_ps(c, d), _mm256_unpackhi_ps(c, d));
    const R abcd = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, 0x44), _mm256_shuffle_ps(ab, cd, 0xEE));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
  }
  static float hmax(R a) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
  }
};
}  // namespace
}  // namespace shrike::kernels::detail

#define SHRIKE_OPS_ENTRY isa_ops_avx2
#include "ops_simd.inc"
