// Private interface between ops.cc (baseline ISA, dispatch and threading) and the per-ISA op
// translation units (ops_avx2.cc, ops_avx512.cc, ops_neon.cc, all built from ops_simd.inc). Plain
// declarations only; see matmul_internal.h for why.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/ops.h"

namespace shrike::kernels::detail {

// One head of attention for nq (1..4) consecutive query tokens; query j sees n_keys + j keys.
// q / out of query j start at q + j * q_stride / out + j * q_stride. scores has room for
// 4 * (n_keys + 3) floats; on return, query j's softmax weights (n_keys + j of them) are at
// scores + j * (n_keys + nq + 2) (the caller adds them to the attention weight sums).
// K and V are f32 (blocks), IEEE halves (half) or int8 rows with their scales and optional f16
// copies (int8 ...; see kernels::KvRows).
// The K or V rows of one kv head.
struct AttnRows {
  const float* const* blocks;   // f32
  const uint16_t* const* half;  // IEEE halves
  int64_t block_size, row_stride;
  int64_t off;  // element offset of the kv head from its position's row start
  // Int8 rows: the scale of position p is at scales[p / block_size] + (p % block_size) *
  // scale_row_stride + scale_off; a position with slot[p] >= 0 (when slot is set) is read from
  // the halves at copies + slot * copy_stride + copy_off instead.
  const int8_t* const* int8;
  const float* const* scales;
  int64_t scale_row_stride, scale_off;
  const int32_t* slot;
  const uint16_t* copies;
  int64_t copy_stride, copy_off;
};

struct AttnHead {
  const float* q;  // head_dim
  int64_t nq, q_stride;
  KvFormat format;
  AttnRows k, v;
  int64_t n_keys, head_dim;
  float scale;
  float* out;         // head_dim
  float* scores;      // scratch
  const void** rows;  // scratch: 2 * (n_keys + nq) row pointers (of the K / V element type)
  // Scratch for int8 rows, 2 * (n_keys + nq) each: per row its scale (1 for an f16 copy) and
  // whether it is an f16 copy.
  float* row_scales;
  uint8_t* row_is_half;
  float softcap;   // AttentionShape::softcap
  int64_t window;  // AttentionShape::window
};

// Turns one query's scaled scores sc[0..n) over the keys it may see causally into attention
// weights: soft-capping, then softmax over the keys inside the sliding window (the last `window`
// of the n; all without a window) and weight 0 for the keys before it.
template <class Softmax>
inline void scores_to_weights(float* sc, int64_t n, float softcap, int64_t window,
                              Softmax&& softmax) {
  if (softcap > 0)
    for (int64_t i = 0; i < n; ++i) sc[i] = softcap * std::tanh(sc[i] / softcap);
  const int64_t lo = window > 0 && n > window ? n - window : 0;
  for (int64_t i = 0; i < lo; ++i) sc[i] = 0.0f;
  softmax(sc + lo, n - lo);
}

struct IsaOps {
  void (*rmsnorm)(float* out, const float* x, const float* weight, int64_t n, float eps);
  float (*rms_inverse)(const float* x, int64_t n, float eps);
  void (*rope)(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dims, const float* cos_sin,
               RopeLayout layout);
  void (*silu_mul)(float* out, const float* gate, const float* up, int64_t n);
  void (*softmax)(float* x, int64_t n);
  void (*attention_head)(const AttnHead& a);
};

IsaOps isa_ops_avx2();
IsaOps isa_ops_avx512();
IsaOps isa_ops_neon();

}  // namespace shrike::kernels::detail
