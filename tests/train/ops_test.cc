// The training ops: every backward pass against central finite differences of its forward pass
// (in double), the forward passes against the inference kernels they must agree with (in float),
// float against double, determinism across runs and thread counts, += versus overwrite.
#include "train/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace shrike::train {
namespace {

using Vec = std::vector<double>;

ThreadPool& pool2() {
  static ThreadPool pool(2);
  return pool;
}

// For the thousands of forward passes of a finite-difference check: one thread, no hand-offs to
// a worker (which cost milliseconds each on a loaded machine). The ops give the same bits for
// any thread count (DeterministicAcrossRunsAndThreadCounts).
ThreadPool& pool1() {
  static ThreadPool pool(1);
  return pool;
}

size_t sz(int64_t n) {
  return static_cast<size_t>(n);
}

Vec randn(size_t n, std::mt19937& rng, double scale = 1.0) {
  std::normal_distribution<double> d(0.0, scale);
  Vec v(n);
  for (auto& e : v) e = d(rng);
  return v;
}

template <class T>
std::vector<T> cast(const Vec& v) {
  return std::vector<T>(v.begin(), v.end());
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// max |analytic - numeric| / max(1, max |numeric|) over the elements of x, numeric being the
// central difference (loss(x + eps e_i) - loss(x - eps e_i)) / 2 eps.
//
// Tolerance: everything runs in double. The truncation error of a central difference is
// eps² f''' / 6 ~ 1e-12 for these O(1) smooth functions; rounding contributes ~ 1e-16 |loss| / eps
// ~ 1e-10 |loss| with |loss| ~ 10 (observed: below 1e-8). Both are far below 1e-6, while any
// mistake in a formula (a missing term, a wrong index, a wrong scale) shows as an O(1e-2..1)
// relative error.
constexpr double kEps = 1e-6;
constexpr double kGradTol = 1e-6;

// stride > 1 checks every stride-th element only (for the larger inputs).
template <class F>
double grad_error(Vec& x, const Vec& analytic, F&& loss, size_t stride = 1) {
  double max_diff = 0, max_num = 0;
  for (size_t i = 0; i < x.size(); i += stride) {
    const double saved = x[i];
    x[i] = saved + kEps;
    const double up = loss();
    x[i] = saved - kEps;
    const double down = loss();
    x[i] = saved;
    const double num = (up - down) / (2 * kEps);
    max_diff = std::max(max_diff, std::fabs(analytic[i] - num));
    max_num = std::max(max_num, std::fabs(num));
  }
  return max_diff / std::max(1.0, max_num);
}

// ---- 1. gradients against finite differences ----

TEST(TrainOpsGrad, Linear) {
  std::mt19937 rng(1);
  const int64_t N = 5, in = 13, out = 11;
  for (bool with_bias : {true, false}) {
    SCOPED_TRACE(with_bias ? "bias" : "no bias");
    Vec x = randn(sz(N * in), rng), w = randn(sz(out * in), rng), b = randn(sz(out), rng);
    const Vec R = randn(sz(N * out), rng);
    auto loss = [&] {
      Vec y(sz(N * out));
      linear_forward(y.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, N, in, out);
      return dot(y, R);
    };
    Vec d_in(x.size(), 0.0), d_w(w.size(), 0.0), d_b(b.size(), 0.0);
    linear_backward(d_in.data(), d_w.data(), with_bias ? d_b.data() : nullptr, R.data(), x.data(),
                    w.data(), N, in, out);
    EXPECT_LT(grad_error(x, d_in, loss), kGradTol);
    EXPECT_LT(grad_error(w, d_w, loss), kGradTol);
    if (with_bias) {
      EXPECT_LT(grad_error(b, d_b, loss), kGradTol);
    }

    // Without d_in (the first layer's input needs none) the weight gradient is the same.
    Vec d_w2(w.size(), 0.0);
    linear_backward<double>(nullptr, d_w2.data(), nullptr, R.data(), x.data(), w.data(), N, in,
                            out);
    EXPECT_EQ(d_w2, d_w);
    // Without d_weight (a frozen weight), d_in is the same.
    Vec d_in2(x.size(), 0.0);
    linear_backward<double>(d_in2.data(), nullptr, nullptr, R.data(), x.data(), w.data(), N, in,
                            out);
    EXPECT_EQ(d_in2, d_in);
  }
}

TEST(TrainOpsGrad, Embedding) {
  std::mt19937 rng(2);
  const int64_t vocab = 6, dim = 11;
  const std::vector<int32_t> tokens = {3, 1, 3, 0, 5, 3, 2};  // 4 unused, 3 three times
  const int64_t N = int64_t(tokens.size());
  Vec table = randn(sz(vocab * dim), rng);
  const Vec R = randn(sz(N * dim), rng);
  auto loss = [&] {
    Vec y(sz(N * dim));
    embedding_forward(y.data(), tokens.data(), table.data(), N, dim);
    return dot(y, R);
  };
  Vec d_table(table.size(), 0.0);
  embedding_backward(d_table.data(), tokens.data(), R.data(), N, dim);
  EXPECT_LT(grad_error(table, d_table, loss), kGradTol);
  for (int64_t i = 0; i < dim; ++i) EXPECT_EQ(d_table[sz(4 * dim + i)], 0.0);
}

// dim 70: the weight gradient's full 64-column block and a tail, on different threads.
TEST(TrainOpsGrad, Rmsnorm) {
  std::mt19937 rng(3);
  for (int64_t dim : {19, 70}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    const int64_t N = 4;
    Vec x = randn(sz(N * dim), rng), w = randn(sz(dim), rng);
    const Vec R = randn(sz(N * dim), rng);
    auto loss = [&] {
      Vec y(sz(N * dim)), rstd(sz(N));
      rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, dim, 1e-5f, pool1());
      return dot(y, R);
    };
    Vec y(sz(N * dim)), rstd(sz(N));
    rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, dim, 1e-5f, pool2());
    Vec d_x(x.size(), 0.0), d_w(w.size(), 0.0);
    rmsnorm_backward(d_x.data(), d_w.data(), R.data(), x.data(), w.data(), rstd.data(), N, dim,
                     pool2());
    EXPECT_LT(grad_error(x, d_x, loss), kGradTol);
    EXPECT_LT(grad_error(w, d_w, loss), kGradTol);
    // Without d_weight (a frozen norm), d_in is the same.
    Vec d_x2(x.size(), 0.0);
    rmsnorm_backward<double>(d_x2.data(), nullptr, R.data(), x.data(), w.data(), rstd.data(), N,
                             dim, pool2());
    EXPECT_EQ(d_x2, d_x);
  }
}

