// Forward and backward passes of the decoder's operations for training (contract in ops.h).
//
// Every output element is computed by exactly one task, in an order that does not depend on how
// the tasks are spread over the threads, so the results are the same bits for any pool size.
// (The linear layers' products are threaded by OpenBLAS itself, which does not see the pool.)
#include "train/ops.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/rope.h"

namespace shrike::train {
namespace {

// The project builds for baseline x86-64 at -O2, where GCC only vectorises loops whose trip
// count is known at compile time. Element-wise loops over a row are therefore written in blocks of
// kLanes with a fixed-length inner loop, which the SLP vectoriser turns into vector instructions,
// plus a scalar tail.
constexpr int64_t kLanes = 8;

// y += alpha * x.
template <class T>
void axpy(T* __restrict y, T alpha, const T* __restrict x, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) y[i + l] += alpha * x[i + l];
  for (; i < n; ++i) y[i] += alpha * x[i];
}

void require(bool ok, const char* who, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string("train::") + who + ": " + what);
}

void require_non_negative(const char* who, int64_t N, int64_t dim) {
  require(N >= 0 && dim >= 0, who, "negative size");
}

// OpenBLAS takes 32-bit sizes (the LP64 build that distributions ship).
int blas_int(int64_t v, const char* who) {
  require(v >= 0 && v <= INT_MAX, who, "matrix dimension outside the range BLAS accepts");
  return int(v);
}

// Row-major C = alpha * op(A) op(B) + beta * C.
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, double alpha,
          const double* a, int lda, const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Checks the spans (non-negative, pairwise disjoint) and returns the longest length.
int64_t check_spans(const char* who, const Span* spans, int64_t n_spans) {
  require(n_spans >= 0 && (spans != nullptr || n_spans == 0), who, "no spans");
  std::vector<Span> sorted(spans, spans + n_spans);
  int64_t longest = 0;
  for (const Span& s : sorted) {
    require(s.start >= 0 && s.length >= 0, who, "span with a negative start or length");
    require(s.length <= std::numeric_limits<int64_t>::max() - s.start, who, "span too long");
    longest = std::max(longest, s.length);
  }
  // Overlapping spans would be rotated twice and written by two threads at once.
  std::sort(sorted.begin(), sorted.end(),
            [](const Span& a, const Span& b) { return a.start < b.start; });
  for (size_t i = 1; i < sorted.size(); ++i)
    require(sorted[i].start >= sorted[i - 1].start + sorted[i - 1].length, who, "spans overlap");
  return longest;
}

// Calls fn(task) for every task in [0, n_tasks), the threads taking tasks in turn. Which thread
// runs a task varies from run to run; callers make each task's result independent of that.
template <class Scratch, class F>
void for_each_task(ThreadPool& pool, int64_t n_tasks, size_t scratch_size, F&& fn) {
  std::atomic<int64_t> next{0};
  pool.run([&](int, int) {
    std::vector<Scratch> scratch(scratch_size);
    for (int64_t t; (t = next.fetch_add(1, std::memory_order_relaxed)) < n_tasks;)
      fn(t, scratch.data());
  });
}

