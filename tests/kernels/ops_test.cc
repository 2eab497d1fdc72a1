// Every dispatched op on every supported ISA against the scalar references in ops_reference.cc.
#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/isa.h"
#include "kernels/kernel_test_util.h"

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

// The K/V element formats attention is checked on. Int8Copies: int8 rows with f16 copies of some
// positions (the int8-mixed policy).
enum class Rows { F32, F16, Int8, Int8Copies };

const char* rows_name(Rows r) {
  switch (r) {
    case Rows::F32:
      return "f32";
    case Rows::F16:
      return "f16";
    case Rows::Int8:
      return "int8";
    case Rows::Int8Copies:
      return "int8+f16 copies";
  }
  return "?";
}

// K or V of one test case in every format: f32 memory (`f32`, the values the reference runs on),
// the same rows as halves or int8 with scales, and f16 copies for the positions that have one.
struct TestRows {
  std::vector<float> f32;
  std::vector<uint16_t> half;
  std::vector<int8_t> q;
  std::vector<float> scales;             // per block: [block_size * n_kv], laid out as below
  std::vector<int32_t> slot;             // per position: f16 copy slot, or -1
  std::vector<uint16_t> copies;          // [slot][n_kv][head_dim]
  std::vector<const float*> f32_blocks;  // block tables (blocks placed in reverse order)
  std::vector<const uint16_t*> half_blocks;
  std::vector<const int8_t*> q_blocks;
  std::vector<const float*> scale_blocks;
  KvRows rows;      // the rows under test
  KvRows f32_rows;  // f32 rows holding the values the rows under test stand for
};

// Fills r for positions 0..n_pos-1 from random values in `mem` (f32, one allocation of n_blocks
// blocks of block_size rows of `stride` elements). Int8 rows are quantised per (position, head);
// for Int8Copies, positions 0, 1 and every third one get an f16 copy. Scales are position-major
// ([slot][kv_head]) or head-major ([kv_head][slot]).
void make_rows(TestRows& r, Rows kind, std::vector<float> mem, int64_t n_pos, int64_t block_size,
               int64_t n_kv, int64_t head_dim, int64_t row_stride, int64_t head_stride,
               bool head_major_scales) {
  const int64_t n_blocks = (n_pos + block_size - 1) / block_size;
  const int64_t block_elems = int64_t(mem.size()) / n_blocks;
  r.f32 = std::move(mem);
  r.half.assign(r.f32.size(), 0);
  r.q.assign(r.f32.size(), 0);
  r.scales.assign(size_t(n_blocks * block_size * n_kv), 0.0f);
  r.slot.assign(size_t(n_pos), -1);
  r.copies.clear();
  const int64_t srow = head_major_scales ? 1 : n_kv, shead = head_major_scales ? block_size : 1;
  for (int64_t p = 0; p < n_pos; ++p) {
    const int64_t blk = p / block_size, in = p % block_size;
    const int64_t at = (n_blocks - 1 - blk) * block_elems;  // blocks in reverse order
    const bool copy = kind == Rows::Int8Copies && (p < 2 || p % 3 == 0);
    if (copy) r.slot[size_t(p)] = int32_t(r.copies.size() / size_t(n_kv * head_dim));
    for (int64_t j = 0; j < n_kv; ++j) {
      float* x = r.f32.data() + at + in * row_stride + j * head_stride;
      if (kind == Rows::F16) {
        for (int64_t i = 0; i < head_dim; ++i) {
          r.half[size_t(x - r.f32.data() + i)] = fp32_to_fp16(x[i]);
          x[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
        }
      } else if (kind != Rows::F32) {
        int8_t* q = r.q.data() + (x - r.f32.data());
        const float s = quantize_int8_row(x, head_dim, q);
        r.scales[size_t((n_blocks - 1 - blk) * block_size * n_kv + in * srow + j * shead)] = s;
        for (int64_t i = 0; i < head_dim; ++i) {
          if (copy) r.copies.push_back(fp32_to_fp16(x[i]));
          x[i] = copy ? fp16_to_fp32(fp32_to_fp16(x[i])) : float(q[i]) * s;
        }
      }
    }
  }
  r.f32_blocks.clear();
  r.half_blocks.clear();
  r.q_blocks.clear();
  r.scale_blocks.clear();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t at = (n_blocks - 1 - b) * block_elems;
    r.f32_blocks.push_back(r.f32.data() + at);
    r.half_blocks.push_back(r.half.data() + at);
    r.q_blocks.push_back(r.q.data() + at);
    r.scale_blocks.push_back(r.scales.data() + (n_blocks - 1 - b) * block_size * n_kv);
  }
  r.f32_rows = {r.f32_blocks.data(), block_size, row_stride, head_stride};
  r.rows = r.f32_rows;
  if (kind == Rows::F16) {
    r.rows = {nullptr, block_size, row_stride, head_stride, r.half_blocks.data()};
  } else if (kind != Rows::F32) {
    r.rows = {nullptr, block_size, row_stride, head_stride};
    r.rows.int8_blocks = r.q_blocks.data();
    r.rows.scale_blocks = r.scale_blocks.data();
    r.rows.scale_row_stride = srow;
    r.rows.scale_head_stride = shead;
    if (kind == Rows::Int8Copies) {
      r.rows.f16_slot = r.slot.data();
      r.rows.f16_rows = r.copies.data();
      r.rows.f16_slot_stride = n_kv * head_dim;
      r.rows.f16_head_stride = head_dim;
    }
  }
}