TEST(TrainOpsGrad, Rope) {
  std::mt19937 rng(4);
  // Token 3 lies in no span: neither rotated nor its gradient touched.
  const std::vector<Span> spans = {{0, 3}, {4, 6}, {10, 2}};
  const int64_t N = 12, n_heads = 3, head_dim = 8;
  Vec x = randn(sz(N * n_heads * head_dim), rng);
  const Vec R = randn(x.size(), rng);
  auto loss = [&] {
    Vec y = x;
    rope_forward(y.data(), spans.data(), int64_t(spans.size()), n_heads, head_dim, 10000.0f,
                 pool1());
    return dot(y, R);
  };
  Vec d_x = R;
  rope_backward(d_x.data(), spans.data(), int64_t(spans.size()), n_heads, head_dim, 10000.0f,
                pool2());
  EXPECT_LT(grad_error(x, d_x, loss), kGradTol);
  // Not the identity (the check above would pass for an op that does nothing, given that).
  EXPECT_GT(std::fabs(loss() - dot(x, R)), 1e-3);
}

// The middle span is longer than attention's 64-row blocks: two query blocks, one ragged, and the
// key block below the diagonal. Every 5th element is checked (5 is prime to the row widths, so
// all heads, dimensions and tokens are sampled).
TEST(TrainOpsGrad, AttentionGqaRaggedSpans) {
  std::mt19937 rng(5);
  const std::vector<Span> spans = {{0, 5}, {5, 67}, {72, 6}};
  const int64_t N = 78, n_heads = 4, n_kv = 2, hd = 6, n_spans = int64_t(spans.size());
  Vec q = randn(sz(N * n_heads * hd), rng), k = randn(sz(N * n_kv * hd), rng),
      v = randn(sz(N * n_kv * hd), rng);
  const Vec R = randn(q.size(), rng);
  const int64_t probs_size = attention_probs_size(spans.data(), n_spans, n_heads);
  ASSERT_EQ(probs_size, (25 + 67 * 67 + 36) * n_heads);
  auto loss = [&] {
    Vec out(q.size()), probs(sz(probs_size));
    attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), spans.data(), n_spans,
                      n_heads, n_kv, hd, pool1());
    return dot(out, R);
  };
  Vec out(q.size()), probs(sz(probs_size), 7.0);
  attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), spans.data(), n_spans,
                    n_heads, n_kv, hd, pool2());
  // probs: causal softmax rows, upper triangle zero.
  for (int64_t s = 0, off = 0; s < n_spans;
       off += spans[sz(s)].length * spans[sz(s)].length * n_heads, ++s) {
    const int64_t L = spans[sz(s)].length;
    for (int64_t h = 0; h < n_heads; ++h)
      for (int64_t i = 0; i < L; ++i) {
        double sum = 0;
        for (int64_t j = 0; j < L; ++j) {
          const double p = probs[sz(off + (h * L + i) * L + j)];
          if (j > i) {
            EXPECT_EQ(p, 0.0);
          }
          sum += p;
        }
        EXPECT_NEAR(sum, 1.0, 1e-12);
      }
  }
  // Overwritten, not accumulated: start from garbage.
  Vec dq(q.size(), 7.0), dk(k.size(), 7.0), dv(v.size(), 7.0);
  attention_backward(dq.data(), dk.data(), dv.data(), R.data(), q.data(), k.data(), v.data(),
                     probs.data(), spans.data(), n_spans, n_heads, n_kv, hd, pool2());
  EXPECT_LT(grad_error(q, dq, loss, 5), kGradTol);
  EXPECT_LT(grad_error(k, dk, loss, 5), kGradTol);
  EXPECT_LT(grad_error(v, dv, loss, 5), kGradTol);
}

