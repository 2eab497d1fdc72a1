// Dispatch of the element-wise kernels on active_isa(), and the threading of attention. This file
// is compiled for the baseline ISA; the SIMD code is only reached through detail::IsaOps.
#include "kernels/ops.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "core/dtype.h"
#include "kernels/ops_internal.h"

namespace shrike::kernels {
namespace {

const detail::IsaOps* ops_for(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return nullptr;
    case Isa::Avx2: { static const detail::IsaOps t = detail::isa_ops_avx2(); return &t; }
    case Isa::Avx512:
    case Isa::Avx512Vnni: { static const detail::IsaOps t = detail::isa_ops_avx512(); return &t; }
  }
  return nullptr;
}

inline float widen(float x) {
  return x;
}
inline float widen(uint16_t h) {
  return fp16_to_fp32(h);
}

// Scalar version of one (token, head), same algorithm as reference::attention.
template <typename T>
void attention_one_scalar(const detail::AttnHead& a, const T* const* kb, const T* const* vb) {
  for (int64_t p = 0; p < a.n_keys; ++p) {
    const T* kr = kb[p / a.k_block_size] + (p % a.k_block_size) * a.k_row_stride + a.k_off;
    float dot = 0;
    for (int64_t i = 0; i < a.head_dim; ++i) dot += a.q[i] * widen(kr[i]);
    a.scores[p] = dot * a.scale;
  }
  reference::softmax(a.scores, a.n_keys);
  for (int64_t i = 0; i < a.head_dim; ++i) a.out[i] = 0;
  for (int64_t p = 0; p < a.n_keys; ++p) {
    const T* vr = vb[p / a.v_block_size] + (p % a.v_block_size) * a.v_row_stride + a.v_off;
    const float w = a.scores[p];
    for (int64_t i = 0; i < a.head_dim; ++i) a.out[i] += w * widen(vr[i]);
  }
}

void attention_head_scalar(const detail::AttnHead& a) {
  detail::AttnHead one = a;
  for (int64_t j = 0; j < a.nq; ++j) {
    one.q = a.q + j * a.q_stride;
    one.out = a.out + j * a.q_stride;
    one.n_keys = a.n_keys + j;
    if (a.f16) {
      attention_one_scalar(one, a.k_half, a.v_half);
    } else {
      attention_one_scalar(one, a.k_blocks, a.v_blocks);
    }
  }
}

}  // namespace

void rmsnorm(float* out, const float* x, const float* weight, int64_t n, float eps) {
  if (const auto* o = ops_for(active_isa())) return o->rmsnorm(out, x, weight, n, eps);
  reference::rmsnorm(out, x, weight, n, eps);
}
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dims, const float* cos_sin,
          RopeLayout layout) {
  if (const auto* o = ops_for(active_isa())) return o->rope(x, n_heads, head_dim, rot_dims, cos_sin, layout);
  reference::rope(x, n_heads, head_dim, rot_dims, cos_sin, layout);
}
void silu_mul(float* out, const float* gate, const float* up, int64_t n) {
  if (const auto* o = ops_for(active_isa())) return o->silu_mul(out, gate, up, n);
  reference::silu_mul(out, gate, up, n);
}
void softmax(float* x, int64_t n) {
  if (const auto* o = ops_for(active_isa())) return o->softmax(x, n);
  reference::softmax(x, n);
}

void attention(const AttentionShape& s, const float* q, const KvRows& k, const KvRows& v, float* out,
               ThreadPool& pool) {
  const AttentionJob job{s, q, k, v, out};
  attention_batch(&job, 1, pool);
}

