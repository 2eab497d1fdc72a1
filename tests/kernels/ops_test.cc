// Every dispatched op on every supported ISA against the scalar references in ops_reference.cc.
#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/isa.h"

namespace shrike::kernels {
namespace {

// Runs fn once per supported ISA with that ISA active, restoring the previous one.
template <typename F>
void for_each_isa(F&& fn) {
  const Isa saved = active_isa();
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    SCOPED_TRACE(std::string(isa_name(isa)));
    fn(isa);
  }
  set_active_isa(saved);
}

std::vector<float> randn(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& e : v) e = d(rng);
  return v;
}

const int64_t kSizes[] = {1, 3, 7, 8, 15, 16, 17, 31, 33, 768, 4095};

// rmsnorm: the SIMD sum of squares is f32 (reference: double) in another order: relative error
// of the 1/rms factor ~ n * 2^-24 worst case ~ 2.4e-4 at n=4095 in theory, ~1e-6 in practice for
// positive terms (all squares are positive, so error is bounded by ~log2(n) * 2^-24 with pairwise
// lanes). We allow 1e-5 relative per element.
TEST(Ops, RmsnormMatchesReference) {
  std::mt19937 rng(1);
  for_each_isa([&](Isa) {
    for (int64_t n : kSizes) {
      const auto x = randn(size_t(n), rng, 3.0f), w = randn(size_t(n), rng);
      std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
      reference::rmsnorm(want.data(), x.data(), w.data(), n, 1e-5f);
      rmsnorm(got.data(), x.data(), w.data(), n, 1e-5f);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(got[size_t(i)], want[size_t(i)], 1e-5 * std::fabs(want[size_t(i)]) + 1e-30)
            << "n=" << n << " i=" << i;
    }
  });
}