TEST(TrainOpsGrad, Swiglu) {
  std::mt19937 rng(6);
  const int64_t count = 37;
  Vec gate = randn(sz(count), rng, 3.0), up = randn(sz(count), rng);
  gate[0] = -40.0;  // sigmoid underflows towards 0
  gate[1] = 30.0;
  gate[2] = 0.0;
  const Vec R = randn(sz(count), rng);
  auto loss = [&] {
    Vec y(sz(count));
    swiglu_forward(y.data(), gate.data(), up.data(), count, pool1());
    return dot(y, R);
  };
  Vec d_gate(sz(count), 7.0), d_up(sz(count), 7.0);
  swiglu_backward(d_gate.data(), d_up.data(), R.data(), gate.data(), up.data(), count, pool2());
  EXPECT_LT(grad_error(gate, d_gate, loss), kGradTol);
  EXPECT_LT(grad_error(up, d_up, loss), kGradTol);
}

TEST(TrainOpsGrad, CrossEntropyWithIgnoredRows) {
  std::mt19937 rng(7);
  const int64_t M = 6, V = 11;
  const std::vector<int32_t> targets = {2, -1, 10, 0, -1, 5};
  const double grad_scale = 0.37;
  Vec logits = randn(sz(M * V), rng, 3.0);
  Vec scratch(logits.size());
  auto loss = [&] {
    return grad_scale *
           cross_entropy(scratch.data(), logits.data(), targets.data(), M, V, grad_scale, pool1());
  };
  Vec d(logits.size(), 7.0);
  const double got =
      cross_entropy(d.data(), logits.data(), targets.data(), M, V, grad_scale, pool2());
  EXPECT_LT(grad_error(logits, d, loss), kGradTol);
  for (int64_t j = 0; j < V; ++j) EXPECT_EQ(d[sz(1 * V + j)], 0.0);

  // The loss itself: -log softmax(x)[target], summed over the counted rows (small logits: the
  // naive formula is exact enough).
  double want = 0;
  for (int64_t r = 0; r < M; ++r) {
    if (targets[sz(r)] < 0) continue;
    double sum = 0;
    for (int64_t j = 0; j < V; ++j) sum += std::exp(logits[sz(r * V + j)]);
    want -= std::log(std::exp(logits[sz(r * V + targets[sz(r)])]) / sum);
  }
  EXPECT_NEAR(got, want, 1e-12 * want);

  // Stable: shifting every logit by 1000 (exp overflows) changes nothing.
  for (auto& x : logits) x += 1000.0;
  Vec d_shift(logits.size());
  EXPECT_NEAR(
      cross_entropy(d_shift.data(), logits.data(), targets.data(), M, V, grad_scale, pool2()), want,
      1e-9 * want);
  for (size_t i = 0; i < d.size(); ++i) EXPECT_NEAR(d_shift[i], d[i], 1e-12);
  std::vector<float> logits_f = cast<float>(logits), d_f(logits.size());
  EXPECT_NEAR(cross_entropy(d_f.data(), logits_f.data(), targets.data(), M, V, grad_scale, pool2()),
              want, 1e-2);  // float logits near 1000 carry ~3e-5 each
}

// Reference: temp² Σ_rows KL(softmax(t / temp) || softmax(s / temp)), straight from the definition.
double kl_reference(const Vec& s, const Vec& t, const std::vector<uint8_t>& mask, int64_t M,
                    int64_t V, double temp) {
  double total = 0;
  for (int64_t r = 0; r < M; ++r) {
    if (!mask.empty() && !mask[sz(r)]) continue;
    double zs = 0, zt = 0;
    for (int64_t j = 0; j < V; ++j) {
      zs += std::exp(s[sz(r * V + j)] / temp);
      zt += std::exp(t[sz(r * V + j)] / temp);
    }
    for (int64_t j = 0; j < V; ++j) {
      const double ps = std::exp(s[sz(r * V + j)] / temp) / zs;
      const double pt = std::exp(t[sz(r * V + j)] / temp) / zt;
      total += temp * temp * pt * std::log(pt / ps);
    }
  }
  return total;
}

