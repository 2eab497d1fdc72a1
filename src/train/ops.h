// Forward and backward passes of every operation of a Llama decoder, for training (llm.c style:
// plain loops over row-major arrays, one function per direction, no autograd).
//
// Every function is a template over the scalar type and is instantiated for float (training)
// and double (the finite-difference gradient checks, where float's rounding would swamp the
// differences). Backward functions ACCUMULATE (+=) into parameter gradients (d_weight, d_bias)
// so that one buffer can collect a whole batch. Activation gradients are overwritten, except
// where a function says it accumulates (linear and RMSNorm inputs, which feed several consumers
// or sit on the residual stream). Shapes are in elements; N is the number of tokens of the (ragged)
// batch.
//
// Work is split across the pool with a fixed partition, so results are the same bits for the
// same thread count (training is deterministic for a seed).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace shrike::train {

// One sequence of a ragged batch: tokens [start, start + length) of the batch, at positions
// 0..length-1, attending causally within itself only. Spans must not overlap
// (std::invalid_argument); rope and attention leave tokens in no span untouched.
struct Span {
  int64_t start = 0, length = 0;
};

// out[N][out_dim] = in[N][in_dim] * weight[out_dim][in_dim]^T (+ bias[out_dim] when not null).
// Matrix products go to BLAS (sgemm/dgemm).
template <class T>
void linear_forward(T* out, const T* in, const T* weight, const T* bias, int64_t N, int64_t in_dim,
                    int64_t out_dim);
// d_in += d_out * weight (skipped when null); d_weight += d_out^T * in (skipped when null: a
// frozen weight); d_bias (when not null) += column sums of d_out.
template <class T>
void linear_backward(T* d_in, T* d_weight, T* d_bias, const T* d_out, const T* in, const T* weight,
                     int64_t N, int64_t in_dim, int64_t out_dim);

// out[t] = table[tokens[t]] (rows of dim). The table's row count is not passed: ids must be
// checked against it by the caller; negative ids throw std::out_of_range here.
template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* table, int64_t N, int64_t dim);
// d_table[tokens[t]] += d_out[t], summed in token order (deterministic).
template <class T>
void embedding_backward(T* d_table, const int32_t* tokens, const T* d_out, int64_t N, int64_t dim);

// out = in / rms(in) * weight per row; rstd[N] keeps 1/rms for the backward pass.
template <class T>
void rmsnorm_forward(T* out, T* rstd, const T* in, const T* weight, int64_t N, int64_t dim,
                     float eps, ThreadPool& pool);
// d_in += (this op's input gradient) -- accumulated because RMSNorm's input is the residual
// stream, whose gradient already holds the skip path; d_weight += ... (skipped when null)
template <class T>
void rmsnorm_backward(T* d_in, T* d_weight, const T* d_out, const T* in, const T* weight,
                      const T* rstd, int64_t N, int64_t dim, ThreadPool& pool);

// Rotary embedding in place on x[N][n_heads][head_dim]: pair i of the first rot_dims dimensions
// of each head (0: all of them) rotated by angle pos * theta^(-2i/rot_dims) / freq_factors[i]
// (model::rope_cos_sin; no factors = 1). The pairs are (x[2i], x[2i+1]) in the layout GGUF
// "llama" models use (kernels::RopeLayout::Adjacent), (x[i], x[i + rot_dims/2]) in Qwen2's
// (NeoX), exactly as kernels::rope. Positions restart at 0 for every span.
template <class T>
void rope_forward(T* x, const Span* spans, int64_t n_spans, int64_t n_heads, int64_t head_dim,
                  float theta, ThreadPool& pool, std::span<const float> freq_factors = {},
                  kernels::RopeLayout layout = kernels::RopeLayout::Adjacent, int64_t rot_dims = 0);
// The inverse rotation applied in place to the gradient.
template <class T>
void rope_backward(T* dx, const Span* spans, int64_t n_spans, int64_t n_heads, int64_t head_dim,
                   float theta, ThreadPool& pool, std::span<const float> freq_factors = {},
                   kernels::RopeLayout layout = kernels::RopeLayout::Adjacent,
                   int64_t rot_dims = 0);

// Elements of the attention-probability buffer: sum over spans of length^2 * n_heads.
int64_t attention_probs_size(const Span* spans, int64_t n_spans, int64_t n_heads);

// Causal grouped-query attention within each span. q: [N][n_heads*head_dim], k, v:
// [N][n_kv_heads*head_dim] (query head h reads kv head h / (n_heads / n_kv_heads)),
// out: [N][n_heads*head_dim], scale 1/sqrt(head_dim). probs keeps the softmax rows (layout:
// span by span, head by head, a length x length matrix whose upper triangle is zero).
template <class T>
void attention_forward(T* out, T* probs, const T* q, const T* k, const T* v, const Span* spans,
                       int64_t n_spans, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                       ThreadPool& pool);
// dq, dk, dv overwritten.
template <class T>
void attention_backward(T* dq, T* dk, T* dv, const T* d_out, const T* q, const T* k, const T* v,
                        const T* probs, const Span* spans, int64_t n_spans, int64_t n_heads,
                        int64_t n_kv_heads, int64_t head_dim, ThreadPool& pool);

// out = silu(gate) * up, elementwise over count elements.
template <class T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t count, ThreadPool& pool);
// d_gate, d_up overwritten.
template <class T>
void swiglu_backward(T* d_gate, T* d_up, const T* d_out, const T* gate, const T* up, int64_t count,
                     ThreadPool& pool);

// Softmax cross-entropy over rows of logits[M][V] with target ids (target < 0: row ignored,
// its gradient row zero). Returns the summed loss over counted rows; d_logits (overwritten)
// = (softmax - onehot) * grad_scale.
template <class T>
double cross_entropy(T* d_logits, const T* logits, const int32_t* targets, int64_t M, int64_t V,
                     double grad_scale, ThreadPool& pool);

// Distillation: temp^2 * KL(softmax(teacher/temp) || softmax(student/temp)) per row, summed and
// returned; d_student (overwritten) = its gradient times grad_scale, i.e.
// temp * (softmax(student/temp) - softmax(teacher/temp)) * grad_scale. Rows with mask[r] == 0
// (mask may be null: all rows) count nothing and get a zero gradient.
template <class T>
double kl_distill(T* d_student, const T* student, const T* teacher, const uint8_t* mask, int64_t M,
                  int64_t V, float temp, double grad_scale, ThreadPool& pool);

}  // namespace shrike::train
