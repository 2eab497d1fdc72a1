// The traits of matmul_simd.inc for aarch64 Advanced SIMD (NEON): 4-lane vectors, so a 16-row
// panel column is four "parts". With kDot the int8 dot products are SDOT (Armv8.2 DotProd);
// without it, widening multiplies (SMULL / SMLAL) and pairwise adds (ADDP, SADALP) give the same
// int32 sums. Included only by matmul_neon.cc and matmul_neon_dot.cc: internal linkage only.
//
// Both read every quantised weight as signed bytes: nibbles (0..15) are valid signed bytes, and
// the Q8 weights stored as w + 128 get their sign bit flipped back (kQ8Offset = 0, as on AVX2).
#pragma once

#include <arm_neon.h>

#include <cstdint>

#include "kernels/matmul_simd.inc"

namespace shrike::kernels::detail {
namespace {

template <bool kDot>
struct Neon {
  using F = float32x4_t;
  using I = int32x4_t;
  static constexpr int L = 4;

  // Tuning (32 q registers). A tile of P panels x T tokens holds 4P x T accumulators.
  static constexpr int32_t kQ8Offset = 0;
  static constexpr int64_t kPanelAlign = 1;
  static constexpr int64_t kXPackMinN = 0;  // x rows read directly (no packed copy)
  static constexpr bool kPrefetch = false;
  static constexpr int kDecodeChains = 2;  // x 4 parts: eight independent FMA chains
  static constexpr int kInvariantDecodePanels = 2;
  // 1 panel x 6 tokens: 24 accumulators + 4 weight vectors + 1 broadcast.
  static constexpr int kFloatPanels = 1, kFloatTmax = 6;
  static constexpr bool kFp8Chunked = false;
  static constexpr bool kQuantDecode = true;
  static constexpr int kQuantDecodePanels = 1;  // not measured on this target
  // 1 panel x 2 tokens: 8 int32 + 8 f32 accumulators + 4 weight vectors.
  static constexpr int kQuantSmallTmax = 2, kQuantPanels = 1, kQuantTmax = 2;
  static constexpr bool kQuantSmallMultiPanel = false;  // see qdrive
  // K-quants (kqdrive): one panel, one token per tile (Q6_K: 16 int32 accumulators per token).
  static constexpr int kKQuantDecodePanels = 1, kKQuantTmax = 1;