TEST(TrainOpsGrad, KlDistillMaskedWithTemperature) {
  std::mt19937 rng(8);
  const int64_t M = 5, V = 9;
  const std::vector<uint8_t> mask = {1, 0, 1, 1, 0};
  const float temp = 2.5f;
  const double grad_scale = 0.5;
  Vec student = randn(sz(M * V), rng, 3.0);
  const Vec teacher = randn(sz(M * V), rng, 3.0);
  Vec scratch(student.size());
  for (bool masked : {true, false}) {
    SCOPED_TRACE(masked ? "mask" : "no mask");
    const uint8_t* m = masked ? mask.data() : nullptr;
    auto loss = [&] {
      return grad_scale * kl_distill(scratch.data(), student.data(), teacher.data(), m, M, V, temp,
                                     grad_scale, pool1());
    };
    Vec d(student.size(), 7.0);
    const double got =
        kl_distill(d.data(), student.data(), teacher.data(), m, M, V, temp, grad_scale, pool2());
    const double want =
        kl_reference(student, teacher, masked ? mask : std::vector<uint8_t>{}, M, V, temp);
    EXPECT_GT(want, 0.1);
    EXPECT_NEAR(got, want, 1e-12 * want);
    EXPECT_LT(grad_error(student, d, loss), kGradTol);
    if (masked) {
      for (int64_t j = 0; j < V; ++j) EXPECT_EQ(d[sz(4 * V + j)], 0.0);
    }
  }
  // A student equal to its teacher: zero loss, zero gradient.
  Vec d(student.size());
  EXPECT_NEAR(
      kl_distill(d.data(), teacher.data(), teacher.data(), nullptr, M, V, temp, 1.0, pool2()), 0.0,
      1e-12);
  for (double g : d) EXPECT_NEAR(g, 0.0, 1e-15);
}

// ---- 2. forward passes against the inference kernels (float) ----

// |got - want| <= tol * max(1, |want|) element by element.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(double(want[i]))))
        << what << " element " << i;
}

TEST(TrainOpsMatchInference, Rmsnorm) {
  std::mt19937 rng(9);
  for (int64_t dim : {37, 256}) {
    const int64_t N = 7;
    const auto x = cast<float>(randn(sz(N * dim), rng, 3.0));
    const auto w = cast<float>(randn(sz(dim), rng));
    std::vector<float> got(x.size()), rstd(sz(N)), want(x.size());
    rmsnorm_forward(got.data(), rstd.data(), x.data(), w.data(), N, dim, 1e-5f, pool2());
    for (int64_t t = 0; t < N; ++t)
      kernels::rmsnorm(want.data() + t * dim, x.data() + t * dim, w.data(), dim, 1e-5f);
    // The dispatched kernel sums squares in f32 lanes (we: double): ~1e-6 relative.
    expect_close(got, want, 1e-5, "rmsnorm dim " + std::to_string(dim));
  }
}

TEST(TrainOpsMatchInference, RopeAdjacentAsTheModelBuildsIt) {
  std::mt19937 rng(10);
  const std::vector<Span> spans = {{0, 40}, {40, 25}};
  const int64_t N = 65, n_heads = 3, head_dim = 32;
  const float theta = 10000.0f;
  const auto x = cast<float>(randn(sz(N * n_heads * head_dim), rng));
  std::vector<float> got = x, want = x;
  rope_forward(got.data(), spans.data(), 2, n_heads, head_dim, theta, pool2());
  for (const Span& s : spans)
    for (int64_t p = 0; p < s.length; ++p) {
      // The table Model::forward_batch builds (rope_dims = head_dim, no frequency factors).
      std::vector<float> cs(sz(head_dim));
      for (int64_t i = 0; i < head_dim / 2; ++i) {
        const float freq = 1.0f / std::pow(theta, float(2 * i) / float(head_dim));
        const float angle = float(p) * freq;
        cs[sz(2 * i)] = std::cos(angle);
        cs[sz(2 * i + 1)] = std::sin(angle);
      }
      kernels::rope(want.data() + (s.start + p) * n_heads * head_dim, n_heads, head_dim, head_dim,
                    cs.data(), kernels::RopeLayout::Adjacent);
    }
  expect_close(got, want, 1e-6, "rope");

  // The convention itself, independently: pair i of a unit vector at position p turns to
  // (cos a, sin a), a = p theta^(-2i/head_dim) (float angles: ~1e-5 rad at p < 40).
  std::vector<float> unit(sz(40 * head_dim));
  for (int64_t p = 0; p < 40; ++p)
    for (int64_t i = 0; i < head_dim / 2; ++i) unit[sz(p * head_dim + 2 * i)] = 1.0f;
  const Span one{0, 40};
  rope_forward(unit.data(), &one, 1, 1, head_dim, theta, pool2());
  for (int64_t p = 0; p < 40; ++p)
    for (int64_t i = 0; i < head_dim / 2; ++i) {
      const double a = double(p) * std::pow(double(theta), -2.0 * double(i) / double(head_dim));
      EXPECT_NEAR(unit[sz(p * head_dim + 2 * i)], std::cos(a), 1e-4) << p << " " << i;
      EXPECT_NEAR(unit[sz(p * head_dim + 2 * i + 1)], std::sin(a), 1e-4) << p << " " << i;
    }
}

