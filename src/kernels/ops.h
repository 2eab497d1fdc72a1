// Element-wise and attention kernels of the Llama block. Shapes in comments; all f32 except the
// K/V rows attention reads, which may be f16 or int8.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/isa.h"

namespace shrike::kernels {

// out[i] = x[i] / sqrt(mean(x²) + eps) * weight[i], for one row of n.
void rmsnorm(float* out, const float* x, const float* weight, int64_t n, float eps);
// The scale rmsnorm multiplies by, 1 / sqrt(mean(x²) + eps), with the same bits: rmsnorm(out, ...)
// equals out[i] = (x[i] * rms_inverse(x, n, eps)) * weight[i] exactly.
float rms_inverse(const float* x, int64_t n, float eps);

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

// out[i] = gelu(gate[i]) * up[i] with GELU's tanh approximation (Gemma's gelu_pytorch_tanh).
void gelu_mul(float* out, const float* gate, const float* up, int64_t n);
// In-place softmax over n values (max-subtracted).
void softmax(float* x, int64_t n);

// How K/V elements are stored: f32, IEEE half, or int8 with one f32 scale per (position, kv
// head).
enum class KvFormat { F32, F16, Int8 };

// Quantises one row of n values to int8: scale = max|x| / 127 (f32), q[i] = x[i] / scale rounded
// to nearest (ties to even), so |q| <= 127 and x[i] ~ q[i] * scale within scale / 2. Returns the
// scale. A zero row has scale 0 (all q = 0); a row holding inf or NaN gets scale NaN (all q = 0),
// so that the damage shows in attention, as it would in an f16 cache, instead of being clamped
// away. Scalar code compiled for the baseline ISA: every caller (paged or contiguous cache, any
// ISA) gets the same bits.
float quantize_int8_row(const float* x, int64_t n, int8_t* q);

// A layer's K or V vectors seen through a block table: the head_dim elements of kv head j at
// position p start at blocks[p / block_size] + (p % block_size) * row_stride + j * head_stride.
// Position-major rows ([pos][kv_head][head_dim]) have row_stride = kv_dim, head_stride =
// head_dim; head-major blocks ([kv_head][pos][head_dim]), which let attention stream one head's
// positions contiguously, have row_stride = head_dim, head_stride = block_size * head_dim.
// The elements are f32 (`blocks`), or IEEE halves when `half_blocks` is set (`blocks` is then
// unused): an f16 cache halves the bytes attention streams per key, which is what bounds decode
// of many sequences at long contexts. Strides count elements, not bytes.
//
// Int8 rows (`int8_blocks` set; `blocks` and `half_blocks` unused) hold q[i] and one f32 scale per
// (position, kv head), read from scale_blocks[p / block_size] + (p % block_size) *
// scale_row_stride + j * scale_head_stride: element i is float(q[i]) * scale. They may carry f16
// copies of some positions (the int8-mixed policy): when f16_slot is set and f16_slot[p] >= 0,
// position p is read from the halves at f16_rows + f16_slot[p] * f16_slot_stride + j *
// f16_head_stride instead of its int8 row.
struct KvRows {
  const float* const* blocks = nullptr;
  int64_t block_size = 0;
  int64_t row_stride = 0;   // elements between consecutive positions within a block
  int64_t head_stride = 0;  // elements between consecutive kv heads
  const uint16_t* const* half_blocks = nullptr;  // f16 bits
  const int8_t* const* int8_blocks = nullptr;
  const float* const* scale_blocks = nullptr;
  int64_t scale_row_stride = 0, scale_head_stride = 0;
  const int32_t* f16_slot = nullptr;  // per position: slot of its f16 copy, or -1
  const uint16_t* f16_rows = nullptr;
  int64_t f16_slot_stride = 0, f16_head_stride = 0;

