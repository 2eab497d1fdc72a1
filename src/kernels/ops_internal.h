// Private interface between ops.cc (baseline ISA, dispatch and threading) and the per-ISA op
// translation units (ops_avx2.cc, ops_avx512.cc, both built from ops_simd.inc). Plain
// declarations only; see matmul_internal.h for why.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace shrike::kernels::detail {

// One head of attention for nq (1..4) consecutive query tokens; query j sees n_keys + j keys.
// q / out of query j start at q + j * q_stride / out + j * q_stride. scores has room for
// 4 * (n_keys + 3) floats. K and V are f32 (k_blocks, v_blocks) or, when f16 is set, IEEE
// halves (k_half, v_half).
struct AttnHead {
  const float* q;  // head_dim
  int64_t nq, q_stride;
  bool f16;
  const float* const* k_blocks;
  const float* const* v_blocks;
  const uint16_t* const* k_half;
  const uint16_t* const* v_half;
  int64_t k_block_size, k_row_stride, v_block_size, v_row_stride;
  int64_t k_off, v_off;  // element offsets of the kv head from its position's row start
  int64_t n_keys, head_dim;
  float scale;
  float* out;     // head_dim
  float* scores;  // scratch
  const void** rows;  // scratch: 2 * (n_keys + nq) row pointers (of the K / V element type)
};

struct IsaOps {
  void (*rmsnorm)(float* out, const float* x, const float* weight, int64_t n, float eps);
  void (*rope)(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dims, const float* cos_sin,
               RopeLayout layout);
  void (*silu_mul)(float* out, const float* gate, const float* up, int64_t n);
  void (*softmax)(float* x, int64_t n);
  void (*attention_head)(const AttnHead& a);
};

IsaOps isa_ops_avx2();
IsaOps isa_ops_avx512();

}  // namespace shrike::kernels::detail