// Spans longer than attention's blocks (64 query rows at head_dim 32, 32 at 128), GQA.
TEST(TrainOpsMatchInference, AttentionOverABlockTable) {
  std::mt19937 rng(11);
  struct Case {
    int64_t head_dim;
    std::vector<Span> spans;
  };
  for (const Case& c : {Case{32, {{0, 37}, {37, 150}}}, Case{128, {{0, 70}, {70, 9}}}}) {
    const int64_t hd = c.head_dim, n_heads = 4, n_kv = 2, n_spans = int64_t(c.spans.size());
    const int64_t N = c.spans.back().start + c.spans.back().length;
    SCOPED_TRACE("head_dim " + std::to_string(hd));
    const auto q = cast<float>(randn(sz(N * n_heads * hd), rng));
    const auto k = cast<float>(randn(sz(N * n_kv * hd), rng));
    const auto v = cast<float>(randn(sz(N * n_kv * hd), rng));
    std::vector<float> got(q.size()),
        probs(sz(attention_probs_size(c.spans.data(), n_spans, n_heads)));
    attention_forward(got.data(), probs.data(), q.data(), k.data(), v.data(), c.spans.data(),
                      n_spans, n_heads, n_kv, hd, pool2());
    std::vector<float> want(q.size());
    const int64_t block = 16;  // position-major rows, several blocks per span
    for (const Span& s : c.spans) {
      std::vector<const float*> kb, vb;
      for (int64_t p = 0; p < s.length; p += block) {
        kb.push_back(k.data() + (s.start + p) * n_kv * hd);
        vb.push_back(v.data() + (s.start + p) * n_kv * hd);
      }
      const kernels::KvRows kr{kb.data(), block, n_kv * hd, hd},
          vr{vb.data(), block, n_kv * hd, hd};
      const kernels::AttentionShape shape{s.length, 0,  n_heads,
                                          n_kv,     hd, 1.0f / std::sqrt(float(hd))};
      kernels::attention(shape, q.data() + s.start * n_heads * hd, kr, vr,
                         want.data() + s.start * n_heads * hd, pool2());
    }
    // Outputs are convex combinations of O(1) values; f32 dot products in another order: 1e-5.
    expect_close(got, want, 1e-5, "attention");
  }
}

TEST(TrainOpsMatchInference, SwigluIsSiluMul) {
  std::mt19937 rng(12);
  const int64_t count = 1000;
  const auto g = cast<float>(randn(sz(count), rng, 4.0)), u = cast<float>(randn(sz(count), rng));
  std::vector<float> got(sz(count)), want(sz(count));
  swiglu_forward(got.data(), g.data(), u.data(), count, pool2());
  kernels::silu_mul(want.data(), g.data(), u.data(), count);
  expect_close(got, want, 1e-6, "swiglu");
}

// ---- 3, 4. float against double; determinism ----