  KvFormat format() const {
    return int8_blocks ? KvFormat::Int8 : half_blocks ? KvFormat::F16 : KvFormat::F32;
  }
  bool is_f16() const { return format() == KvFormat::F16; }
  bool is_int8() const { return format() == KvFormat::Int8; }
  int64_t offset(int64_t p, int64_t kv_head) const {
    return (p % block_size) * row_stride + kv_head * head_stride;
  }
  const float* head(int64_t p, int64_t kv_head) const {  // f32 rows
    return blocks[p / block_size] + offset(p, kv_head);
  }
  const uint16_t* half_head(int64_t p, int64_t kv_head) const {  // f16 rows
    return half_blocks[p / block_size] + offset(p, kv_head);
  }
  const int8_t* int8_head(int64_t p, int64_t kv_head) const {  // int8 rows
    return int8_blocks[p / block_size] + offset(p, kv_head);
  }
  float scale(int64_t p, int64_t kv_head) const {  // int8 rows
    return scale_blocks[p / block_size]
                       [(p % block_size) * scale_row_stride + kv_head * scale_head_stride];
  }
  // The f16 copy of an int8 row, or null when the position is read as int8.
  const uint16_t* f16_copy(int64_t p, int64_t kv_head) const {
    if (f16_slot == nullptr || f16_slot[p] < 0) return nullptr;
    return f16_rows + f16_slot[p] * f16_slot_stride + kv_head * f16_head_stride;
  }
};

// Causal grouped-query attention for n_tokens queries at positions pos0 .. pos0+n_tokens-1, over
// keys/values at positions 0 .. pos0+n_tokens-1 (already stored).
//   q   [n_tokens][n_heads * head_dim]
//   out [n_tokens][n_heads * head_dim]
// K/V rows are [n_kv_heads * head_dim]; query head h reads kv head h / (n_heads / n_kv_heads).
// scale multiplies q·k (normally 1/sqrt(head_dim)). Work is split over heads and tokens.
// k and v must have the same format (std::invalid_argument otherwise). f16 elements are widened
// exactly, so the result is that of f32 rows holding the same values; int8 rows give the result
// of f32 rows holding q * scale up to rounding (the SIMD kernels multiply each dot product, and
// each V row's weight, by the row's scale instead of every element).
// softcap > 0 caps each scaled score s at softcap * tanh(s / softcap) (Gemma 2); window > 0 lets
// a query see only the keys less than `window` positions before it (sliding-window layers of
// Gemma 2 / 3, Mistral, Phi-3): the rest get weight 0.
struct AttentionShape {
  int64_t n_tokens, pos0, n_heads, n_kv_heads, head_dim;
  float scale;
  float softcap = 0.0f;
  int64_t window = 0;
};
void attention(const AttentionShape& s, const float* q, const KvRows& k, const KvRows& v,
               float* out, ThreadPool& pool);

// Several independent attentions (one per sequence of a ragged batch) in one parallel pass, so
// that a decode step of many sequences spreads all their heads over the threads at once. A
// query's result is the same bits whichever batch it is computed in.
//
// weight_sums (optional, [n_kv_heads][weight_sums_stride]): the softmax weight every query
// gives position p in a query head of kv head g's group is added to weight_sums[g * stride + i]
// with i = weight_sums_index[p] (positions whose index is negative are not summed), or i = p
// without an index. The additions come query by query in position order (and for one query,
// head by head), so the sums are the same bits however the queries were split into calls and
// batches (the int8-mixed policy ranks positions by them). A job with sums runs each kv head's
// group of query heads as one task.
struct AttentionJob {
  AttentionShape shape;
  const float* q;
  KvRows k, v;
  float* out;
  float* weight_sums = nullptr;
  int64_t weight_sums_stride = 0;
  const int32_t* weight_sums_index = nullptr;
};
void attention_batch(const AttentionJob* jobs, int64_t n_jobs, ThreadPool& pool);

// Scalar references of the above (tests compare every dispatched version against these).
namespace reference {
void rmsnorm(float* out, const float* x, const float* weight, int64_t n, float eps);
float rms_inverse(const float* x, int64_t n, float eps);
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dims, const float* cos_sin,
          RopeLayout layout);
void silu_mul(float* out, const float* gate, const float* up, int64_t n);
void softmax(float* x, int64_t n);
void attention(const AttentionShape& s, const float* q, const KvRows& k, const KvRows& v,
               float* out);
}  // namespace reference

}  // namespace shrike::kernels