// attention: outputs are convex combinations of V rows (|v| ~ 1..4); f32 dot products of
// head_dim terms and the softmax (2e-6 rel) in another order: 2e-5 absolute.
// f16: the cache holds halves of the random values; the reference runs on f32 rows holding the
// same (rounded) values, so the tolerance is the f32 one: widening a half is exact.
// int8: the reference runs on f32 rows holding q * scale (and the f16 copies' values); the SIMD
// kernels scale each finished dot product and each row's weight instead (a rounding more per
// row, well inside the f32 tolerance).
// softcap / window: Gemma's capped scores and sliding windows, on every case as well.
void check_attention_against_reference(Rows kind, float softcap = 0.0f, int64_t window = 0) {
  struct C {
    int64_t n_tokens, pos0, n_heads, n_kv, head_dim, block_size;
  };
  const C cases[] = {
      {1, 0, 2, 1, 64, 1024}, {1, 130, 4, 2, 64, 16},    {1, 700, 3, 3, 128, 1024},
      {7, 5, 4, 2, 80, 8},    {33, 0, 4, 4, 128, 32},    {17, 9, 2, 1, 72, 5},
      {3, 2, 2, 2, 6, 1000},  {64, 0, 2, 1, 64, 16},     {6, 3, 2, 1, 48, 7},
      {10, 0, 2, 2, 200, 64}, {1, 2047, 2, 1, 128, 256}, {1, 40, 2, 1, 24, 16},
      {2, 40, 4, 2, 100, 16}, {5, 19, 2, 2, 256, 16},    {9, 30, 4, 2, 8, 16},
  };
  std::mt19937 rng(5);
  for (const C& c : cases) {
    const int64_t n_pos = c.pos0 + c.n_tokens;
    const int64_t kv_dim = c.n_kv * c.head_dim, dim = c.n_heads * c.head_dim;
    // Block table with blocks scattered in one allocation, in reverse order, with a row stride
    // larger than the row.
    const int64_t stride = kv_dim + 3;
    const int64_t n_blocks = (n_pos + c.block_size - 1) / c.block_size;
    const auto kmem = randn(size_t(n_blocks * c.block_size * stride), rng, 2.0f);
    const auto vmem = randn(size_t(n_blocks * c.block_size * stride), rng, 2.0f);
    // Both layouts a cache may use: position-major rows, and head-major blocks (a padded
    // head stride, so a kernel that assumed head_stride == block_size * head_dim would fail).
    const int64_t strides[][2] = {{stride, c.head_dim},
                                  {c.head_dim, c.block_size * c.head_dim + 1}};
    const auto q = randn(size_t(c.n_tokens * dim), rng);
    const AttentionShape s{c.n_tokens, c.pos0,     c.n_heads,
                           c.n_kv,     c.head_dim, 1.0f / std::sqrt(float(c.head_dim)),
                           softcap,    window};
    for (const auto& stride : strides) {
      // Named copies, not a structured binding: clang 14 (the sanitizer build) cannot capture
      // a binding in the lambda below.
      const int64_t row_stride = stride[0], head_stride = stride[1];
      TestRows k, v;
      const bool head_major = row_stride == c.head_dim;
      make_rows(k, kind, kmem, n_pos, c.block_size, c.n_kv, c.head_dim, row_stride, head_stride,
                head_major);
      make_rows(v, kind, vmem, n_pos, c.block_size, c.n_kv, c.head_dim, row_stride, head_stride,
                !head_major);
      std::vector<float> want(size_t(c.n_tokens * dim));
      reference::attention(s, q.data(), k.f32_rows, v.f32_rows, want.data());
      if (kind != Rows::F32) {
        std::vector<float> ref(want.size(), NAN);
        reference::attention(s, q.data(), k.rows, v.rows, ref.data());
        ASSERT_EQ(0, std::memcmp(ref.data(), want.data(), want.size() * sizeof(float)))
            << "the reference must read " << rows_name(kind)
            << " rows as the f32 values they stand for";
      }
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        for_each_isa([&](Isa isa) {
          std::vector<float> got(want.size(), NAN);
          attention(s, q.data(), k.rows, v.rows, got.data(), pool);
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(got[i], want[i], 2e-5)
                << rows_name(kind) << " threads=" << threads << " n_tokens=" << c.n_tokens
                << " pos0=" << c.pos0 << " head_dim=" << c.head_dim
                << " head_stride=" << head_stride << " i=" << i;
        });
      }
    }
  }
}

