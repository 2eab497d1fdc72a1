// aarch64 NEON element-wise and attention kernels (code in ops_simd.inc). Advanced SIMD is part
// of armv8-a, so this unit needs no target flags; it is still reached only through isa_ops_neon().
#include <arm_neon.h>

#include <cstdint>

#include "kernels/ops_internal.h"

namespace shrike::kernels::detail {
namespace {
struct V {
  using R = float32x4_t;
  static constexpr int W = 4;
  // Lanes below m all ones, the others zero.
  static uint32x4_t mask(int m) {
    const uint32_t idx[4] = {0, 1, 2, 3};
    return vcltq_u32(vld1q_u32(idx), vdupq_n_u32(uint32_t(m)));
  }
  static R load(const float* p) { return vld1q_f32(p); }
  static void store(float* p, R v) { vst1q_f32(p, v); }
  // Partial vectors go through a small buffer: NEON has no masked loads or stores, and reading
  // past the end of a row could cross into an unmapped page.
  static R loadn(const float* p, int m) { return loadn_fill(p, m, 0.0f); }
  static R loadn_fill(const float* p, int m, float fill) {
    if (m == W) return vld1q_f32(p);
    float buf[W] = {fill, fill, fill, fill};
    for (int i = 0; i < m; ++i) buf[i] = p[i];
    return vld1q_f32(buf);
  }
  // IEEE halves widened to f32 (FCVTL, exact).
  static R loadh(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
  static R loadhn(const uint16_t* p, int m) {
    if (m == W) return loadh(p);
    uint16_t buf[W] = {};
    for (int i = 0; i < m; ++i) buf[i] = p[i];
    return loadh(buf);
  }
  // int8 widened to f32 (exact).
  static R loadq(const int8_t* p) {
    int32_t v;
    __builtin_memcpy(&v, p, 4);
    const int16x8_t h = vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(v)));
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(h)));
  }
  static R loadqn(const int8_t* p, int m) {
    if (m == W) return loadq(p);
    int8_t buf[W] = {};
    for (int i = 0; i < m; ++i) buf[i] = p[i];
    return loadq(buf);
  }
  static void storen(float* p, R v, int m) {
    if (m == W) {
      vst1q_f32(p, v);
      return;
    }
    float buf[W];
    vst1q_f32(buf, v);
    for (int i = 0; i < m; ++i) p[i] = buf[i];
  }
  static R maskz(R v, int m) {
    return m == W ? v : vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(v), mask(m)));
  }
  static R zero() { return vdupq_n_f32(0.0f); }
  static R set1(float f) { return vdupq_n_f32(f); }
  static R add(R a, R b) { return vaddq_f32(a, b); }
  static R sub(R a, R b) { return vsubq_f32(a, b); }
  static R mul(R a, R b) { return vmulq_f32(a, b); }
  static R div(R a, R b) { return vdivq_f32(a, b); }
  static R min(R a, R b) { return vminq_f32(a, b); }
  static R max(R a, R b) { return vmaxq_f32(a, b); }
  static R fmadd(R a, R b, R c) { return vfmaq_f32(c, a, b); }
  // a * b - c with one rounding, as x86's vfmsub.
  static R fmsub(R a, R b, R c) { return vfmaq_f32(vnegq_f32(c), a, b); }
  // Even lanes a * b - c, odd lanes a * b + c (x86's vfmaddsub): c's sign flipped in even lanes.
  static R fmaddsub(R a, R b, R c) {
    const uint32_t s[4] = {0x80000000u, 0, 0x80000000u, 0};
    const R cs = vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(c), vld1q_u32(s)));
    return vfmaq_f32(cs, a, b);
  }
  static R round(R a) { return vrndnq_f32(a); }  // to nearest, ties to even
  static R pow2i(R n) {
    return vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23));
  }
  static R dup_even(R a) { return vtrn1q_f32(a, a); }
  static R dup_odd(R a) { return vtrn2q_f32(a, a); }
  static R swap_pairs(R a) { return vrev64q_f32(a); }
  static float hsum(R a) { return vaddvq_f32(a); }
  static float hmax(R a) { return vmaxvq_f32(a); }
  // out[i] = sum of the i-th argument's lanes ((l0 + l1) + (l2 + l3) for each).
  static void hsum4(R a, R b, R c, R d, float* out) {
    vst1q_f32(out, vpaddq_f32(vpaddq_f32(a, b), vpaddq_f32(c, d)));
  }
};
}  // namespace
}  // namespace shrike::kernels::detail

#define SHRIKE_OPS_ENTRY isa_ops_neon
#include "ops_simd.inc"