// Every op, forward and backward, each on its own random inputs (not chained, so that float
// errors do not compound). Returns every output, widened to double.
template <class T>
std::vector<Vec> run_every_op(ThreadPool& pool) {
  std::mt19937 rng(13);
  const std::vector<Span> spans = {{0, 50}, {50, 77}, {127, 33}};
  const int64_t N = 160, dim = 48, n_heads = 4, n_kv = 2, hd = 12, ffn = 40, V = 37, vocab = 29;
  auto rnd = [&](int64_t n, double scale = 1.0) { return cast<T>(randn(sz(n), rng, scale)); };
  auto widen = [](const std::vector<T>& v) { return Vec(v.begin(), v.end()); };
  std::vector<Vec> outs;

  std::vector<int32_t> tokens(sz(N));
  for (auto& t : tokens) t = int32_t(rng() % uint32_t(vocab));
  const auto table = rnd(vocab * dim), d_emb = rnd(N * dim);
  std::vector<T> emb(sz(N * dim)), d_table(table.size(), T(0));
  embedding_forward(emb.data(), tokens.data(), table.data(), N, dim);
  embedding_backward(d_table.data(), tokens.data(), d_emb.data(), N, dim);
  outs.push_back(widen(emb));
  outs.push_back(widen(d_table));

  const auto x = rnd(N * dim, 2.0), w_norm = rnd(dim), d_norm = rnd(N * dim);
  std::vector<T> normed(x.size()), rstd(sz(N)), d_x(x.size(), T(0)), d_wn(sz(dim), T(0));
  rmsnorm_forward(normed.data(), rstd.data(), x.data(), w_norm.data(), N, dim, 1e-5f, pool);
  rmsnorm_backward(d_x.data(), d_wn.data(), d_norm.data(), x.data(), w_norm.data(), rstd.data(), N,
                   dim, pool);
  outs.insert(outs.end(), {widen(normed), widen(rstd), widen(d_x), widen(d_wn)});

  const auto w = rnd(ffn * dim, 0.2), b = rnd(ffn), d_lin = rnd(N * ffn);
  std::vector<T> lin(sz(N * ffn)), d_lin_in(x.size(), T(0)), d_w(w.size(), T(0)),
      d_b(b.size(), T(0));
  linear_forward(lin.data(), x.data(), w.data(), b.data(), N, dim, ffn);
  linear_backward(d_lin_in.data(), d_w.data(), d_b.data(), d_lin.data(), x.data(), w.data(), N, dim,
                  ffn);
  outs.insert(outs.end(), {widen(lin), widen(d_lin_in), widen(d_w), widen(d_b)});

  auto q = rnd(N * n_heads * hd), k = rnd(N * n_kv * hd);
  const auto v = rnd(N * n_kv * hd), d_att = rnd(N * n_heads * hd);
  rope_forward(q.data(), spans.data(), 3, n_heads, hd, 10000.0f, pool);
  rope_forward(k.data(), spans.data(), 3, n_kv, hd, 10000.0f, pool);
  outs.insert(outs.end(), {widen(q), widen(k)});
  std::vector<T> att(q.size()), probs(sz(attention_probs_size(spans.data(), 3, n_heads))),
      dq(q.size()), dk(k.size()), dv(v.size());
  attention_forward(att.data(), probs.data(), q.data(), k.data(), v.data(), spans.data(), 3,
                    n_heads, n_kv, hd, pool);
  attention_backward(dq.data(), dk.data(), dv.data(), d_att.data(), q.data(), k.data(), v.data(),
                     probs.data(), spans.data(), 3, n_heads, n_kv, hd, pool);
  rope_backward(dq.data(), spans.data(), 3, n_heads, hd, 10000.0f, pool);
  outs.insert(outs.end(), {widen(att), widen(probs), widen(dq), widen(dk), widen(dv)});

  const auto gate = rnd(N * ffn, 2.0), up = rnd(N * ffn), d_sw = rnd(N * ffn);
  std::vector<T> sw(gate.size()), d_gate(gate.size()), d_up(gate.size());
  swiglu_forward(sw.data(), gate.data(), up.data(), N * ffn, pool);
  swiglu_backward(d_gate.data(), d_up.data(), d_sw.data(), gate.data(), up.data(), N * ffn, pool);
  outs.insert(outs.end(), {widen(sw), widen(d_gate), widen(d_up)});

  const auto logits = rnd(N * V, 3.0), teacher = rnd(N * V, 3.0);
  std::vector<int32_t> targets(sz(N));
  std::vector<uint8_t> mask(sz(N));
  for (int64_t r = 0; r < N; ++r) {
    targets[sz(r)] = r % 7 == 0 ? -1 : int32_t(rng() % uint32_t(V));
    mask[sz(r)] = r % 5 != 0;
  }
  std::vector<T> d_ce(logits.size()), d_kl(logits.size());
  const double ce = cross_entropy(d_ce.data(), logits.data(), targets.data(), N, V, 1.0 / N, pool);
  const double kl = kl_distill(d_kl.data(), logits.data(), teacher.data(), mask.data(), N, V, 2.0f,
                               1.0 / N, pool);
  outs.insert(outs.end(), {Vec{ce}, widen(d_ce), Vec{kl}, widen(d_kl)});
  return outs;
}

TEST(TrainOps, FloatAgreesWithDouble) {
  const auto f = run_every_op<float>(pool2());
  const auto d = run_every_op<double>(pool2());
  ASSERT_EQ(f.size(), d.size());
  for (size_t i = 0; i < f.size(); ++i) {
    double max_diff = 0, max_ref = 0;
    for (size_t j = 0; j < f[i].size(); ++j) {
      max_diff = std::max(max_diff, std::fabs(f[i][j] - d[i][j]));
      max_ref = std::max(max_ref, std::fabs(d[i][j]));
    }
    // Inputs are the same floats; float rounds each of up to ~200 accumulated terms at 6e-8:
    // a few 1e-6 of the output's scale (observed: below 5e-7).
    EXPECT_LT(max_diff / std::max(1.0, max_ref), 2e-5) << "output " << i;
    EXPECT_GT(max_ref, 0.0) << "output " << i;
  }
}