// Rotary embedding of every token of the spans, by angle sign * pos * f_i (model::rope_cos_sin
// over the first rot_dims dimensions of each head; the rest pass through), pairs chosen by layout.
template <class T>
void rope_apply(T* x, const Span* spans, int64_t n_spans, int64_t n_heads, int64_t head_dim,
                float theta, std::span<const float> freq_factors, kernels::RopeLayout layout,
                int64_t rot_dims, bool inverse, ThreadPool& pool) {
  const char* who = inverse ? "rope_backward" : "rope_forward";
  const int64_t longest = check_spans(who, spans, n_spans);
  if (rot_dims == 0) rot_dims = head_dim;
  require(n_heads > 0 && head_dim > 0 && head_dim % 2 == 0, who,
          "need n_heads > 0 and an even head_dim > 0");
  require(rot_dims > 0 && rot_dims <= head_dim && rot_dims % 2 == 0, who,
          "need an even number of rotated dimensions, at most head_dim");
  require(std::isfinite(theta) && theta > 0, who, "theta must be positive");
  const int64_t half = rot_dims / 2;
  require(freq_factors.empty() || int64_t(freq_factors.size()) == half, who,
          "need rot_dims / 2 frequency factors");
  const bool adjacent = layout == kernels::RopeLayout::Adjacent;
  // (cos, sin) per position and pair, from the inference model's own table.
  std::vector<float> table(size_t(longest * rot_dims));
  for (int64_t p = 0; p < longest; ++p)
    model::rope_cos_sin(table.data() + p * rot_dims, p, theta, rot_dims, freq_factors);
  // Tokens are numbered span after span; first[s] is the number before span s.
  std::vector<int64_t> first(size_t(n_spans) + 1, 0);
  for (int64_t s = 0; s < n_spans; ++s) first[size_t(s) + 1] = first[size_t(s)] + spans[s].length;
  const int64_t width = n_heads * head_dim;
  pool.parallel_for(first.back(), 16, [&](int64_t b, int64_t e) {
    int64_t s = std::upper_bound(first.begin(), first.end(), b) - first.begin() - 1;
    for (int64_t j = b; j < e; ++j) {
      while (j >= first[size_t(s) + 1]) ++s;
      const int64_t pos = j - first[size_t(s)];
      const float* cs = table.data() + pos * rot_dims;
      T* row = x + (spans[s].start + pos) * width;
      for (int64_t h = 0; h < n_heads; ++h) {
        T* v = row + h * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          const T c = cs[2 * i], sn = inverse ? -cs[2 * i + 1] : cs[2 * i + 1];
          const int64_t ia = adjacent ? 2 * i : i, ib = adjacent ? 2 * i + 1 : i + half;
          const T x0 = v[ia], x1 = v[ib];
          // Same expression as kernels::reference::rope.
          v[ia] = x0 * c - x1 * sn;
          v[ib] = x0 * sn + x1 * c;
        }
      }
    }
  });
}

struct AttentionGeometry {
  int64_t group, q_width, kv_width, longest;
  int hd, qw, kvw;                    // the same for BLAS
  std::vector<int64_t> probs_offset;  // per span
  std::vector<int64_t> order;         // spans, longest first (balances the threads' load)
};

AttentionGeometry attention_geometry(const char* who, const Span* spans, int64_t n_spans,
                                     int64_t n_heads, int64_t n_kv_heads, int64_t head_dim) {
  AttentionGeometry g;
  g.longest = check_spans(who, spans, n_spans);
  require(n_heads > 0 && n_kv_heads > 0 && head_dim > 0, who,
          "head counts and size must be positive");
  require(n_heads % n_kv_heads == 0, who, "n_heads must be a multiple of n_kv_heads");
  g.group = n_heads / n_kv_heads;
  g.q_width = n_heads * head_dim;
  g.kv_width = n_kv_heads * head_dim;
  g.hd = blas_int(head_dim, who);
  g.qw = blas_int(g.q_width, who);
  g.kvw = blas_int(g.kv_width, who);
  blas_int(g.longest, who);  // a span's length is a leading dimension of its probabilities
  g.probs_offset.resize(size_t(n_spans));
  for (int64_t s = 0, off = 0; s < n_spans; ++s) {
    g.probs_offset[size_t(s)] = off;
    off += spans[s].length * spans[s].length * n_heads;
  }
  g.order.resize(size_t(n_spans));
  for (int64_t s = 0; s < n_spans; ++s) g.order[size_t(s)] = s;
  std::stable_sort(g.order.begin(), g.order.end(),
                   [&](int64_t a, int64_t b) { return spans[a].length > spans[b].length; });
  return g;
}

}  // namespace

// ---- linear ----

template <class T>
void linear_forward(T* out, const T* in, const T* weight, const T* bias, int64_t N, int64_t in_dim,
                    int64_t out_dim) {
  const char* who = "linear_forward";
  const int n = blas_int(N, who), k = blas_int(in_dim, who), m = blas_int(out_dim, who);
  if (n == 0 || m == 0) return;
  if (k == 0) {
    std::fill(out, out + N * out_dim, T(0));
  } else {
    gemm(CblasNoTrans, CblasTrans, n, m, k, T(1), in, k, weight, k, T(0), out, m);
  }
  if (bias)
    for (int64_t t = 0; t < N; ++t) axpy(out + t * out_dim, T(1), bias, out_dim);
}