TEST(Ops, AttentionMatchesReference) {
  check_attention_against_reference(Rows::F32);
}

TEST(Ops, SlidingWindowAndSoftCappedAttentionMatchReference) {
  for (const int64_t window : {1, 5, 16}) check_attention_against_reference(Rows::F32, 0, window);
  check_attention_against_reference(Rows::F32, 2.0f, 0);
  check_attention_against_reference(Rows::F16, 3.0f, 7);
  check_attention_against_reference(Rows::Int8Copies, 3.0f, 7);
}

// The reference's window and cap against a direct reading of their definitions (Gemma 2 in
// transformers: scores capped at cap * tanh(s / cap); a key k is visible to the query at q when
// q - k < window): contiguous f32 rows, one kv head.
TEST(Ops, ReferenceWindowAndSoftcapFollowTheirDefinitions) {
  const int64_t n_pos = 23, hd = 8, window = 6;
  const float cap = 1.5f, scale = 0.7f;
  std::mt19937 rng(9);
  const auto kmem = randn(size_t(n_pos * hd), rng, 2.0f);
  const auto vmem = randn(size_t(n_pos * hd), rng, 2.0f);
  const auto q = randn(size_t(n_pos * hd), rng);
  const float* kb = kmem.data();
  const float* vb = vmem.data();
  KvRows k, v;
  k.blocks = &kb;
  v.blocks = &vb;
  k.block_size = v.block_size = n_pos;
  k.row_stride = v.row_stride = hd;
  k.head_stride = v.head_stride = hd;
  const AttentionShape s{n_pos, 0, 1, 1, hd, scale, cap, window};
  std::vector<float> got(size_t(n_pos * hd));
  reference::attention(s, q.data(), k, v, got.data());
  for (int64_t t = 0; t < n_pos; ++t) {
    std::vector<double> w;
    double sum = 0;
    const int64_t first = std::max<int64_t>(0, t - window + 1);
    for (int64_t p = first; p <= t; ++p) {
      double dot = 0;
      for (int64_t i = 0; i < hd; ++i)
        dot += double(q[size_t(t * hd + i)]) * kmem[size_t(p * hd + i)];
      const double capped = cap * std::tanh(dot * scale / cap);
      w.push_back(std::exp(capped));
      sum += w.back();
    }
    for (int64_t i = 0; i < hd; ++i) {
      double o = 0;
      for (int64_t p = first; p <= t; ++p)
        o += w[size_t(p - first)] / sum * vmem[size_t(p * hd + i)];
      ASSERT_NEAR(got[size_t(t * hd + i)], o, 1e-5) << "t=" << t << " i=" << i;
    }
  }
}

TEST(Ops, AttentionOnF16RowsMatchesReferenceOnTheRoundedValues) {
  check_attention_against_reference(Rows::F16);
}

TEST(Ops, AttentionOnInt8RowsMatchesReferenceOnTheDequantisedValues) {
  check_attention_against_reference(Rows::Int8);
}