bool same_bits(const std::vector<Vec>& a, const std::vector<Vec>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() ||
        std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(double)) != 0)
      return false;
  return true;
}

TEST(TrainOps, DeterministicAcrossRunsAndThreadCounts) {
  const auto first = run_every_op<float>(pool2());
  EXPECT_TRUE(same_bits(first, run_every_op<float>(pool2())));
  // Each output element is computed by one task in a fixed order, so the thread count does not
  // matter either (matrix products go to BLAS, which does not see the pool).
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    EXPECT_TRUE(same_bits(first, run_every_op<float>(pool))) << threads << " threads";
  }
}

// ---- 5. accumulation (+=) versus overwrite ----

// Runs backward() twice from start: parameter gradients gain the same amount twice.
void expect_accumulates(const Vec& start, const Vec& once, const Vec& twice, const char* what) {
  double max_step = 0;
  for (size_t i = 0; i < start.size(); ++i) {
    const double step = once[i] - start[i];
    max_step = std::max(max_step, std::fabs(step));
    ASSERT_NEAR(twice[i] - start[i], 2 * step, 1e-12 * std::max(1.0, std::fabs(twice[i])))
        << what << " element " << i;
  }
  EXPECT_GT(max_step, 0.1) << what;
}

TEST(TrainOps, BackwardAccumulatesParameterAndResidualGradients) {
  std::mt19937 rng(14);
  const int64_t N = 9, in = 10, out = 12;
  const Vec x = randn(sz(N * in), rng), w = randn(sz(out * in), rng),
            d_out = randn(sz(N * out), rng);
  const Vec d_in0 = randn(x.size(), rng), d_w0 = randn(w.size(), rng), d_b0 = randn(sz(out), rng);
  Vec d_in = d_in0, d_w = d_w0, d_b = d_b0;
  linear_backward(d_in.data(), d_w.data(), d_b.data(), d_out.data(), x.data(), w.data(), N, in,
                  out);
  const Vec d_in1 = d_in, d_w1 = d_w, d_b1 = d_b;
  linear_backward(d_in.data(), d_w.data(), d_b.data(), d_out.data(), x.data(), w.data(), N, in,
                  out);
  expect_accumulates(d_in0, d_in1, d_in, "linear d_in");
  expect_accumulates(d_w0, d_w1, d_w, "linear d_weight");
  expect_accumulates(d_b0, d_b1, d_b, "linear d_bias");

  const std::vector<int32_t> tokens = {1, 0, 1, 3, 1};
  const Vec d_emb = randn(5 * sz(in), rng), table0 = randn(4 * sz(in), rng);
  Vec d_table = table0;
  embedding_backward(d_table.data(), tokens.data(), d_emb.data(), 5, in);
  const Vec d_table1 = d_table;
  embedding_backward(d_table.data(), tokens.data(), d_emb.data(), 5, in);
  expect_accumulates(table0, d_table1, d_table, "embedding d_table");

  const Vec wn = randn(sz(in), rng), dy = randn(x.size(), rng);
  Vec y(x.size()), rstd(sz(N));
  rmsnorm_forward(y.data(), rstd.data(), x.data(), wn.data(), N, in, 1e-5f, pool2());
  const Vec d_wn0 = randn(sz(in), rng);
  Vec d_x = d_in0, d_wn = d_wn0;
  rmsnorm_backward(d_x.data(), d_wn.data(), dy.data(), x.data(), wn.data(), rstd.data(), N, in,
                   pool2());
  const Vec d_x1 = d_x, d_wn1 = d_wn;
  rmsnorm_backward(d_x.data(), d_wn.data(), dy.data(), x.data(), wn.data(), rstd.data(), N, in,
                   pool2());
  expect_accumulates(d_in0, d_x1, d_x, "rmsnorm d_in");
  expect_accumulates(d_wn0, d_wn1, d_wn, "rmsnorm d_weight");
}