template <class T>
void linear_backward(T* d_in, T* d_weight, T* d_bias, const T* d_out, const T* in, const T* weight,
                     int64_t N, int64_t in_dim, int64_t out_dim) {
  const char* who = "linear_backward";
  const int n = blas_int(N, who), k = blas_int(in_dim, who), m = blas_int(out_dim, who);
  if (n == 0) return;
  if (d_in && k > 0 && m > 0)
    gemm(CblasNoTrans, CblasNoTrans, n, k, m, T(1), d_out, m, weight, k, T(1), d_in, k);
  if (d_weight && k > 0 && m > 0)
    gemm(CblasTrans, CblasNoTrans, m, k, n, T(1), d_out, m, in, k, T(1), d_weight, k);
  if (d_bias)
    for (int64_t t = 0; t < N; ++t) axpy(d_bias, T(1), d_out + t * out_dim, out_dim);
}

// ---- embedding ----

template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* table, int64_t N, int64_t dim) {
  require_non_negative("embedding_forward", N, dim);
  for (int64_t t = 0; t < N; ++t)
    if (tokens[t] < 0) throw std::out_of_range("train::embedding_forward: negative token id");
  for (int64_t t = 0; t < N; ++t)
    std::memcpy(out + t * dim, table + int64_t(tokens[t]) * dim, size_t(dim) * sizeof(T));
}

template <class T>
void embedding_backward(T* d_table, const int32_t* tokens, const T* d_out, int64_t N, int64_t dim) {
  require_non_negative("embedding_backward", N, dim);
  for (int64_t t = 0; t < N; ++t)
    if (tokens[t] < 0) throw std::out_of_range("train::embedding_backward: negative token id");
  // One thread, tokens in order: a few hundred thousand additions per batch, and repeated tokens
  // sum in a fixed order.
  for (int64_t t = 0; t < N; ++t)
    axpy(d_table + int64_t(tokens[t]) * dim, T(1), d_out + t * dim, dim);
}

// ---- RMSNorm ----

template <class T>
void rmsnorm_forward(T* out, T* rstd, const T* in, const T* weight, int64_t N, int64_t dim,
                     float eps, ThreadPool& pool) {
  require_non_negative("rmsnorm_forward", N, dim);
  require(dim > 0 || N == 0, "rmsnorm_forward", "dim must be positive");
  pool.parallel_for(N, 16, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const T* x = in + t * dim;
      T* y = out + t * dim;
      // Sum of squares in double and the factor in T, as kernels::reference::rmsnorm does.
      double ss = 0;
      for (int64_t i = 0; i < dim; ++i) ss += double(x[i]) * double(x[i]);
      const T r = T(1) / std::sqrt(T(ss / double(dim)) + T(eps));
      rstd[t] = r;
      int64_t i = 0;
      for (; i + kLanes <= dim; i += kLanes)
        for (int64_t l = 0; l < kLanes; ++l) y[i + l] = x[i + l] * r * weight[i + l];
      for (; i < dim; ++i) y[i] = x[i] * r * weight[i];
    }
  });
}

template <class T>
void rmsnorm_backward(T* d_in, T* d_weight, const T* d_out, const T* in, const T* weight,
                      const T* rstd, int64_t N, int64_t dim, ThreadPool& pool) {
  require_non_negative("rmsnorm_backward", N, dim);
  // y_i = x_i r w_i with r = (mean(x²) + eps)^-1/2, dr/dx_i = -r³ x_i / dim, so
  // dx_i = r (dy_i w_i - x_i r² (Σ_j dy_j w_j x_j) / dim).
  pool.parallel_for(N, 16, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const T* x = in + t * dim;
      const T* dy = d_out + t * dim;
      T* dx = d_in + t * dim;
      const T r = rstd[t];
      T lanes[kLanes] = {};
      int64_t i = 0;
      for (; i + kLanes <= dim; i += kLanes)
        for (int64_t l = 0; l < kLanes; ++l) lanes[l] += dy[i + l] * weight[i + l] * x[i + l];
      for (int64_t l = 0; i < dim; ++i, ++l) lanes[l] += dy[i] * weight[i] * x[i];
      T c = 0;
      for (int64_t l = 0; l < kLanes; ++l) c += lanes[l];
      const T k = r * r * c / T(dim);
      for (i = 0; i + kLanes <= dim; i += kLanes)
        for (int64_t l = 0; l < kLanes; ++l)
          dx[i + l] += r * (dy[i + l] * weight[i + l] - x[i + l] * k);
      for (; i < dim; ++i) dx[i] += r * (dy[i] * weight[i] - x[i] * k);
    }
  });
  if (!d_weight) return;
  // d_weight_i += Σ_t dy_ti x_ti r_t: split over columns so that each sum runs over the tokens in
  // order whatever the thread count, in a local block of columns (the compiler cannot keep
  // d_weight in registers, since it might alias the inputs), added to d_weight once.
  constexpr int64_t kCols = 64;
  pool.parallel_for(dim, kCols, [&](int64_t b, int64_t e) {
    for (int64_t c0 = b; c0 < e; c0 += kCols) {
      T sum[kCols] = {};
      const int64_t n = std::min(kCols, e - c0);
      for (int64_t t = 0; t < N; ++t) {
        const T r = rstd[t];
        const T* x = in + t * dim + c0;
        const T* dy = d_out + t * dim + c0;
        if (n == kCols) {
          for (int64_t i = 0; i < kCols; ++i) sum[i] += dy[i] * x[i] * r;
        } else {
          for (int64_t i = 0; i < n; ++i) sum[i] += dy[i] * x[i] * r;
        }
      }
      for (int64_t i = 0; i < n; ++i) d_weight[c0 + i] += sum[i];
    }
  });
}