TEST(Ops, AttentionOnInt8RowsWithF16CopiesReadsTheCopies) {
  check_attention_against_reference(Rows::Int8Copies);
}

TEST(Ops, AttentionRefusesKAndVOfDifferentTypes) {
  const float kf[4] = {1, 2, 3, 4};
  const uint16_t vh[4] = {0x3c00, 0x3c00, 0x3c00, 0x3c00};
  const int8_t q8[4] = {1, 2, 3, 4};
  const float sc[1] = {0.5f};
  const float* kb[1] = {kf};
  const uint16_t* vb[1] = {vh};
  const int8_t* qb[1] = {q8};
  const float* sb[1] = {sc};
  const KvRows k{kb, 1, 4, 4}, v{nullptr, 1, 4, 4, vb};
  KvRows i8{nullptr, 1, 4, 4};
  i8.int8_blocks = qb;
  i8.scale_blocks = sb;
  const float q[4] = {1, 0, 0, 0};
  float out[4];
  ThreadPool pool(1);
  const AttentionShape s{1, 0, 1, 1, 4, 0.5f};
  EXPECT_THROW(attention(s, q, k, v, out, pool), std::invalid_argument);
  EXPECT_THROW(attention(s, q, i8, v, out, pool), std::invalid_argument);
  EXPECT_NO_THROW(attention(s, q, i8, i8, out, pool));
  KvRows no_scales = i8;
  no_scales.scale_blocks = nullptr;
  EXPECT_THROW(attention(s, q, no_scales, no_scales, out, pool), std::invalid_argument);
  const int32_t slot[1] = {0};
  KvRows no_copies = i8;
  no_copies.f16_slot = slot;
  EXPECT_THROW(attention(s, q, no_copies, no_copies, out, pool), std::invalid_argument);
}

TEST(Ops, QuantizeInt8RowRoundsWithinHalfAStep) {
  std::mt19937 rng(9);
  for (int64_t n : {1, 7, 8, 64, 129}) {
    const auto x = randn(size_t(n), rng, 3.0f);
    std::vector<int8_t> q(static_cast<size_t>(n));
    const float s = quantize_int8_row(x.data(), n, q.data());
    float amax = 0;
    for (float e : x) amax = std::max(amax, std::fabs(e));
    EXPECT_EQ(s, amax / 127.0f);
    bool reaches_127 = false;
    for (int64_t i = 0; i < n; ++i) {
      const float xi = x[size_t(i)];
      ASSERT_LE(std::abs(int(q[size_t(i)])), 127);
      ASSERT_LE(std::fabs(float(q[size_t(i)]) * s - xi), s * 0.5f * (1 + 1e-5f)) << n << " " << i;
      reaches_127 = reaches_127 || std::abs(int(q[size_t(i)])) == 127;
    }
    EXPECT_TRUE(reaches_127) << "the largest element uses the whole range";
  }
  // Exactly representable rows come back exactly; ties round to even.
  const float exact[4] = {-127, 3, 0, 127};
  int8_t q[4];
  EXPECT_EQ(quantize_int8_row(exact, 4, q), 1.0f);
  EXPECT_EQ(q[0], -127);
  EXPECT_EQ(q[1], 3);
  EXPECT_EQ(q[3], 127);
  const float ties[3] = {254, 1, 3};  // scale 2: 0.5 -> 0, 1.5 -> 2
  EXPECT_EQ(quantize_int8_row(ties, 3, q), 2.0f);
  EXPECT_EQ(q[1], 0);
  EXPECT_EQ(q[2], 2);
  // A zero row: scale 0. inf or NaN: scale NaN, so attention shows the damage.
  const float zero[2] = {0, -0.0f};
  EXPECT_EQ(quantize_int8_row(zero, 2, q), 0.0f);
  EXPECT_EQ(q[0], 0);
  const float bad[2] = {1, std::numeric_limits<float>::infinity()};
  EXPECT_TRUE(std::isnan(quantize_int8_row(bad, 2, q)));
  const float nan[2] = {std::nanf(""), 1};
  EXPECT_TRUE(std::isnan(quantize_int8_row(nan, 2, q)));
  EXPECT_EQ(q[1], 0);
}

// Batch invariance over int8 rows (with and without f16 copies): a query's output, and the
// attention weights it adds to the sums, are the same bits alone, in uneven prefill chunks, and
// with the chunks batched as jobs of one call; outputs do not change when weights are summed.
class Int8AttentionInvariance : public ::testing::TestWithParam<Rows> {};

