// Batch invariance: a token's result must be the same bits whether it is computed alone or
// inside a batch of any size (continuous batching puts a sequence's tokens in different batches
// from step to step, and a user must get the same greedy output under load as alone).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/isa.h"
#include "kernels/kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace shrike::kernels {
namespace {

// Float weights need the batch-invariant option (their fast single-token kernel sums in another
// order); quantised weights must be invariant without it.
class MatmulInvariance : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulInvariance, EachTokenOfABatchEqualsItsProductAlone) {
  const DType type = GetParam();
  const MatmulOptions opt{type == DType::F32 || type == DType::F16 || type == DType::BF16 ||
                          type == DType::FP8_E4M3};
  std::mt19937 rng(11);
  // 200 rows: several panel groups plus a partial panel; 96 columns (Q types need 32k; Q8_C
  // takes any: 100 exercises its padding), 256 for Q4_G128 (groups of 128), 600 for FP8 (the
  // AVX2 batch kernel converts chunks of 256 columns).
  const int64_t rows = 200;
  const int64_t cols = type == DType::Q4_G128    ? 256
                       : dtype_is_kquant(type)   ? 512
                       : type == DType::Q8_C     ? 100
                       : type == DType::FP8_E4M3 ? 600
                                                 : 96;
  const auto wf = randn(size_t(rows * cols), rng);
  std::vector<uint8_t> file(size_t(rows * dtype_row_bytes(type, cols)));
  std::vector<float> scales(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    quantize_row(type, wf.data() + r * cols, file.data() + r * dtype_row_bytes(type, cols), cols,
                 &scales[size_t(r)]);
  const auto w = PackedMatrix::pack(type, rows, cols, file.data(), scales.data());
  for (Isa isa : supported_isas()) {
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      // Batch sizes through every kernel path: 1, small tiles, tails, packed prefill blocks.
      for (int64_t n : {2, 3, 5, 7, 8, 9, 16, 17, 33, 40}) {
        const auto x = randn(size_t(n * cols), rng);
        std::vector<float> y(size_t(n * rows)), one(static_cast<size_t>(rows));
        matmul_with(isa, w, x.data(), n, y.data(), pool, opt);
        for (int64_t t = 0; t < n; ++t) {
          matmul_with(isa, w, x.data() + t * cols, 1, one.data(), pool, opt);
          ASSERT_EQ(0, std::memcmp(one.data(), y.data() + t * rows, size_t(rows) * 4))
              << isa_name(isa) << " " << dtype_name(type) << " n=" << n << " token " << t
              << " threads " << threads;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MatmulInvariance,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0,
                                           DType::Q4_0, DType::Q8_C, DType::Q4_G128,
                                           DType::FP8_E4M3, DType::Q4_K, DType::Q5_K, DType::Q6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Attention of n queries at pos0 in one call, and in a batch of jobs, equals each query alone;
// over f32 and over f16 rows (the paged cache's default).
class AttentionInvariance : public ::testing::TestWithParam<bool> {};

TEST_P(AttentionInvariance, QueriesGiveTheSameBitsAloneChunkedAndBatched) {
  const bool f16 = GetParam();
  std::mt19937 rng(12);
  for (int64_t head_dim : {16, 64, 80, 24}) {
    const int64_t n_heads = 4, n_kv = 2, keys = 45, bs = 16;
    const int64_t kv_dim = n_kv * head_dim, dim = n_heads * head_dim;
    // Head-major blocks as the paged cache stores them, in a scrambled block order.
    const int64_t n_blocks = (keys + bs - 1) / bs;
    std::vector<std::vector<float>> kb(static_cast<size_t>(n_blocks)),
        vb(static_cast<size_t>(n_blocks));
    std::vector<std::vector<uint16_t>> khb(static_cast<size_t>(n_blocks)),
        vhb(static_cast<size_t>(n_blocks));
    std::vector<const float*> kp, vp;
    std::vector<const uint16_t*> khp, vhp;
    for (int64_t b = n_blocks - 1; b >= 0; --b) {
      kb[size_t(b)] = randn(size_t(bs * kv_dim), rng);
      vb[size_t(b)] = randn(size_t(bs * kv_dim), rng);
      for (const float x : kb[size_t(b)]) khb[size_t(b)].push_back(fp32_to_fp16(x));
      for (const float x : vb[size_t(b)]) vhb[size_t(b)].push_back(fp32_to_fp16(x));
    }
    for (int64_t b = 0; b < n_blocks; ++b) {
      kp.push_back(kb[size_t(b)].data());
      vp.push_back(vb[size_t(b)].data());
      khp.push_back(khb[size_t(b)].data());
      vhp.push_back(vhb[size_t(b)].data());
    }
    const KvRows k = f16 ? KvRows{nullptr, bs, head_dim, bs * head_dim, khp.data()}
                         : KvRows{kp.data(), bs, head_dim, bs * head_dim};
    const KvRows v = f16 ? KvRows{nullptr, bs, head_dim, bs * head_dim, vhp.data()}
                         : KvRows{vp.data(), bs, head_dim, bs * head_dim};
    const auto q = randn(size_t(keys * dim), rng);
    const float scale = 0.125f;
    for (Isa isa : supported_isas()) {
      set_active_isa(isa);
      ThreadPool pool(2);
      // Alone: one query per call.
      std::vector<float> alone(size_t(keys * dim));
      for (int64_t t = 0; t < keys; ++t)
        attention({1, t, n_heads, n_kv, head_dim, scale}, q.data() + t * dim, k, v,
                  alone.data() + t * dim, pool);
      // Chunked prefill with uneven chunks (7, 10, 1, 27), then all chunks as one batch of jobs.
      std::vector<float> chunked(size_t(keys * dim)), batched(size_t(keys * dim));
      std::vector<AttentionJob> jobs;
      for (int64_t t0 = 0, i = 0; t0 < keys; ++i) {
        const int64_t len =
            std::min<int64_t>(keys - t0, std::vector<int64_t>{7, 10, 1, 27}[size_t(i % 4)]);
        const AttentionShape s{len, t0, n_heads, n_kv, head_dim, scale};
        attention(s, q.data() + t0 * dim, k, v, chunked.data() + t0 * dim, pool);
        jobs.push_back({s, q.data() + t0 * dim, k, v, batched.data() + t0 * dim});
        t0 += len;
      }
      attention_batch(jobs.data(), int64_t(jobs.size()), pool);
      for (int64_t t = 0; t < keys; ++t) {
        ASSERT_EQ(0, std::memcmp(alone.data() + t * dim, chunked.data() + t * dim, size_t(dim) * 4))
            << isa_name(isa) << " f16 " << f16 << " head_dim " << head_dim << " query " << t
            << " (chunked)";
        ASSERT_EQ(0, std::memcmp(alone.data() + t * dim, batched.data() + t * dim, size_t(dim) * 4))
            << isa_name(isa) << " f16 " << f16 << " head_dim " << head_dim << " query " << t
            << " (batched)";
      }
    }
    set_active_isa(supported_isas().back());
  }
}

INSTANTIATE_TEST_SUITE_P(KvTypes, AttentionInvariance, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "f16" : "f32"; });

}  // namespace
}  // namespace shrike::kernels