// ---- RoPE ----

template <class T>
void rope_forward(T* x, const Span* spans, int64_t n_spans, int64_t n_heads, int64_t head_dim,
                  float theta, ThreadPool& pool, std::span<const float> freq_factors,
                  kernels::RopeLayout layout, int64_t rot_dims) {
  rope_apply(x, spans, n_spans, n_heads, head_dim, theta, freq_factors, layout, rot_dims, false,
             pool);
}

template <class T>
void rope_backward(T* dx, const Span* spans, int64_t n_spans, int64_t n_heads, int64_t head_dim,
                   float theta, ThreadPool& pool, std::span<const float> freq_factors,
                   kernels::RopeLayout layout, int64_t rot_dims) {
  // A rotation's Jacobian is the rotation itself, so the gradient turns by the opposite angle.
  rope_apply(dx, spans, n_spans, n_heads, head_dim, theta, freq_factors, layout, rot_dims, true,
             pool);
}

// ---- attention ----

int64_t attention_probs_size(const Span* spans, int64_t n_spans, int64_t n_heads) {
  int64_t total = 0;
  for (int64_t s = 0; s < n_spans; ++s) total += spans[s].length * spans[s].length * n_heads;
  return total;
}

// Attention runs per (span, kv head) task: the group's query heads one after the other, each as
// a grid of blocks of query rows by blocks of keys, skipping the blocks above the diagonal
// (causal). The block products go to BLAS on the calling pool thread. Blocks are at most 2^18
// multiply-adds, which OpenBLAS computes on the calling thread: it threads larger products, and
// pool threads calling such products at once contend for its threads (whole spans as single
// products measured 7-50x slower on 2 cores). A task owns its span's rows of its kv head, so dk
// and dv need no locks, and every sum runs in a fixed order (heads, then blocks), whichever
// thread runs it.
int64_t attention_block(int64_t head_dim) {
  int64_t b = 64;
  while (b > 8 && b * b * head_dim > (int64_t(1) << 18)) b /= 2;
  return b;
}