// silu_mul: vector exp is within ~2 ulp of expf; the division and product add an ulp each:
// 1e-6 relative (plus 1e-30 for exact zeros).
TEST(Ops, SiluMulMatchesReference) {
  std::mt19937 rng(2);
  for_each_isa([&](Isa) {
    for (int64_t n : kSizes) {
      auto g = randn(size_t(n), rng, 6.0f);
      const auto u = randn(size_t(n), rng);
      if (n > 3) {
        g[0] = -100.0f;
        g[1] = 100.0f;
        g[2] = 0.0f;
      }
      std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
      reference::silu_mul(want.data(), g.data(), u.data(), n);
      silu_mul(got.data(), g.data(), u.data(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(got[size_t(i)], want[size_t(i)], 1e-6 * std::fabs(want[size_t(i)]) + 1e-30)
            << "n=" << n << " i=" << i << " g=" << g[size_t(i)];
    }
  });
}

// softmax: each exp within ~2 ulp, the f32 sum (reference: double) adds ~log(n) ulp: 2e-6
// relative, plus an absolute 1e-12 for values that underflow differently.
TEST(Ops, SoftmaxMatchesReference) {
  std::mt19937 rng(3);
  for_each_isa([&](Isa) {
    for (int64_t n : kSizes) {
      const auto x = randn(size_t(n), rng, 10.0f);
      auto want = x, got = x;
      reference::softmax(want.data(), n);
      softmax(got.data(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(got[size_t(i)], want[size_t(i)], 2e-6 * want[size_t(i)] + 1e-12)
            << "n=" << n << " i=" << i;
    }
  });
}

// rope: the same two products and one add per element, possibly fused (FMA): a few ulp of the
// O(1) inputs: 1e-6 absolute.
TEST(Ops, RopeMatchesReference) {
  std::mt19937 rng(4);
  struct C {
    int64_t heads, head_dim, rot;
  };
  const C cases[] = {{1, 2, 2},    {3, 64, 64}, {2, 128, 128}, {5, 80, 80},
                     {4, 128, 64}, {2, 96, 32}, {3, 10, 6},    {2, 6, 4}};
  for_each_isa([&](Isa) {
    for (const C& c : cases)
      for (RopeLayout layout : {RopeLayout::Adjacent, RopeLayout::NeoX}) {
        const auto x = randn(size_t(c.heads * c.head_dim), rng);
        std::vector<float> cs(size_t(c.rot));
        for (int64_t i = 0; i < c.rot / 2; ++i) {
          const float th = 0.37f * float(i + 1);
          cs[size_t(2 * i)] = std::cos(th);
          cs[size_t(2 * i + 1)] = std::sin(th);
        }
        auto want = x, got = x;
        reference::rope(want.data(), c.heads, c.head_dim, c.rot, cs.data(), layout);
        rope(got.data(), c.heads, c.head_dim, c.rot, cs.data(), layout);
        for (size_t i = 0; i < x.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 1e-6) << "head_dim=" << c.head_dim << " rot=" << c.rot
                                             << " layout=" << int(layout) << " i=" << i;
      }
  });
}

// attention: outputs are convex combinations of V rows (|v| ~ 1..4); f32 dot products of
// head_dim terms and the softmax (2e-6 rel) in another order: 2e-5 absolute.
// f16: the cache holds halves of the random values; the reference runs on f32 rows holding the
// same (rounded) values, so the tolerance is the f32 one: widening a half is exact.
void check_attention_against_reference(bool f16) {
  struct C {
    int64_t n_tokens, pos0, n_heads, n_kv, head_dim, block_size;
  };
  const C cases[] = {
      {1, 0, 2, 1, 64, 1024}, {1, 130, 4, 2, 64, 16},    {1, 700, 3, 3, 128, 1024},
      {7, 5, 4, 2, 80, 8},    {33, 0, 4, 4, 128, 32},    {17, 9, 2, 1, 72, 5},
      {3, 2, 2, 2, 6, 1000},  {64, 0, 2, 1, 64, 16},     {6, 3, 2, 1, 48, 7},
      {10, 0, 2, 2, 200, 64}, {1, 2047, 2, 1, 128, 256}, {1, 40, 2, 1, 24, 16},
      {2, 40, 4, 2, 100, 16}, {5, 19, 2, 2, 256, 16},
  };
  std::mt19937 rng(5);
  for (const C& c : cases) {
    const int64_t n_pos = c.pos0 + c.n_tokens;
    const int64_t kv_dim = c.n_kv * c.head_dim, dim = c.n_heads * c.head_dim;
    // Block table with blocks scattered in one allocation, in reverse order, with a row stride
    // larger than the row.
    const int64_t stride = kv_dim + 3;
    const int64_t n_blocks = (n_pos + c.block_size - 1) / c.block_size;
    auto kmem = randn(size_t(n_blocks * c.block_size * stride), rng, 2.0f);
    auto vmem = randn(size_t(n_blocks * c.block_size * stride), rng, 2.0f);
    std::vector<uint16_t> khalf(kmem.size()), vhalf(vmem.size());
    if (f16) {
      for (size_t i = 0; i < kmem.size(); ++i) {
        khalf[i] = fp32_to_fp16(kmem[i]);
        vhalf[i] = fp32_to_fp16(vmem[i]);
        kmem[i] = fp16_to_fp32(khalf[i]);
        vmem[i] = fp16_to_fp32(vhalf[i]);
      }
    }
    std::vector<const float*> kb(static_cast<size_t>(n_blocks)), vb(static_cast<size_t>(n_blocks));
    std::vector<const uint16_t*> khb(static_cast<size_t>(n_blocks)),
        vhb(static_cast<size_t>(n_blocks));
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int64_t at = (n_blocks - 1 - b) * c.block_size * stride;
      kb[size_t(b)] = kmem.data() + at;
      vb[size_t(b)] = vmem.data() + at;
      khb[size_t(b)] = khalf.data() + at;
      vhb[size_t(b)] = vhalf.data() + at;
    }
    // Both layouts a cache may use: position-major rows, and head-major blocks (a padded
    // head stride, so a kernel that assumed head_stride == block_size * head_dim would fail).
    const int64_t strides[][2] = {{stride, c.head_dim},
                                  {c.head_dim, c.block_size * c.head_dim + 1}};
    const auto q = randn(size_t(c.n_tokens * dim), rng);
    const AttentionShape s{c.n_tokens, c.pos0,     c.n_heads,
                           c.n_kv,     c.head_dim, 1.0f / std::sqrt(float(c.head_dim))};
    for (const auto& [row_stride, head_stride] : strides) {
      const KvRows k{kb.data(), c.block_size, row_stride, head_stride},
          v{vb.data(), c.block_size, row_stride, head_stride};
      std::vector<float> want(size_t(c.n_tokens * dim));
      reference::attention(s, q.data(), k, v, want.data());
      KvRows tk = k, tv = v;  // the rows under test
      if (f16) {
        tk = {nullptr, c.block_size, row_stride, head_stride, khb.data()};
        tv = {nullptr, c.block_size, row_stride, head_stride, vhb.data()};
        std::vector<float> ref16(want.size(), NAN);
        reference::attention(s, q.data(), tk, tv, ref16.data());
        ASSERT_EQ(0, std::memcmp(ref16.data(), want.data(), want.size() * sizeof(float)))
            << "the reference must widen halves exactly";
      }
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        for_each_isa([&](Isa isa) {
          std::vector<float> got(want.size(), NAN);
          attention(s, q.data(), tk, tv, got.data(), pool);
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(got[i], want[i], 2e-5)
                << "f16=" << f16 << " threads=" << threads << " n_tokens=" << c.n_tokens
                << " pos0=" << c.pos0 << " head_dim=" << c.head_dim
                << " head_stride=" << head_stride << " i=" << i;
        });
      }
    }
  }
}

TEST(Ops, AttentionMatchesReference) {
  check_attention_against_reference(false);
}

TEST(Ops, AttentionOnF16RowsMatchesReferenceOnTheRoundedValues) {
  check_attention_against_reference(true);
}

TEST(Ops, AttentionRefusesKAndVOfDifferentTypes) {
  const float kf[4] = {1, 2, 3, 4};
  const uint16_t vh[4] = {0x3c00, 0x3c00, 0x3c00, 0x3c00};
  const float* kb[1] = {kf};
  const uint16_t* vb[1] = {vh};
  const KvRows k{kb, 1, 4, 4}, v{nullptr, 1, 4, 4, vb};
  const float q[4] = {1, 0, 0, 0};
  float out[4];
  ThreadPool pool(1);
  EXPECT_THROW(attention({1, 0, 1, 1, 4, 0.5f}, q, k, v, out, pool), std::invalid_argument);
}

}  // namespace
}  // namespace shrike::kernels
