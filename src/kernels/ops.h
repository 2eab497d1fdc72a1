// Element-wise and attention kernels of the Llama block. Shapes in comments; all f32 except the
// K/V rows attention reads, which may be f16.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/isa.h"

namespace shrike::kernels {

// out[i] = x[i] / sqrt(mean(x²) + eps) * weight[i], for one row of n.
void rmsnorm(float* out, const float* x, const float* weight, int64_t n, float eps);

// Rotary position embedding, in place on one token's heads: x is [n_heads][head_dim].
// cos_sin holds, for this position, rot_dims/2 pairs (cos θ_i, sin θ_i). The first rot_dims
// dimensions of each head rotate; the rest pass through.
//   adjacent layout (llama2.c, GGUF "normal"): pairs are (x[2i], x[2i+1]);
//   NeoX layout (Qwen2, GPT-NeoX):             pairs are (x[i], x[i + rot_dims/2]).
enum class RopeLayout { Adjacent, NeoX };
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dims, const float* cos_sin,
          RopeLayout layout);

// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + e^-g).
void silu_mul(float* out, const float* gate, const float* up, int64_t n);

// In-place softmax over n values (max-subtracted).
void softmax(float* x, int64_t n);

// A layer's K or V vectors seen through a block table: the head_dim elements of kv head j at
// position p start at blocks[p / block_size] + (p % block_size) * row_stride + j * head_stride.
// Position-major rows ([pos][kv_head][head_dim]) have row_stride = kv_dim, head_stride =
// head_dim; head-major blocks ([kv_head][pos][head_dim]), which let attention stream one head's
// positions contiguously, have row_stride = head_dim, head_stride = block_size * head_dim.
// The elements are f32 (`blocks`), or IEEE halves when `half_blocks` is set (`blocks` is then
// unused): an f16 cache halves the bytes attention streams per key, which is what bounds decode
// of many sequences at long contexts. Strides count elements, not bytes.
struct KvRows {
  const float* const* blocks = nullptr;
  int64_t block_size = 0;
  int64_t row_stride = 0;   // elements between consecutive positions within a block
  int64_t head_stride = 0;  // elements between consecutive kv heads
  const uint16_t* const* half_blocks = nullptr;  // f16 bits
  bool is_f16() const { return half_blocks != nullptr; }
  int64_t offset(int64_t p, int64_t kv_head) const {
    return (p % block_size) * row_stride + kv_head * head_stride;
  }
  const float* head(int64_t p, int64_t kv_head) const {  // f32 rows
    return blocks[p / block_size] + offset(p, kv_head);
  }
  const uint16_t* half_head(int64_t p, int64_t kv_head) const {  // f16 rows
    return half_blocks[p / block_size] + offset(p, kv_head);
  }
};

// Causal grouped-query attention for n_tokens queries at positions pos0 .. pos0+n_tokens-1, over
// keys/values at positions 0 .. pos0+n_tokens-1 (already stored).
//   q   [n_tokens][n_heads * head_dim]
//   out [n_tokens][n_heads * head_dim]
// K/V rows are [n_kv_heads * head_dim]; query head h reads kv head h / (n_heads / n_kv_heads).
// scale multiplies q·k (normally 1/sqrt(head_dim)). Work is split over heads and tokens.
// k and v must hold the same element type (f32 or f16; std::invalid_argument otherwise); f16
// elements are widened exactly, so the result is that of f32 rows holding the same values.
struct AttentionShape {
  int64_t n_tokens, pos0, n_heads, n_kv_heads, head_dim;
  float scale;
};
void attention(const AttentionShape& s, const float* q, const KvRows& k, const KvRows& v, float* out,
               ThreadPool& pool);

// Several independent attentions (one per sequence of a ragged batch) in one parallel pass, so
// that a decode step of many sequences spreads all their heads over the threads at once. A
// query's result is the same bits whichever batch it is computed in.
struct AttentionJob {
  AttentionShape shape;
  const float* q;
  KvRows k, v;
  float* out;
};
void attention_batch(const AttentionJob* jobs, int64_t n_jobs, ThreadPool& pool);

// Scalar references of the above (tests compare every dispatched version against these).
namespace reference {
void rmsnorm(float* out, const float* x, const float* weight, int64_t n, float eps);
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dims, const float* cos_sin,
          RopeLayout layout);
void silu_mul(float* out, const float* gate, const float* up, int64_t n);
void softmax(float* x, int64_t n);
void attention(const AttentionShape& s, const float* q, const KvRows& k, const KvRows& v,
               float* out);
}  // namespace reference

}  // namespace shrike::kernels