template <class T>
void attention_forward(T* out, T* probs, const T* q, const T* k, const T* v, const Span* spans,
                       int64_t n_spans, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                       ThreadPool& pool) {
  const AttentionGeometry g =
      attention_geometry("attention_forward", spans, n_spans, n_heads, n_kv_heads, head_dim);
  const int hd = g.hd, qw = g.qw, kvw = g.kvw;
  const int64_t B = attention_block(head_dim);
  const T scale = T(1) / std::sqrt(T(head_dim));
  for_each_task<T>(pool, n_spans * n_kv_heads, 0, [&](int64_t task, T*) {
    const int64_t s = g.order[size_t(task / n_kv_heads)], kvh = task % n_kv_heads;
    const int64_t L = spans[s].length, base = spans[s].start;
    const T* ks = k + base * g.kv_width + kvh * head_dim;
    const T* vs = v + base * g.kv_width + kvh * head_dim;
    for (int64_t h = kvh * g.group; h < (kvh + 1) * g.group; ++h) {
      T* P = probs + g.probs_offset[size_t(s)] + h * L * L;
      const T* qh = q + base * g.q_width + h * head_dim;
      T* oh = out + base * g.q_width + h * head_dim;
      for (int64_t i0 = 0; i0 < L; i0 += B) {
        const int i1 = int(std::min(L, i0 + B)), m = int(i1 - i0);  // rows [i0, i1): keys < i1
        // S = scale Q K^T into the probability rows, then a causal softmax in place.
        for (int64_t j0 = 0; j0 < i1; j0 += B)
          gemm(CblasNoTrans, CblasTrans, m, int(std::min<int64_t>(B, i1 - j0)), hd, scale,
               qh + i0 * g.q_width, qw, ks + j0 * g.kv_width, kvw, T(0), P + i0 * L + j0, int(L));
        for (int64_t i = i0; i < i1; ++i) {
          T* row = P + i * L;
          const T max = *std::max_element(row, row + i + 1);
          double sum = 0;  // as kernels::reference::softmax
          for (int64_t j = 0; j <= i; ++j) {
            row[j] = std::exp(row[j] - max);
            sum += double(row[j]);
          }
          const T inv = T(1.0 / sum);
          for (int64_t j = 0; j <= i; ++j) row[j] *= inv;
          std::fill(row + i + 1, row + L, T(0));
        }
        // O = P V.
        for (int64_t j0 = 0; j0 < i1; j0 += B)
          gemm(CblasNoTrans, CblasNoTrans, m, hd, int(std::min<int64_t>(B, i1 - j0)), T(1),
               P + i0 * L + j0, int(L), vs + j0 * g.kv_width, kvw, T(j0 == 0 ? 0 : 1),
               oh + i0 * g.q_width, qw);
      }
    }
  });
}

template <class T>
void attention_backward(T* dq, T* dk, T* dv, const T* d_out, const T* q, const T* k, const T* v,
                        const T* probs, const Span* spans, int64_t n_spans, int64_t n_heads,
                        int64_t n_kv_heads, int64_t head_dim, ThreadPool& pool) {
  const AttentionGeometry g =
      attention_geometry("attention_backward", spans, n_spans, n_heads, n_kv_heads, head_dim);
  const int hd = g.hd, qw = g.qw, kvw = g.kvw;
  const int64_t B = attention_block(head_dim);
  const T scale = T(1) / std::sqrt(T(head_dim));
  // With S = scale Q K^T, P = softmax(S), O = P V:
  //   dP = dO V^T, dS = P ∘ (dP - rowsum(dP ∘ P)), dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO.
  // Scratch: dP, then dS, for one block of query rows against all their keys.
  const size_t scratch = size_t(std::min(g.longest, B) * g.longest);
  for_each_task<T>(pool, n_spans * n_kv_heads, scratch, [&](int64_t task, T* dS) {
    const int64_t s = g.order[size_t(task / n_kv_heads)], kvh = task % n_kv_heads;
    const int64_t L = spans[s].length, base = spans[s].start;
    const int64_t kv_off = base * g.kv_width + kvh * head_dim;
    const T* ks = k + kv_off;
    const T* vs = v + kv_off;
    T* dks = dk + kv_off;
    T* dvs = dv + kv_off;
    for (int64_t j = 0; j < L; ++j) {
      std::fill(dks + j * g.kv_width, dks + j * g.kv_width + head_dim, T(0));
      std::fill(dvs + j * g.kv_width, dvs + j * g.kv_width + head_dim, T(0));
    }
    for (int64_t h = kvh * g.group; h < (kvh + 1) * g.group; ++h) {
      const T* P = probs + g.probs_offset[size_t(s)] + h * L * L;
      const int64_t q_off = base * g.q_width + h * head_dim;
      for (int64_t i0 = 0; i0 < L; i0 += B) {
        const int i1 = int(std::min(L, i0 + B)), m = int(i1 - i0);
        const T* qb = q + q_off + i0 * g.q_width;
        const T* dob = d_out + q_off + i0 * g.q_width;
        T* dqb = dq + q_off + i0 * g.q_width;
        const T* Pb = P + i0 * L;
        // dP (then dS) rows have i1 columns: keys 0..i1-1.
        for (int64_t j0 = 0; j0 < i1; j0 += B)
          gemm(CblasNoTrans, CblasTrans, m, int(std::min<int64_t>(B, i1 - j0)), hd, T(1), dob, qw,
               vs + j0 * g.kv_width, kvw, T(0), dS + j0, i1);
        for (int64_t r = 0; r < m; ++r) {
          const T* p = Pb + r * L;
          T* d = dS + r * i1;
          const int64_t n_keys = i0 + r + 1;
          T rowsum = 0;
          for (int64_t j = 0; j < n_keys; ++j) rowsum += d[j] * p[j];
          for (int64_t j = 0; j < n_keys; ++j) d[j] = p[j] * (d[j] - rowsum) * scale;
          std::fill(d + n_keys, d + i1, T(0));
        }
        for (int64_t j0 = 0; j0 < i1; j0 += B) {
          const int n = int(std::min<int64_t>(B, i1 - j0));
          gemm(CblasNoTrans, CblasNoTrans, m, hd, n, T(1), dS + j0, i1, ks + j0 * g.kv_width, kvw,
               T(j0 == 0 ? 0 : 1), dqb, qw);
          gemm(CblasTrans, CblasNoTrans, n, hd, m, T(1), dS + j0, i1, qb, qw, T(1),
               dks + j0 * g.kv_width, kvw);
          gemm(CblasTrans, CblasNoTrans, n, hd, m, T(1), Pb + j0, int(L), dob, qw, T(1),
               dvs + j0 * g.kv_width, kvw);
        }
      }
    }
  });
}