void attention_batch(const AttentionJob* jobs, int64_t n_jobs, ThreadPool& pool) {
  const auto* o = ops_for(active_isa());
  void (*head_fn)(const detail::AttnHead&) = o ? o->attention_head : attention_head_scalar;
  // A task is one head of one job for up to kQ consecutive query tokens (they share every K / V
  // row load). Tasks are numbered job by job; first_task[j] is job j's first.
  constexpr int64_t kQ = 4;
  static thread_local std::vector<int64_t> first_task;
  first_task.assign(size_t(n_jobs) + 1, 0);
  int64_t max_keys = 0;
  for (int64_t j = 0; j < n_jobs; ++j) {
    if (jobs[j].k.is_f16() != jobs[j].v.is_f16())
      throw std::invalid_argument("attention: K and V rows must have the same element type");
    const AttentionShape& s = jobs[j].shape;
    const int64_t n_qblocks = s.n_tokens > 0 ? (s.n_tokens + kQ - 1) / kQ : 0;
    first_task[size_t(j) + 1] = first_task[size_t(j)] + n_qblocks * std::max<int64_t>(0, s.n_heads);
    max_keys = std::max(max_keys, s.pos0 + s.n_tokens);
  }
  const int64_t tasks = first_task[size_t(n_jobs)];
  if (tasks == 0) return;
  const int64_t* starts = first_task.data();
  std::atomic<int64_t> next{0};
  // Causal work grows with the token index: hand out tasks from the last token backwards, a few
  // at a time, so the long ones start first and the threads finish together.
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(8, tasks / (8 * pool.size())));
  auto body = [&](int, int) {
    static thread_local std::vector<float> scores;
    static thread_local std::vector<const void*> rows;
    if (scores.size() < size_t(kQ * (max_keys + 3))) scores.resize(size_t(kQ * (max_keys + 3)));
    if (rows.size() < size_t(2 * (max_keys + kQ))) rows.resize(size_t(2 * (max_keys + kQ)));
    int64_t j = 0;
    for (;;) {
      const int64_t b = next.fetch_add(chunk, std::memory_order_relaxed);
      if (b >= tasks) break;
      const int64_t e = std::min(tasks, b + chunk);
      for (int64_t i = b; i < e; ++i) {
        while (i >= starts[j + 1]) ++j;  // tasks of a thread only move forward
        while (i < starts[j]) --j;
        const AttentionJob& job = jobs[j];
        const AttentionShape& s = job.shape;
        const int64_t dim = s.n_heads * s.head_dim;
        const int64_t n_qblocks = (s.n_tokens + kQ - 1) / kQ;
        const int64_t local = i - starts[j];
        // Head-major: consecutive tasks of a thread share one head's K / V slice (it stays in
        // L2 instead of cycling all heads' rows through L3); query blocks from the last down.
        const int64_t h = local / n_qblocks, t = (n_qblocks - 1 - local % n_qblocks) * kQ;
        detail::AttnHead a{};
        a.f16 = job.k.is_f16();
        a.k_blocks = job.k.blocks;
        a.v_blocks = job.v.blocks;
        a.k_half = job.k.half_blocks;
        a.v_half = job.v.half_blocks;
        a.k_block_size = job.k.block_size;
        a.k_row_stride = job.k.row_stride;
        a.v_block_size = job.v.block_size;
        a.v_row_stride = job.v.row_stride;
        a.head_dim = s.head_dim;
        a.scale = s.scale;
        a.scores = scores.data();
        a.rows = rows.data();
        a.q_stride = dim;
        a.nq = std::min(kQ, s.n_tokens - t);
        a.q = job.q + t * dim + h * s.head_dim;
        a.out = job.out + t * dim + h * s.head_dim;
        const int64_t group = s.n_heads / s.n_kv_heads;
        a.k_off = (h / group) * job.k.head_stride;
        a.v_off = (h / group) * job.v.head_stride;
        a.n_keys = s.pos0 + t + 1;
        head_fn(a);
      }
    }
  };
  if (pool.size() == 1 || tasks == 1) {
    body(0, 1);
  } else {
    pool.run(body);
  }
}

}  // namespace shrike::kernels