TEST(TrainOps, ActivationGradientsAreOverwritten) {
  std::mt19937 rng(15);
  const Span span{0, 6};
  const int64_t n_heads = 2, hd = 8;
  const Vec q = randn(6 * n_heads * hd, rng), k = randn(6 * hd, rng), v = randn(6 * hd, rng),
            d_out = randn(q.size(), rng);
  Vec out(q.size()), probs(sz(attention_probs_size(&span, 1, n_heads)));
  attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), &span, 1, n_heads, 1,
                    hd, pool2());
  Vec dq(q.size()), dk(k.size()), dv(v.size());
  attention_backward(dq.data(), dk.data(), dv.data(), d_out.data(), q.data(), k.data(), v.data(),
                     probs.data(), &span, 1, n_heads, 1, hd, pool2());
  const Vec dq1 = dq, dk1 = dk, dv1 = dv;
  attention_backward(dq.data(), dk.data(), dv.data(), d_out.data(), q.data(), k.data(), v.data(),
                     probs.data(), &span, 1, n_heads, 1, hd, pool2());
  EXPECT_EQ(dq, dq1);
  EXPECT_EQ(dk, dk1);
  EXPECT_EQ(dv, dv1);

  Vec d_gate(q.size()), d_up(q.size());
  swiglu_backward(d_gate.data(), d_up.data(), d_out.data(), q.data(), out.data(), 96, pool2());
  const Vec d_gate1 = d_gate, d_up1 = d_up;
  swiglu_backward(d_gate.data(), d_up.data(), d_out.data(), q.data(), out.data(), 96, pool2());
  EXPECT_EQ(d_gate, d_gate1);
  EXPECT_EQ(d_up, d_up1);
}

TEST(TrainOps, TokensInNoSpanAreUntouched) {
  std::mt19937 rng(16);
  const std::vector<Span> spans = {{5, 2}, {0, 3}};  // tokens 3 and 4 in none; any order
  const int64_t N = 7, n_heads = 2, hd = 4, w = n_heads * hd;
  const Vec q = randn(sz(N * w), rng), k = randn(sz(N * hd), rng), v = randn(sz(N * hd), rng);
  Vec out(q.size(), 7.0), probs(sz(attention_probs_size(spans.data(), 2, n_heads)));
  attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), spans.data(), 2,
                    n_heads, 1, hd, pool2());
  Vec dq(q.size(), 7.0), dk(k.size(), 7.0), dv(v.size(), 7.0);
  attention_backward(dq.data(), dk.data(), dv.data(), q.data(), q.data(), k.data(), v.data(),
                     probs.data(), spans.data(), 2, n_heads, 1, hd, pool2());
  for (int64_t t = 0; t < N; ++t) {
    const bool outside = t == 3 || t == 4;
    for (int64_t i = 0; i < w; ++i) {
      EXPECT_EQ(out[sz(t * w + i)] == 7.0, outside) << t;
      EXPECT_EQ(dq[sz(t * w + i)] == 7.0, outside) << t;
    }
    for (int64_t i = 0; i < hd; ++i) {
      EXPECT_EQ(dk[sz(t * hd + i)] == 7.0, outside) << t;
      EXPECT_EQ(dv[sz(t * hd + i)] == 7.0, outside) << t;
    }
  }
}

// ---- bad arguments ----

TEST(TrainOps, RejectsBadArguments) {
  ThreadPool& pool = pool2();
  std::vector<double> buf(4096, 0.0), d(4096, 0.0);
  const std::vector<Span> overlapping = {{0, 4}, {3, 2}}, negative = {{-1, 2}};
  const Span ok{0, 4};
  EXPECT_THROW(attention_forward(buf.data(), d.data(), buf.data(), buf.data(), buf.data(), &ok, 1,
                                 3, 2, 8, pool),
               std::invalid_argument);  // 3 heads over 2 kv heads
  EXPECT_THROW(
      attention_backward(buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), buf.data(),
                         buf.data(), d.data(), overlapping.data(), 2, 2, 1, 8, pool),
      std::invalid_argument);
  EXPECT_THROW(rope_forward(buf.data(), negative.data(), 1, 2, 8, 10000.0f, pool),
               std::invalid_argument);
  EXPECT_THROW(rope_forward(buf.data(), &ok, 1, 2, 7, 10000.0f, pool), std::invalid_argument);
  EXPECT_THROW(rope_backward(buf.data(), &ok, 1, 2, 8, 0.0f, pool), std::invalid_argument);

  const std::vector<int32_t> bad_token = {1, -2};
  EXPECT_THROW(embedding_forward(buf.data(), bad_token.data(), d.data(), 2, 4), std::out_of_range);
  EXPECT_THROW(embedding_backward(d.data(), bad_token.data(), buf.data(), 2, 4), std::out_of_range);

  const std::vector<int32_t> bad_target = {0, 5};
  EXPECT_THROW(cross_entropy(d.data(), buf.data(), bad_target.data(), 2, 5, 1.0, pool),
               std::out_of_range);
  for (float temp : {0.0f, -1.0f, NAN})
    EXPECT_THROW(kl_distill(d.data(), buf.data(), buf.data(), nullptr, 2, 5, temp, 1.0, pool),
                 std::invalid_argument);
  EXPECT_THROW(linear_forward<double>(buf.data(), buf.data(), buf.data(), nullptr, -1, 4, 4),
               std::invalid_argument);
}

}  // namespace
}  // namespace shrike::train