TEST_P(Int8AttentionInvariance, AloneChunkedAndBatchedAgreeToTheBit) {
  std::mt19937 rng(13);
  for (const int64_t head_dim : {8, 16, 64, 80}) {
    const int64_t n_heads = 4, n_kv = 2, keys = 45, bs = 16;
    const int64_t kv_dim = n_kv * head_dim, dim = n_heads * head_dim;
    const int64_t n_blocks = (keys + bs - 1) / bs;
    TestRows k, v;
    make_rows(k, GetParam(), randn(size_t(n_blocks * bs * kv_dim), rng), keys, bs, n_kv, head_dim,
              head_dim, bs * head_dim, true);
    make_rows(v, GetParam(), randn(size_t(n_blocks * bs * kv_dim), rng), keys, bs, n_kv, head_dim,
              head_dim, bs * head_dim, true);
    const auto q = randn(size_t(keys * dim), rng);
    const float scale = 0.125f;
    for_each_isa([&](Isa isa) {
      ThreadPool pool(2);
      std::vector<float> alone(size_t(keys * dim)), sums_alone(size_t(n_kv * keys), 0.0f);
      for (int64_t t = 0; t < keys; ++t) {
        AttentionJob job{{1, t, n_heads, n_kv, head_dim, scale},
                         q.data() + t * dim,
                         k.rows,
                         v.rows,
                         alone.data() + t * dim,
                         sums_alone.data(),
                         keys};
        attention_batch(&job, 1, pool);
      }
      std::vector<float> chunked(alone.size()), batched(alone.size()), plain(alone.size());
      std::vector<float> sums_chunked(sums_alone.size(), 0.0f), sums_batched(sums_alone.size());
      std::vector<AttentionJob> jobs;
      for (int64_t t0 = 0, i = 0; t0 < keys; ++i) {
        const int64_t len =
            std::min<int64_t>(keys - t0, std::vector<int64_t>{7, 10, 1, 27}[size_t(i % 4)]);
        const AttentionShape s{len, t0, n_heads, n_kv, head_dim, scale};
        AttentionJob job{s,      q.data() + t0 * dim,       k.rows,
                         v.rows, chunked.data() + t0 * dim, sums_chunked.data(),
                         keys};
        attention_batch(&job, 1, pool);
        attention(s, q.data() + t0 * dim, k.rows, v.rows, plain.data() + t0 * dim, pool);
        jobs.push_back({s, q.data() + t0 * dim, k.rows, v.rows, batched.data() + t0 * dim});
        t0 += len;
      }
      attention_batch(jobs.data(), int64_t(jobs.size()), pool);
      // One job over all the queries, summing weights: the sums of the chunked runs.
      std::fill(sums_batched.begin(), sums_batched.end(), 0.0f);
      std::vector<float> whole(alone.size());
      AttentionJob all{{keys, 0, n_heads, n_kv, head_dim, scale},
                       q.data(),
                       k.rows,
                       v.rows,
                       whole.data(),
                       sums_batched.data(),
                       keys};
      attention_batch(&all, 1, pool);
      const size_t bytes = alone.size() * sizeof(float);
      EXPECT_EQ(0, std::memcmp(alone.data(), chunked.data(), bytes)) << isa_name(isa) << head_dim;
      EXPECT_EQ(0, std::memcmp(alone.data(), batched.data(), bytes)) << isa_name(isa) << head_dim;
      EXPECT_EQ(0, std::memcmp(alone.data(), plain.data(), bytes)) << isa_name(isa) << head_dim;
      EXPECT_EQ(0, std::memcmp(alone.data(), whole.data(), bytes)) << isa_name(isa) << head_dim;
      const size_t sum_bytes = sums_alone.size() * sizeof(float);
      EXPECT_EQ(0, std::memcmp(sums_alone.data(), sums_chunked.data(), sum_bytes))
          << isa_name(isa) << head_dim;
      EXPECT_EQ(0, std::memcmp(sums_alone.data(), sums_batched.data(), sum_bytes))
          << isa_name(isa) << head_dim;
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Int8Rows, Int8AttentionInvariance,
                         ::testing::Values(Rows::Int8, Rows::Int8Copies), [](const auto& info) {
                           return info.param == Rows::Int8 ? "int8" : "int8_with_f16_copies";
                         });

// The sums are the softmax weights of the reference: per kv head (its group of query heads), per
// position, over the queries (every format; here f32 rows and int8 rows with copies, against
// weights computed here from the values the rows stand for).
TEST(Ops, AttentionWeightSumsAreTheSoftmaxWeightsOverTheQueries) {
  std::mt19937 rng(17);
  const int64_t n_heads = 4, n_kv = 2, head_dim = 24, pos0 = 5, n_tokens = 11, bs = 4;
  const int64_t keys = pos0 + n_tokens, kv_dim = n_kv * head_dim, dim = n_heads * head_dim;
  const int64_t n_blocks = (keys + bs - 1) / bs;
  const float scale = 0.2f;
  for (Rows kind : {Rows::F32, Rows::Int8Copies}) {
    TestRows k, v;
    make_rows(k, kind, randn(size_t(n_blocks * bs * kv_dim), rng), keys, bs, n_kv, head_dim, kv_dim,
              head_dim, false);
    make_rows(v, kind, randn(size_t(n_blocks * bs * kv_dim), rng), keys, bs, n_kv, head_dim, kv_dim,
              head_dim, false);
    const auto q = randn(size_t(n_tokens * dim), rng);
    std::vector<double> want(size_t(n_kv * keys), 0.0);
    for (int64_t h = 0; h < n_heads; ++h)
      for (int64_t t = 0; t < n_tokens; ++t) {
        const int64_t n = pos0 + t + 1;
        std::vector<double> e(static_cast<size_t>(n));
        double mx = -1e300, z = 0;
        for (int64_t p = 0; p < n; ++p) {
          double dot = 0;
          for (int64_t i = 0; i < head_dim; ++i)
            dot += double(q[size_t(t * dim + h * head_dim + i)]) *
                   k.f32_rows.head(p, h / (n_heads / n_kv))[i];
          e[size_t(p)] = dot * scale;
          mx = std::max(mx, e[size_t(p)]);
        }
        for (auto& x : e) z += x = std::exp(x - mx);
        for (int64_t p = 0; p < n; ++p)
          want[size_t(h / (n_heads / n_kv) * keys + p)] += e[size_t(p)] / z;
      }
    for_each_isa([&](Isa) {
      ThreadPool pool(2);
      const int64_t stride = keys + 3;  // a padded stride
      std::vector<float> sums(size_t(n_kv * stride), 1.0f), out(size_t(n_tokens * dim));
      AttentionJob job{{n_tokens, pos0, n_heads, n_kv, head_dim, scale},
                       q.data(),
                       k.rows,
                       v.rows,
                       out.data(),
                       sums.data(),
                       stride};
      attention_batch(&job, 1, pool);
      for (int64_t g = 0; g < n_kv; ++g) {
        for (int64_t p = 0; p < keys; ++p)  // added to what was there (1)
          ASSERT_NEAR(sums[size_t(g * stride + p)] - 1.0f, want[size_t(g * keys + p)], 4e-5)
              << rows_name(kind) << " g=" << g << " p=" << p;
        for (int64_t p = keys; p < stride; ++p) ASSERT_EQ(sums[size_t(g * stride + p)], 1.0f);
      }
      // With an index: position p's weight goes to index[p] (here reversed), none for -1.
      std::vector<int32_t> index(static_cast<size_t>(keys));
      for (int64_t p = 0; p < keys; ++p) index[size_t(p)] = p % 3 == 1 ? -1 : int32_t(keys - 1 - p);
      std::vector<float> plain(size_t(n_kv * stride), 0.0f), indexed(plain);
      job.weight_sums = plain.data();
      attention_batch(&job, 1, pool);
      job.weight_sums = indexed.data();
      job.weight_sums_index = index.data();
      attention_batch(&job, 1, pool);
      for (int64_t g = 0; g < n_kv; ++g)
        for (int64_t p = 0; p < keys; ++p) {
          const float got = indexed[size_t(g * stride + keys - 1 - p)];
          if (p % 3 == 1) {
            ASSERT_EQ(got, 0.0f) << p;
          } else {
            ASSERT_EQ(got, plain[size_t(g * stride + p)]) << p;  // the same additions
          }
        }
    });
  }
}

}  // namespace
}  // namespace shrike::kernels
