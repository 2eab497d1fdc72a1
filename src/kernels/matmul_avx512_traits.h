// The traits of matmul_simd.inc for AVX-512 F/BW/VL/DQ (one zmm per 16-row panel column), with
// VNNI's vpdpbusd for the int8 dot products when kVnni. Included only by the translation units
// built with AVX-512 flags (matmul_avx512.cc, matmul_vnni.cc): internal linkage only.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/matmul_simd.inc"

namespace shrike::kernels::detail {
namespace {

template <bool kVnni>
struct Avx512 {
  using F = __m512;
  using I = __m512i;
  static constexpr int L = 16;

  // Tuning (32 zmm registers).
  // VNNI reads Q8 weights unsigned (w + 128) and corrects by -128 * sum(xq); the others flip
  // the sign bit back.
  static constexpr int32_t kQ8Offset = kVnni ? 128 : 0;
  static constexpr int64_t kPanelAlign = 4;
  static constexpr int64_t kXPackMinN = 9;  // float prefill: 1 panel x 16 packed tokens
  static constexpr bool kPrefetch = true;
  static constexpr int kDecodeChains = 4;
  static constexpr int kInvariantDecodePanels = 8;
  static constexpr int kFloatPanels = 2, kFloatTmax = 8;
  static constexpr bool kFp8Chunked = false;
  static constexpr bool kQuantDecode = true;
  // Decode reads this many panels' weight streams at once: on the 1.1B shape (2 threads, weights
  // 4x the L3) 1 -> 8 panels took Q4_0 from 35 to 44 tokens/s and Q8_0 from 21 to 25 (about 80%
  // -> 95% of read bandwidth); 8 measured ~2% above 4 on Q8_0 and level elsewhere.
  static constexpr int kQuantDecodePanels = 8;
  // Small batches: 1 panel x up to 8 tokens; prefill: 2 panels x 4 tokens (8 int32 + 8 f32
  // accumulators).
  static constexpr int kQuantSmallTmax = 8, kQuantPanels = 2, kQuantTmax = 4;
  static constexpr bool kQuantSmallMultiPanel = true;  // see qdrive
  // K-quants (kqdrive): decode panels at once, tokens per batch tile.
  static constexpr int kKQuantDecodePanels = 1, kKQuantTmax = 4;

  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float f) { return _mm512_set1_ps(f); }
  static F bcast(const float* p) { return _mm512_set1_ps(*p); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F abs(F a) { return _mm512_andnot_ps(_mm512_set1_ps(-0.0f), a); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static float hmax(F v) { return _mm512_reduce_max_ps(v); }
  static F load_f16(const void* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
  }
  static F load_bf16(const void* p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(static_cast<const __m256i*>(p))), 16));
  }
  // e4m3 -> f16 exactly (value / 256): see Avx2::fp8_to_f16.
  static F load_fp8_f16(const void* p) {
    const __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128(static_cast<const __m128i*>(p)));
    return _mm512_cvtph_ps(
        _mm256_and_si256(_mm256_slli_epi16(v, 7), _mm256_set1_epi16(short(0xBF80))));
  }
  static F load_fp8_f32(const void* p) {
    const __m512i v = _mm512_cvtepi8_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p)));
    return _mm512_castsi512_ps(
        _mm512_and_si512(_mm512_slli_epi32(v, 20), _mm512_set1_epi32(int(0x87F00000u))));
  }
  static __mmask16 first(int64_t left) {
    return left >= 16 ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
  }
  template <int T>
  static void store_rows(float* y, int64_t stride, int64_t left, const F* v) {
    const __mmask16 m = first(left);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * stride, m, v[t]);
  }
  // MXCSR.DAZ (denormals are zero) would flush the e4m3 subnormals of fdecode<kFP8Direct>.
  static bool subnormals_kept() {
    return (_mm_getcsr() & 0x40) == 0;
  }

  static I izero() {
    return _mm512_setzero_si512();
  }
  static I iset1(int32_t v) {
    return _mm512_set1_epi32(v);
  }
  static I bcast4(const int8_t* p) {
    return _mm512_set1_epi32(load_i32(p));
  }
  static I load_q(const void* p) {
    return _mm512_loadu_si512(p);
  }
  static I add(I a, I b) {
    return _mm512_add_epi32(a, b);
  }
  static I lo4(I raw) {
    return _mm512_and_si512(raw, _mm512_set1_epi8(0x0F));
  }
  static I ior(I a, I b) {
    return _mm512_or_si512(a, b);
  }
  // lo4(n) | b and hi4(n) | b for b holding bits 4..7 only: one vpternlogd (n & 0x0F | b).
  static I or_lo4(I n, I b) {
    return _mm512_ternarylogic_epi32(n, _mm512_set1_epi8(0x0F), b, 0xEA);
  }
  static I or_hi4(I n, I b) {
    return or_lo4(_mm512_srli_epi16(n, 4), b);
  }
  static I mullo(I a, I b) {
    return _mm512_mullo_epi32(a, b);
  }
  static I load_s8i(const uint8_t* p) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // 16-bit shifts: Mask keeps only bits that came from the same byte.
  template <int S, int Mask>
  static I shift_mask(I v) {
    if constexpr (S > 0) v = _mm512_slli_epi16(v, S);
    if constexpr (S < 0) v = _mm512_srli_epi16(v, -S);
    return _mm512_and_si512(v, _mm512_set1_epi8(char(Mask)));
  }
  static F load_u8f(const uint8_t* p) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static I hi4(I raw) {
    return _mm512_and_si512(_mm512_srli_epi16(raw, 4), _mm512_set1_epi8(0x0F));
  }
  // s += u8 w . s8 a over each group of 4 bytes (one int32 lane per row).
  static I dot_u8s8(I s, I w, I a) {
    if constexpr (kVnni) {
      return _mm512_dpbusd_epi32(s, w, a);
    } else {
      return _mm512_add_epi32(s,
                              _mm512_madd_epi16(_mm512_maddubs_epi16(w, a), _mm512_set1_epi16(1)));
    }
  }
  // s += n0 . a0 + n1 . a1 for nibbles n (0..15): without VNNI the two vpmaddubsw results add in
  // 16 bits without overflow (|15 * 127 * 2| per pair each), saving one vpmaddwd + vpaddd.
  static I dot2_u4s8(I s, I n0, I a0, I n1, I a1) {
    if constexpr (kVnni) {
      return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(s, n0, a0), n1, a1);
    } else {
      const I p16 = _mm512_add_epi16(_mm512_maddubs_epi16(n0, a0), _mm512_maddubs_epi16(n1, a1));
      return _mm512_add_epi32(s, _mm512_madd_epi16(p16, _mm512_set1_epi16(1)));
    }
  }
  // Q8 weights: VNNI multiplies the stored w + 128 unsigned; without it, |w| x (a with w's sign)
  // (vpmaddubsw cannot overflow: |w| <= 128, |a| <= 127), the sign as a byte mask.
  struct Q8W {
    I w;
    __mmask64 neg;
  };
  static Q8W q8_weights(const void* p) {
    if constexpr (kVnni) {
      return Q8W{load_q(p), 0};
    } else {
      const I ws = _mm512_xor_si512(load_q(p), _mm512_set1_epi8(char(0x80)));
      return Q8W{_mm512_abs_epi8(ws), _mm512_movepi8_mask(ws)};
    }
  }
  static I q8_dot(I s, const Q8W& w, I a) {
    if constexpr (kVnni) {
      return _mm512_dpbusd_epi32(s, w.w, a);
    } else {
      const I sa = _mm512_mask_sub_epi8(a, w.neg, _mm512_setzero_si512(), a);
      return _mm512_add_epi32(
          s, _mm512_madd_epi16(_mm512_maddubs_epi16(w.w, sa), _mm512_set1_epi16(1)));
    }
  }
  static F cvt(I s) {
    return _mm512_cvtepi32_ps(s);
  }
  static I cvt_round(F v) {
    return _mm512_cvtps_epi32(v);
  }
  static int32_t hsum(I v) {
    return _mm512_reduce_add_epi32(v);
  }
  static void store_q32(int8_t* q, const I* v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(v[0]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtsepi32_epi8(v[1]));
  }
};

}  // namespace
}  // namespace shrike::kernels::detail