// ---- SwiGLU ----

template <class T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t count, ThreadPool& pool) {
  require(count >= 0, "swiglu_forward", "negative count");
  pool.parallel_for(count, 256, [&](int64_t b, int64_t e) {
    // Same expression as kernels::reference::silu_mul.
    for (int64_t i = b; i < e; ++i) out[i] = gate[i] / (T(1) + std::exp(-gate[i])) * up[i];
  });
}

template <class T>
void swiglu_backward(T* d_gate, T* d_up, const T* d_out, const T* gate, const T* up, int64_t count,
                     ThreadPool& pool) {
  require(count >= 0, "swiglu_backward", "negative count");
  // silu(g) = g σ(g), silu'(g) = σ(g) (1 + g (1 - σ(g))); σ underflows to 0 for very negative g,
  // where both are 0, without a NaN.
  pool.parallel_for(count, 256, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T g = gate[i];
      const T sig = T(1) / (T(1) + std::exp(-g));
      d_gate[i] = d_out[i] * up[i] * sig * (T(1) + g * (T(1) - sig));
      d_up[i] = d_out[i] * g * sig;
    }
  });
}

// ---- losses ----

template <class T>
double cross_entropy(T* d_logits, const T* logits, const int32_t* targets, int64_t M, int64_t V,
                     double grad_scale, ThreadPool& pool) {
  require_non_negative("cross_entropy", M, V);
  require(V > 0 || M == 0, "cross_entropy", "empty vocabulary");
  for (int64_t r = 0; r < M; ++r)
    if (targets[r] >= V)
      throw std::out_of_range("train::cross_entropy: target " + std::to_string(targets[r]) +
                              " outside the vocabulary of " + std::to_string(V));
  // Per-row losses summed in row order afterwards: the same total for any thread count.
  std::vector<double> row_loss(size_t(M), 0.0);
  pool.parallel_for(M, 4, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* x = logits + r * V;
      T* d = d_logits + r * V;
      if (targets[r] < 0) {
        std::fill(d, d + V, T(0));
        continue;
      }
      const T max = *std::max_element(x, x + V);
      double sum = 0;
      for (int64_t j = 0; j < V; ++j) {
        d[j] = std::exp(x[j] - max);
        sum += double(d[j]);
      }
      row_loss[size_t(r)] = double(max) + std::log(sum) - double(x[targets[r]]);
      const T f = T(grad_scale / sum);
      for (int64_t j = 0; j < V; ++j) d[j] *= f;
      d[targets[r]] -= T(grad_scale);
    }
  });
  double total = 0;
  for (double l : row_loss) total += l;
  return total;
}