  static F zero() { return vdupq_n_f32(0.0f); }
  static F set1(float f) { return vdupq_n_f32(f); }
  static F bcast(const float* p) { return vld1q_dup_f32(p); }
  static F load(const float* p) { return vld1q_f32(p); }
  static F add(F a, F b) { return vaddq_f32(a, b); }
  static F mul(F a, F b) { return vmulq_f32(a, b); }
  static F max(F a, F b) { return vmaxq_f32(a, b); }
  static F abs(F a) { return vabsq_f32(a); }
  static F fmadd(F a, F b, F c) { return vfmaq_f32(c, a, b); }
  static float hmax(F v) { return vmaxvq_f32(v); }
  // f16 -> f32 widening (FCVTL) is part of armv8-a's Advanced SIMD.
  static F load_f16(const void* p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(static_cast<const uint16_t*>(p))));
  }
  static F load_bf16(const void* p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(static_cast<const uint16_t*>(p)), 16));
  }
  // 4 e4m3 bytes, sign-extended to 16 or 32 bits.
  static int16x4_t fp8_s16(const void* p) {
    const int8x8_t b = vreinterpret_s8_s32(vdup_n_s32(load_i32(static_cast<const int8_t*>(p))));
    return vget_low_s16(vmovl_s8(b));
  }
  // e4m3 -> f16 exactly (value / 256): see Avx2::fp8_to_f16.
  static F load_fp8_f16(const void* p) {
    const int16x4_t h = vand_s16(vshl_n_s16(fp8_s16(p), 7), vdup_n_s16(int16_t(0xBF80)));
    return vcvt_f32_f16(vreinterpret_f16_s16(h));
  }
  static F load_fp8_f32(const void* p) {
    const int32x4_t v = vshlq_n_s32(vmovl_s16(fp8_s16(p)), 20);
    return vreinterpretq_f32_s32(vandq_s32(v, vdupq_n_s32(int32_t(0x87F00000u))));
  }
  template <int T>
  static void store_rows(float* y, int64_t stride, int64_t left, const F* v) {
    if (left >= L) {
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) vst1q_f32(y + t * stride, v[t]);
    } else if (left > 0) {
      for (int t = 0; t < T; ++t) {
        float lanes[L];
        vst1q_f32(lanes, v[t]);
        for (int64_t i = 0; i < left; ++i) y[t * stride + i] = lanes[i];
      }
    }
  }
  // FPCR.FZ (flush-to-zero, bit 24) would flush the e4m3 subnormals of fdecode<kFP8Direct>.
  static bool subnormals_kept() {
    uint64_t fpcr;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(fpcr));
    return (fpcr & (uint64_t(1) << 24)) == 0;
  }

  static I izero() {
    return vdupq_n_s32(0);
  }
  static I iset1(int32_t v) {
    return vdupq_n_s32(v);
  }
  static I bcast4(const int8_t* p) {
    return vdupq_n_s32(load_i32(p));
  }
  static I load_q(const void* p) {
    return vreinterpretq_s32_u8(vld1q_u8(static_cast<const uint8_t*>(p)));
  }
  static I add(I a, I b) {
    return vaddq_s32(a, b);
  }
  static I lo4(I raw) {
    return vreinterpretq_s32_u8(vandq_u8(vreinterpretq_u8_s32(raw), vdupq_n_u8(0x0F)));
  }
  static I hi4(I raw) {
    return vreinterpretq_s32_u8(vshrq_n_u8(vreinterpretq_u8_s32(raw), 4));
  }
  static I ior(I a, I b) {
    return vorrq_s32(a, b);
  }
  static I or_lo4(I n, I b) {
    return ior(lo4(n), b);
  }
  static I or_hi4(I n, I b) {
    return ior(hi4(n), b);
  }
  static I mullo(I a, I b) {
    return vmulq_s32(a, b);
  }
  static I load_s8i(const uint8_t* p) {
    uint32_t w;
    __builtin_memcpy(&w, p, 4);
    return vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u32(vdup_n_u32(w)))));
  }
  template <int S, int Mask>
  static I shift_mask(I v) {
    uint8x16_t b = vreinterpretq_u8_s32(v);
    if constexpr (S > 0) b = vshlq_n_u8(b, S);
    if constexpr (S < 0) b = vshrq_n_u8(b, -S);
    return vreinterpretq_s32_u8(vandq_u8(b, vdupq_n_u8(uint8_t(Mask))));
  }
  static F load_u8f(const uint8_t* p) {
    uint32_t w;
    __builtin_memcpy(&w, p, 4);
    const uint8x8_t b = vreinterpret_u8_u32(vdup_n_u32(w));
    return vcvtq_f32_u32(vmovl_u16(vget_low_u16(vmovl_u8(b))));
  }
  // s += w . a over each group of 4 signed bytes (one int32 lane per row). Without SDOT: 16-bit
  // products (|w a| <= 128 x 127), pairs added in 16 bits (<= 32512, no overflow), then pairs of
  // those into the int32 lanes.
  static I dot_s8(I s, int8x16_t w, int8x16_t a) {
    if constexpr (kDot) {
      return vdotq_s32(s, w, a);
    } else {
      const int16x8_t lo = vmull_s8(vget_low_s8(w), vget_low_s8(a));
      const int16x8_t hi = vmull_high_s8(w, a);
      return vpadalq_s16(s, vpaddq_s16(lo, hi));
    }
  }
  static I dot_u8s8(I s, I w, I a) {  // w: nibbles only (see the file comment)
    return dot_s8(s, vreinterpretq_s8_s32(w), vreinterpretq_s8_s32(a));
  }
  // s += n0 . a0 + n1 . a1 for nibbles n (0..15): without SDOT the four 16-bit products per lane
  // pair stay below 4 x 15 x 127 and accumulate in 16 bits (SMLAL) before one widening add.
  static I dot2_u4s8(I s, I n0, I a0, I n1, I a1) {
    const int8x16_t w0 = vreinterpretq_s8_s32(n0), w1 = vreinterpretq_s8_s32(n1);
    const int8x16_t x0 = vreinterpretq_s8_s32(a0), x1 = vreinterpretq_s8_s32(a1);
    if constexpr (kDot) {
      return vdotq_s32(vdotq_s32(s, w0, x0), w1, x1);
    } else {
      const int16x8_t lo =
          vmlal_s8(vmull_s8(vget_low_s8(w0), vget_low_s8(x0)), vget_low_s8(w1), vget_low_s8(x1));
      const int16x8_t hi = vmlal_high_s8(vmull_high_s8(w0, x0), w1, x1);
      return vpadalq_s16(s, vpaddq_s16(lo, hi));
    }
  }
  // Q8 weights: the stored w + 128 with the sign bit flipped back is w.
  struct Q8W {
    int8x16_t w;
  };
  static Q8W q8_weights(const void* p) {
    return Q8W{
        vreinterpretq_s8_u8(veorq_u8(vld1q_u8(static_cast<const uint8_t*>(p)), vdupq_n_u8(0x80)))};
  }
  static I q8_dot(I s, const Q8W& w, I a) {
    return dot_s8(s, w.w, vreinterpretq_s8_s32(a));
  }
  static F cvt(I s) {
    return vcvtq_f32_s32(s);
  }
  // Round to nearest, ties to even (as cvtps2dq under the default MXCSR).
  static I cvt_round(F v) {
    return vcvtnq_s32_f32(v);
  }
  static int32_t hsum(I v) {
    return vaddvq_s32(v);
  }
  // 32 int32 -> 32 saturated int8.
  static void store_q32(int8_t* q, const I* v) {
    for (int h = 0; h < 2; ++h) {
      const int16x8_t a = vcombine_s16(vqmovn_s32(v[4 * h]), vqmovn_s32(v[4 * h + 1]));
      const int16x8_t b = vcombine_s16(vqmovn_s32(v[4 * h + 2]), vqmovn_s32(v[4 * h + 3]));
      vst1q_s8(q + 16 * h, vcombine_s8(vqmovn_s16(a), vqmovn_s16(b)));
    }
  }
};

}  // namespace
}  // namespace shrike::kernels::detail
