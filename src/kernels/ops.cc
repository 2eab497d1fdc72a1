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
#if SHRIKE_KERNELS_X86
    case Isa::Avx2: {
      static const detail::IsaOps t = detail::isa_ops_avx2();
      return &t;
    }
    case Isa::Avx512:
    case Isa::Avx512Vnni: {
      static const detail::IsaOps t = detail::isa_ops_avx512();
      return &t;
    }
#elif SHRIKE_KERNELS_NEON
    // The element-wise and attention kernels have no int8 dot products: one NEON target.
    case Isa::Neon:
    case Isa::NeonDot: {
      static const detail::IsaOps t = detail::isa_ops_neon();
      return &t;
    }
#endif
    default:
      break;
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
    const T* kr = kb[p / a.k.block_size] + (p % a.k.block_size) * a.k.row_stride + a.k.off;
    float dot = 0;
    for (int64_t i = 0; i < a.head_dim; ++i) dot += a.q[i] * widen(kr[i]);
    a.scores[p] = dot * a.scale;
  }
  detail::scores_to_weights(a.scores, a.n_keys, a.softcap, a.window, reference::softmax);
  for (int64_t i = 0; i < a.head_dim; ++i) a.out[i] = 0;
  for (int64_t p = 0; p < a.n_keys; ++p) {
    const T* vr = vb[p / a.v.block_size] + (p % a.v.block_size) * a.v.row_stride + a.v.off;
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

Int8Row int8_row(const detail::AttnRows& rows, int64_t p) {
  const int64_t bs = rows.block_size;
  Int8Row r;
  if (rows.slot != nullptr && rows.slot[p] >= 0) {
    r.half = rows.copies + rows.slot[p] * rows.copy_stride + rows.copy_off;
  } else {
    r.q = rows.int8[p / bs] + (p % bs) * rows.row_stride + rows.off;
    r.scale = rows.scales[p / bs][(p % bs) * rows.scale_row_stride + rows.scale_off];
  }
  return r;
}

void attention_one_scalar_int8(const detail::AttnHead& a) {
  for (int64_t p = 0; p < a.n_keys; ++p) {
    const Int8Row kr = int8_row(a.k, p);
    float dot = 0;
    for (int64_t i = 0; i < a.head_dim; ++i) dot += a.q[i] * kr[i];
    a.scores[p] = dot * a.scale;
  }
  detail::scores_to_weights(a.scores, a.n_keys, a.softcap, a.window, reference::softmax);
  for (int64_t i = 0; i < a.head_dim; ++i) a.out[i] = 0;
  for (int64_t p = 0; p < a.n_keys; ++p) {
    const Int8Row vr = int8_row(a.v, p);
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
        attention_one_scalar(one, a.k.half, a.v.half);
        break;
      case KvFormat::Int8:
        attention_one_scalar_int8(one);
        break;
      case KvFormat::F32:
        attention_one_scalar(one, a.k.blocks, a.v.blocks);
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

// ---- attention_batch: task plan, per-head arguments, weight sums ------------------------------

// A task is one head of one job for up to kQ consecutive query tokens (they share every K / V
// row load), or, for a job that sums attention weights, one kv head's group of query heads for
// all the job's queries (the group's sums then grow on one thread, query by query in order).
constexpr int64_t kQ = 4;

using HeadFn = void (*)(const detail::AttnHead&);

int64_t query_blocks(const AttentionShape& s) {
  return s.n_tokens > 0 ? (s.n_tokens + kQ - 1) / kQ : 0;
}

struct TaskPlan {
  const int64_t* first_task;  // [n_jobs + 1]: tasks are numbered job by job
  int64_t tasks = 0, max_keys = 0, max_group = 1;
  double macs = 0;  // multiply-adds of scores and weighted sums, causal mask ignored
};

// Below this many multiply-adds (a decode step of a small model over a short context: a few
// microseconds) attention runs on the caller: waking the pool would cost about as much as it saves.
constexpr double kMinAttentionMacsForPool = 64.0 * 1024;

TaskPlan plan_tasks(const AttentionJob* jobs, int64_t n_jobs) {
  static thread_local std::vector<int64_t> first_task;
  first_task.assign(size_t(n_jobs) + 1, 0);
  TaskPlan plan;
  for (int64_t j = 0; j < n_jobs; ++j) {
    const AttentionJob& job = jobs[j];
    if (job.k.format() != job.v.format())
      throw std::invalid_argument("attention: K and V rows must have the same element type");
    check_rows(job.k, "K");
    check_rows(job.v, "V");
    const AttentionShape& s = job.shape;
    const int64_t n_qblocks = query_blocks(s);
    int64_t n_tasks = n_qblocks * std::max<int64_t>(0, s.n_heads);
    if (job.weight_sums != nullptr && n_qblocks > 0) {
      n_tasks = std::max<int64_t>(0, s.n_kv_heads);
      plan.max_group = std::max(plan.max_group, s.n_heads / s.n_kv_heads);
    }
    first_task[size_t(j) + 1] = first_task[size_t(j)] + n_tasks;
    plan.max_keys = std::max(plan.max_keys, s.pos0 + s.n_tokens);
    plan.macs += 2.0 * double(std::max<int64_t>(0, s.n_heads)) * double(s.n_tokens) *
                 double(s.pos0 + s.n_tokens) * double(s.head_dim);
  }
  plan.first_task = first_task.data();
  plan.tasks = first_task[size_t(n_jobs)];
  return plan;
}

// One worker thread's scratch, grown to the plan's needs (ops_internal.h).
struct Scratch {
  float* scores;  // max_group heads' scores, score_room floats each
  const void** rows;
  float* row_scales;
  uint8_t* row_is_half;
};

Scratch thread_scratch(const TaskPlan& plan, int64_t score_room) {
  static thread_local std::vector<float> scores, row_scales;
  static thread_local std::vector<const void*> rows;
  static thread_local std::vector<uint8_t> row_is_half;
  const auto at_least = [](auto& v, int64_t n) {
    if (v.size() < size_t(n)) v.resize(size_t(n));
  };
  const int64_t n_rows = 2 * (plan.max_keys + kQ);
  at_least(scores, plan.max_group * score_room);
  at_least(rows, n_rows);
  at_least(row_scales, n_rows);
  at_least(row_is_half, n_rows);
  return Scratch{scores.data(), rows.data(), row_scales.data(), row_is_half.data()};
}

// The K or V rows of kv head `kv_head` (the int8 fields only for int8 rows).
detail::AttnRows head_rows(const KvRows& r, int64_t kv_head, bool int8) {
  detail::AttnRows out{};
  out.blocks = r.blocks;
  out.half = r.half_blocks;
  out.block_size = r.block_size;
  out.row_stride = r.row_stride;
  out.off = kv_head * r.head_stride;
  if (int8) {
    out.int8 = r.int8_blocks;
    out.scales = r.scale_blocks;
    out.scale_row_stride = r.scale_row_stride;
    out.scale_off = kv_head * r.scale_head_stride;
    out.slot = r.f16_slot;
    out.copies = r.f16_rows;
    out.copy_stride = r.f16_slot_stride;
    out.copy_off = kv_head * r.f16_head_stride;
  }
  return out;
}

// The arguments shared by every query head of kv head `kv_head` of `job`.
detail::AttnHead head_args(const AttentionJob& job, int64_t kv_head, const Scratch& scratch) {
  const AttentionShape& s = job.shape;
  const KvFormat format = job.k.format();
  const bool int8 = format == KvFormat::Int8;
  // q, nq, n_keys and out: per query block (run_head).
  return detail::AttnHead{.q = nullptr,
                          .nq = 0,
                          .q_stride = s.n_heads * s.head_dim,
                          .format = format,
                          .k = head_rows(job.k, kv_head, int8),
                          .v = head_rows(job.v, kv_head, int8),
                          .n_keys = 0,
                          .head_dim = s.head_dim,
                          .scale = s.scale,
                          .out = nullptr,
                          .scores = scratch.scores,
                          .rows = scratch.rows,
                          .row_scales = scratch.row_scales,
                          .row_is_half = scratch.row_is_half,
                          .softcap = s.softcap,
                          .window = s.window};
}

// Query head h for the query block at token t; its weights are left at `sc`.
void run_head(detail::AttnHead& a, HeadFn head_fn, const AttentionJob& job, int64_t h, int64_t t,
              float* sc) {
  const AttentionShape& s = job.shape;
  a.nq = std::min(kQ, s.n_tokens - t);
  a.q = job.q + t * a.q_stride + h * s.head_dim;
  a.out = job.out + t * a.q_stride + h * s.head_dim;
  a.n_keys = s.pos0 + t + 1;
  a.scores = sc;
  head_fn(a);
}

// Adds the weights run_head left for the last query block (head g of the group at
// scores + g * score_room) to kv head `kv_head`'s sums, query by query, head by head: the sums
// see the same additions in the same order however the queries are split into calls.
void add_weight_sums(const AttentionJob& job, int64_t kv_head, const detail::AttnHead& a,
                     const float* scores, int64_t group, int64_t score_room) {
  float* acc = job.weight_sums + kv_head * job.weight_sums_stride;
  const int64_t ld = a.n_keys + a.nq + 2;  // where query j's weights are (ops_internal.h)
  const int32_t* index = job.weight_sums_index;
  for (int64_t q = 0; q < a.nq; ++q)
    for (int64_t g = 0; g < group; ++g) {
      const float* w = scores + g * score_room + q * ld;
      const int64_t n = a.n_keys + q;
      if (index == nullptr) {
        for (int64_t p = 0; p < n; ++p) acc[p] += w[p];
      } else {
        for (int64_t p = 0; p < n; ++p)
          if (index[p] >= 0) acc[index[p]] += w[p];
      }
    }
}

// Task `local` of `job` (numbered within the job).
void run_task(const AttentionJob& job, int64_t local, HeadFn head_fn, const Scratch& scratch,
              int64_t score_room) {
  const AttentionShape& s = job.shape;
  const int64_t n_qblocks = query_blocks(s);
  const int64_t group = s.n_heads / s.n_kv_heads;
  const bool sums = job.weight_sums != nullptr;
  // Head-major: consecutive tasks of a thread share one head's K / V slice (it stays in L2
  // instead of cycling all heads' rows through L3); query blocks from the last down.
  const int64_t kv_head = sums ? local : (local / n_qblocks) / group;
  detail::AttnHead a = head_args(job, kv_head, scratch);
  if (!sums) {
    run_head(a, head_fn, job, local / n_qblocks, (n_qblocks - 1 - local % n_qblocks) * kQ,
             scratch.scores);
    return;
  }
  // Query block by query block in position order, every head of the group.
  for (int64_t t = 0; t < s.n_tokens; t += kQ) {
    for (int64_t g = 0; g < group; ++g)
      run_head(a, head_fn, job, kv_head * group + g, t, scratch.scores + g * score_room);
    add_weight_sums(job, kv_head, a, scratch.scores, group, score_room);
  }
}

}  // namespace

void rmsnorm(float* out, const float* x, const float* weight, int64_t n, float eps) {
  if (const auto* o = ops_for(active_isa())) return o->rmsnorm(out, x, weight, n, eps);
  reference::rmsnorm(out, x, weight, n, eps);
}
float rms_inverse(const float* x, int64_t n, float eps) {
  if (const auto* o = ops_for(active_isa())) return o->rms_inverse(x, n, eps);
  return reference::rms_inverse(x, n, eps);
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
void gelu_mul(float* out, const float* gate, const float* up, int64_t n) {
  // Not vectorised: only Gemma models use it, and the products around it dominate.
  constexpr float kSqrt2OverPi = 0.7978845608f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    out[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x))) * up[i];
  }
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
  const HeadFn head_fn = o ? o->attention_head : attention_head_scalar;
  const TaskPlan plan = plan_tasks(jobs, n_jobs);
  const int64_t tasks = plan.tasks;
  if (tasks == 0) return;
  std::atomic<int64_t> next{0};
  // Causal work grows with the token index: hand out tasks from the last token backwards, a few
  // at a time, so the long ones start first and the threads finish together.
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(8, tasks / (8 * pool.size())));
  const int64_t score_room = kQ * (plan.max_keys + 3);  // one head's scores (ops_internal.h)
  auto body = [&](int, int) {
    const Scratch scratch = thread_scratch(plan, score_room);
    const int64_t* starts = plan.first_task;
    int64_t j = 0;
    for (;;) {
      const int64_t b = next.fetch_add(chunk, std::memory_order_relaxed);
      if (b >= tasks) break;
      const int64_t e = std::min(tasks, b + chunk);
      for (int64_t i = b; i < e; ++i) {
        while (i >= starts[j + 1]) ++j;  // tasks of a thread only move forward
        while (i < starts[j]) --j;
        run_task(jobs[j], i - starts[j], head_fn, scratch, score_room);
      }
    }
  };
  if (pool.size() == 1 || tasks == 1 || plan.macs < kMinAttentionMacsForPool) {
    body(0, 1);
  } else {
    pool.run(body);
  }
}

}  // namespace shrike::kernels
