// Dispatch of the element-wise kernels on active_isa(), and the threading of attention. This file
// is compiled for the baseline ISA; the SIMD code is only reached through detail::IsaOps.
#include "kernels/ops.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/ops_internal.h"

namespace shrike::kernels {
namespace {

const detail::IsaOps* ops_for(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return nullptr;
    case Isa::Avx2: {
      static const detail::IsaOps t = detail::isa_ops_avx2();
      return &t;
    }
    case Isa::Avx512:
    case Isa::Avx512Vnni: {
      static const detail::IsaOps t = detail::isa_ops_avx512();
      return &t;
    }
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

// Element i of an int8 row (or of its f16 copy), dequantised as reference::attention does.
struct Int8Row {
  const int8_t* q = nullptr;
  const uint16_t* half = nullptr;
  float scale = 0;
  float operator[](int64_t i) const { return half ? fp16_to_fp32(half[i]) : float(q[i]) * scale; }
};

Int8Row int8_row(const int8_t* const* blocks, const float* const* scales, const int32_t* slot,
                 const uint16_t* copies, int64_t bs, int64_t row_stride, int64_t off,
                 int64_t scale_row_stride, int64_t scale_off, int64_t copy_stride, int64_t copy_off,
                 int64_t p) {
  Int8Row r;
  if (slot != nullptr && slot[p] >= 0) {
    r.half = copies + slot[p] * copy_stride + copy_off;
  } else {
    r.q = blocks[p / bs] + (p % bs) * row_stride + off;
    r.scale = scales[p / bs][(p % bs) * scale_row_stride + scale_off];
  }
  return r;
}

void attention_one_scalar_int8(const detail::AttnHead& a) {
  for (int64_t p = 0; p < a.n_keys; ++p) {
    const Int8Row kr =
        int8_row(a.k_int8, a.k_scales, a.k_slot, a.k_copies, a.k_block_size, a.k_row_stride,
                 a.k_off, a.k_scale_row_stride, a.k_scale_off, a.k_copy_stride, a.k_copy_off, p);
    float dot = 0;
    for (int64_t i = 0; i < a.head_dim; ++i) dot += a.q[i] * kr[i];
    a.scores[p] = dot * a.scale;
  }
  reference::softmax(a.scores, a.n_keys);
  for (int64_t i = 0; i < a.head_dim; ++i) a.out[i] = 0;
  for (int64_t p = 0; p < a.n_keys; ++p) {
    const Int8Row vr =
        int8_row(a.v_int8, a.v_scales, a.v_slot, a.v_copies, a.v_block_size, a.v_row_stride,
                 a.v_off, a.v_scale_row_stride, a.v_scale_off, a.v_copy_stride, a.v_copy_off, p);
    const float w = a.scores[p];
    for (int64_t i = 0; i < a.head_dim; ++i) a.out[i] += w * vr[i];
  }
}

void attention_head_scalar(const detail::AttnHead& a) {
  detail::AttnHead one = a;
  const int64_t ld = a.n_keys + a.nq + 2;  // where query j's weights must be left (ops_internal.h)
  for (int64_t j = 0; j < a.nq; ++j) {
    one.q = a.q + j * a.q_stride;
    one.out = a.out + j * a.q_stride;
    one.n_keys = a.n_keys + j;
    one.scores = a.scores + j * ld;
    switch (a.format) {
      case KvFormat::F16:
        attention_one_scalar(one, a.k_half, a.v_half);
        break;
      case KvFormat::Int8:
        attention_one_scalar_int8(one);
        break;
      case KvFormat::F32:
        attention_one_scalar(one, a.k_blocks, a.v_blocks);
        break;
    }
  }
}

void check_rows(const KvRows& r, const char* which) {
  if (r.is_int8() && r.scale_blocks == nullptr)
    throw std::invalid_argument(std::string("attention: int8 ") + which + " rows without scales");
  if (r.f16_slot != nullptr && r.f16_rows == nullptr)
    throw std::invalid_argument(std::string("attention: ") + which +
                                " rows name f16 copies that are not there");
}

}  // namespace

void rmsnorm(float* out, const float* x, const float* weight, int64_t n, float eps) {
  if (const auto* o = ops_for(active_isa())) return o->rmsnorm(out, x, weight, n, eps);
  reference::rmsnorm(out, x, weight, n, eps);
}
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dims, const float* cos_sin,
          RopeLayout layout) {
  if (const auto* o = ops_for(active_isa()))
    return o->rope(x, n_heads, head_dim, rot_dims, cos_sin, layout);
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

float quantize_int8_row(const float* x, int64_t n, int8_t* q) {
  float amax = 0;
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    finite = finite && std::isfinite(x[i]);
    amax = std::max(amax, std::fabs(x[i]));
  }
  if (!finite || amax == 0) {
    for (int64_t i = 0; i < n; ++i) q[i] = 0;
    return finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
  }
  const float scale = amax / 127.0f;
  for (int64_t i = 0; i < n; ++i) {
    // nearbyint rounds ties to even in the default rounding mode; the clamp only guards the
    // last ulp of x[i] / scale at +-amax.
    const float r = std::nearbyint(x[i] / scale);
    q[i] = int8_t(std::min(127.0f, std::max(-127.0f, r)));
  }
  return scale;
}

void attention(const AttentionShape& s, const float* q, const KvRows& k, const KvRows& v,
               float* out, ThreadPool& pool) {
  const AttentionJob job{s, q, k, v, out};
  attention_batch(&job, 1, pool);
}

void attention_batch(const AttentionJob* jobs, int64_t n_jobs, ThreadPool& pool) {
  const auto* o = ops_for(active_isa());
  void (*head_fn)(const detail::AttnHead&) = o ? o->attention_head : attention_head_scalar;
  // A task is one head of one job for up to kQ consecutive query tokens (they share every K / V
  // row load), or, for a job that sums attention weights, one kv head's group of query heads for
  // all the job's queries (the group's sums then grow on one thread, query by query in order).
  // Tasks are numbered job by job; first_task[j] is job j's first.
  constexpr int64_t kQ = 4;
  static thread_local std::vector<int64_t> first_task;
  first_task.assign(size_t(n_jobs) + 1, 0);
  int64_t max_keys = 0, max_group = 1;
  for (int64_t j = 0; j < n_jobs; ++j) {
    const AttentionJob& job = jobs[j];
    if (job.k.format() != job.v.format())
      throw std::invalid_argument("attention: K and V rows must have the same element type");
    check_rows(job.k, "K");
    check_rows(job.v, "V");
    const AttentionShape& s = job.shape;
    const int64_t n_qblocks = s.n_tokens > 0 ? (s.n_tokens + kQ - 1) / kQ : 0;
    int64_t n_tasks = n_qblocks * std::max<int64_t>(0, s.n_heads);
    if (job.weight_sums != nullptr && n_qblocks > 0) {
      n_tasks = std::max<int64_t>(0, s.n_kv_heads);
      max_group = std::max(max_group, s.n_heads / s.n_kv_heads);
    }
    first_task[size_t(j) + 1] = first_task[size_t(j)] + n_tasks;
    max_keys = std::max(max_keys, s.pos0 + s.n_tokens);
  }
  const int64_t tasks = first_task[size_t(n_jobs)];
  if (tasks == 0) return;
  const int64_t* starts = first_task.data();
  std::atomic<int64_t> next{0};
  // Causal work grows with the token index: hand out tasks from the last token backwards, a few
  // at a time, so the long ones start first and the threads finish together.
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(8, tasks / (8 * pool.size())));
  const int64_t score_room = kQ * (max_keys + 3);  // one head's scores (ops_internal.h)
  auto body = [&](int, int) {
    static thread_local std::vector<float> scores, row_scales;
    static thread_local std::vector<const void*> rows;
    static thread_local std::vector<uint8_t> row_is_half;
    const auto at_least = [](auto& v, int64_t n) {
      if (v.size() < size_t(n)) v.resize(size_t(n));
    };
    at_least(scores, max_group * score_room);
    at_least(rows, 2 * (max_keys + kQ));
    at_least(row_scales, 2 * (max_keys + kQ));
    at_least(row_is_half, 2 * (max_keys + kQ));
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
        const int64_t group = s.n_heads / s.n_kv_heads;
        const int64_t local = i - starts[j];
        const bool sums = job.weight_sums != nullptr;
        // Head-major: consecutive tasks of a thread share one head's K / V slice (it stays in
        // L2 instead of cycling all heads' rows through L3); query blocks from the last down.
        const int64_t kv_head = sums ? local : (local / n_qblocks) / group;
        detail::AttnHead a{};
        a.format = job.k.format();
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
        a.row_scales = row_scales.data();
        a.row_is_half = row_is_half.data();
        a.q_stride = dim;
        a.k_off = kv_head * job.k.head_stride;
        a.v_off = kv_head * job.v.head_stride;
        if (a.format == KvFormat::Int8) {
          a.k_int8 = job.k.int8_blocks;
          a.v_int8 = job.v.int8_blocks;
          a.k_scales = job.k.scale_blocks;
          a.v_scales = job.v.scale_blocks;
          a.k_scale_row_stride = job.k.scale_row_stride;
          a.v_scale_row_stride = job.v.scale_row_stride;
          a.k_scale_off = kv_head * job.k.scale_head_stride;
          a.v_scale_off = kv_head * job.v.scale_head_stride;
          a.k_slot = job.k.f16_slot;
          a.v_slot = job.v.f16_slot;
          a.k_copies = job.k.f16_rows;
          a.v_copies = job.v.f16_rows;
          a.k_copy_stride = job.k.f16_slot_stride;
          a.v_copy_stride = job.v.f16_slot_stride;
          a.k_copy_off = kv_head * job.k.f16_head_stride;
          a.v_copy_off = kv_head * job.v.f16_head_stride;
        }
        // Query head h for the query block at token t, its weights left at `sc`.
        const auto run = [&](int64_t h, int64_t t, float* sc) {
          a.nq = std::min(kQ, s.n_tokens - t);
          a.q = job.q + t * dim + h * s.head_dim;
          a.out = job.out + t * dim + h * s.head_dim;
          a.n_keys = s.pos0 + t + 1;
          a.scores = sc;
          head_fn(a);
        };
        if (!sums) {
          run(local / n_qblocks, (n_qblocks - 1 - local % n_qblocks) * kQ, scores.data());
          continue;
        }
        // Query block by query block in position order, every head of the group; then each
        // query's weights, head by head: the sums see the same additions in the same order
        // however the queries are split into calls.
        float* acc = job.weight_sums + kv_head * job.weight_sums_stride;
        const int64_t h0 = kv_head * group;
        for (int64_t t = 0; t < s.n_tokens; t += kQ) {
          for (int64_t g = 0; g < group; ++g) run(h0 + g, t, scores.data() + g * score_room);
          const int64_t ld = a.n_keys + a.nq + 2;
          const int32_t* index = job.weight_sums_index;
          for (int64_t q = 0; q < a.nq; ++q)
            for (int64_t g = 0; g < group; ++g) {
              const float* w = scores.data() + g * score_room + q * ld;
              const int64_t n = a.n_keys + q;
              if (index == nullptr) {
                for (int64_t p = 0; p < n; ++p) acc[p] += w[p];
              } else {
                for (int64_t p = 0; p < n; ++p)
                  if (index[p] >= 0) acc[index[p]] += w[p];
              }
            }
        }
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