template <class T>
double kl_distill(T* d_student, const T* student, const T* teacher, const uint8_t* mask, int64_t M,
                  int64_t V, float temp, double grad_scale, ThreadPool& pool) {
  require_non_negative("kl_distill", M, V);
  require(V > 0 || M == 0, "kl_distill", "empty vocabulary");
  require(std::isfinite(temp) && temp > 0, "kl_distill", "temperature must be positive");
  const T inv_temp = T(1) / T(temp);
  const double temp2 = double(temp) * double(temp);
  const T g = T(double(temp) * grad_scale);
  std::vector<double> row_loss(size_t(M), 0.0);
  // Scratch per thread: the teacher's unnormalised probabilities of one row.
  std::vector<std::vector<T>> scratch(size_t(pool.size()));
  pool.run([&](int thread, int n_threads) {
    const int64_t b = M * thread / n_threads, e = M * (thread + 1) / n_threads;
    if (b == e) return;
    std::vector<T>& et = scratch[size_t(thread)];
    et.resize(size_t(V));
    for (int64_t r = b; r < e; ++r) {
      T* d = d_student + r * V;
      if (mask && !mask[r]) {
        std::fill(d, d + V, T(0));
        continue;
      }
      const T* xs = student + r * V;
      const T* xt = teacher + r * V;
      T max_s = -std::numeric_limits<T>::infinity(), max_t = max_s;
      for (int64_t j = 0; j < V; ++j) {
        max_s = std::max(max_s, xs[j] * inv_temp);
        max_t = std::max(max_t, xt[j] * inv_temp);
      }
      // KL(p_t || p_s) = Σ p_t (b - a) - lse(b) + lse(a) with a, b the tempered logits.
      double sum_s = 0, sum_t = 0, cross = 0;
      for (int64_t j = 0; j < V; ++j) {
        const T a = xs[j] * inv_temp, bt = xt[j] * inv_temp;
        d[j] = std::exp(a - max_s);
        et[size_t(j)] = std::exp(bt - max_t);
        sum_s += double(d[j]);
        sum_t += double(et[size_t(j)]);
        // A teacher probability of 0 (a -inf logit) contributes nothing, not 0 * inf.
        if (et[size_t(j)] != T(0)) cross += double(et[size_t(j)]) * (double(bt) - double(a));
      }
      const double kl =
          cross / sum_t - (double(max_t) + std::log(sum_t)) + (double(max_s) + std::log(sum_s));
      row_loss[size_t(r)] = temp2 * kl;
      const T fs = T(1.0 / sum_s), ft = T(1.0 / sum_t);
      for (int64_t j = 0; j < V; ++j) d[j] = g * (d[j] * fs - et[size_t(j)] * ft);
    }
  });
  double total = 0;
  for (double l : row_loss) total += l;
  return total;
}

// ---- instantiations ----

#define SHRIKE_TRAIN_OPS(T)                                                                      \
  template void linear_forward<T>(T*, const T*, const T*, const T*, int64_t, int64_t, int64_t);  \
  template void linear_backward<T>(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t,   \
                                   int64_t);                                                     \
  template void embedding_forward<T>(T*, const int32_t*, const T*, int64_t, int64_t);            \
  template void embedding_backward<T>(T*, const int32_t*, const T*, int64_t, int64_t);           \
  template void rmsnorm_forward<T>(T*, T*, const T*, const T*, int64_t, int64_t, float,          \
                                   ThreadPool&);                                                 \
  template void rmsnorm_backward<T>(T*, T*, const T*, const T*, const T*, const T*, int64_t,     \
                                    int64_t, ThreadPool&);                                       \
  template void rope_forward<T>(T*, const Span*, int64_t, int64_t, int64_t, float, ThreadPool&,  \
                                std::span<const float>, kernels::RopeLayout, int64_t);           \
  template void rope_backward<T>(T*, const Span*, int64_t, int64_t, int64_t, float, ThreadPool&, \
                                 std::span<const float>, kernels::RopeLayout, int64_t);          \
  template void attention_forward<T>(T*, T*, const T*, const T*, const T*, const Span*, int64_t, \
                                     int64_t, int64_t, int64_t, ThreadPool&);                    \
  template void attention_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*,        \
                                      const T*, const Span*, int64_t, int64_t, int64_t, int64_t, \
                                      ThreadPool&);                                              \
  template void swiglu_forward<T>(T*, const T*, const T*, int64_t, ThreadPool&);                 \
  template void swiglu_backward<T>(T*, T*, const T*, const T*, const T*, int64_t, ThreadPool&);  \
  template double cross_entropy<T>(T*, const T*, const int32_t*, int64_t, int64_t, double,       \
                                   ThreadPool&);                                                 \
  template double kl_distill<T>(T*, const T*, const T*, const uint8_t*, int64_t, int64_t, float, \
                                double, ThreadPool&);

SHRIKE_TRAIN_OPS(float)
SHRIKE_TRAIN_OPS(double)
#undef SHRIKE_TRAIN_OPS

}  // namespace shrike::train
