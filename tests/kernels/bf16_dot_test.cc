// The BF16 dot-product path (kernels::set_bf16_dot): F16 / BF16 weights packed as BF16 pairs and
// multiplied by vdpbf16ps must equal the exact product of the bf16-rounded weights and
// activations up to f32 summation, keep batch invariance, and read back as the rounded weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"

namespace shrike::kernels {
namespace {

// The path exists on x86-64 builds only (other architectures check the refusal, last test); on
// an x86-64 CPU without AVX512_BF16 its tests skip and say why.
#if defined(__x86_64__)
float round_bf16(float f) {
  return bf16_to_fp32(fp32_to_bf16(f));
}

struct Problem {
  std::vector<uint8_t> file;  // rows of the type's file layout
  std::vector<float> w_bf16;  // the weights as the pairs hold them: [rows][cols]
  std::vector<float> x;       // [n][cols]
};

Problem make_problem(DType type, int64_t rows, int64_t cols, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Problem p;
  std::vector<float> w(size_t(rows * cols));
  for (auto& v : w) v = dist(rng);
  const int64_t row_bytes = dtype_row_bytes(type, cols);
  p.file.resize(size_t(rows * row_bytes));
  p.w_bf16.resize(w.size());
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(type, w.data() + r * cols, p.file.data() + r * row_bytes, cols);
    std::vector<float> back(static_cast<size_t>(cols));
    dequantize_row(type, p.file.data() + r * row_bytes, back.data(), cols);
    for (int64_t c = 0; c < cols; ++c) p.w_bf16[size_t(r * cols + c)] = round_bf16(back[size_t(c)]);
  }
  p.x.resize(size_t(n * cols));
  for (auto& v : p.x) v = dist(rng);
  return p;
}

PackedMatrix pack_pairs(DType type, int64_t rows, int64_t cols, const std::vector<uint8_t>& file) {
  set_bf16_dot(true);
  PackedMatrix m = PackedMatrix::pack(type, rows, cols, file.data());
  set_bf16_dot(false);
  return m;
}

#define SKIP_WITHOUT_BF16_DOT()                                                  \
  if (!bf16_dot_supported())                                                     \
  GTEST_SKIP() << "this CPU has no AVX512_BF16 (or this build no x86 kernels): " \
                  "the BF16 dot-product path cannot run here"

TEST(Bf16Dot, ProductsEqualTheRoundedOperandsExactProduct) {
  SKIP_WITHOUT_BF16_DOT();
  ThreadPool pool(2);
  struct Shape {
    int64_t rows, cols;
  };
  for (DType type : {DType::F16, DType::BF16})
    for (Shape s : {Shape{37, 67}, Shape{48, 256}, Shape{16, 1}, Shape{70, 130}, Shape{130, 64}})
      for (int64_t n : {1, 2, 3, 7, 8, 10, 13, 17}) {
        SCOPED_TRACE(std::string(dtype_name(type)) + " " + std::to_string(s.rows) + "x" +
                     std::to_string(s.cols) + " n=" + std::to_string(n));
        const Problem p = make_problem(type, s.rows, s.cols, n, uint32_t(s.rows * 31 + n));
        const PackedMatrix m = pack_pairs(type, s.rows, s.cols, p.file);
        ASSERT_TRUE(m.bf16_pairs());
        std::vector<float> y(size_t(n * s.rows));
        matmul(m, p.x.data(), n, y.data(), pool);
        for (int64_t t = 0; t < n; ++t)
          for (int64_t r = 0; r < s.rows; ++r) {
            double exact = 0, mag = 0;
            for (int64_t c = 0; c < s.cols; ++c) {
              const double prod = double(p.w_bf16[size_t(r * s.cols + c)]) *
                                  double(round_bf16(p.x[size_t(t * s.cols + c)]));
              exact += prod;
              mag += std::fabs(prod);
            }
            // f32 sums of exact bf16 products: error within a few ulps of the magnitude per add.
            ASSERT_NEAR(y[size_t(t * s.rows + r)], exact, 1e-6 * double(s.cols) * mag + 1e-30)
                << "row " << r << " token " << t;
          }
      }
}

TEST(Bf16Dot, SingleTokensSumAsInsideABatchWhenInvariant) {
  SKIP_WITHOUT_BF16_DOT();
  ThreadPool pool(2);
  const int64_t rows = 90, cols = 301, n = 11;
  const Problem p = make_problem(DType::F16, rows, cols, n, 5);
  const PackedMatrix m = pack_pairs(DType::F16, rows, cols, p.file);
  MatmulOptions inv;
  inv.batch_invariant = true;
  std::vector<float> batch(static_cast<size_t>(n * rows)), one(static_cast<size_t>(rows));
  matmul(m, p.x.data(), n, batch.data(), pool, inv);
  for (int64_t t = 0; t < n; ++t) {
    matmul(m, p.x.data() + t * cols, 1, one.data(), pool, inv);
    for (int64_t r = 0; r < rows; ++r)
      ASSERT_EQ(one[size_t(r)], batch[size_t(t * rows + r)]) << "row " << r << " token " << t;
  }
}

TEST(Bf16Dot, RowsReadBackAsTheRoundedWeightsAndStack) {
  SKIP_WITHOUT_BF16_DOT();
  ThreadPool pool(1);
  const int64_t rows = 32, cols = 45, n = 5;
  const Problem a = make_problem(DType::F16, rows, cols, n, 7);
  const Problem b = make_problem(DType::F16, rows, cols, n, 8);
  const PackedMatrix ma = pack_pairs(DType::F16, rows, cols, a.file);
  const PackedMatrix mb = pack_pairs(DType::F16, rows, cols, b.file);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    ma.dequantize_row(r, row.data());
    for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(row[size_t(c)], a.w_bf16[size_t(r * cols + c)]);
  }
  // Stacked pairs give each part's bits; a pairs part never stacks with a plain one.
  const PackedMatrix both = PackedMatrix::concat_rows({&ma, &mb});
  ASSERT_EQ(both.rows(), 2 * rows);
  EXPECT_TRUE(both.bf16_pairs());
  std::vector<float> ya(size_t(n * rows)), yb(size_t(n * rows)), yab(size_t(n * 2 * rows));
  matmul(ma, a.x.data(), n, ya.data(), pool);
  matmul(mb, a.x.data(), n, yb.data(), pool);
  matmul(both, a.x.data(), n, yab.data(), pool);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(yab[size_t(t * 2 * rows + r)], ya[size_t(t * rows + r)]);
      ASSERT_EQ(yab[size_t(t * 2 * rows + rows + r)], yb[size_t(t * rows + r)]);
    }
  const PackedMatrix plain = PackedMatrix::pack(DType::F16, rows, cols, b.file.data());
  EXPECT_FALSE(plain.bf16_pairs());
  EXPECT_EQ(PackedMatrix::concat_rows({&ma, &plain}).rows(), 0);
  // The scalar target reads the pairs as floats: the exact product of the rounded weights.
  std::vector<float> ys(size_t(n * rows));
  matmul_with(Isa::Scalar, ma, a.x.data(), n, ys.data(), pool);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double exact = 0;
      for (int64_t c = 0; c < cols; ++c)
        exact += double(a.w_bf16[size_t(r * cols + c)]) * double(a.x[size_t(t * cols + c)]);
      ASSERT_NEAR(ys[size_t(t * rows + r)], exact, 1e-4);
    }
}

#endif  // __x86_64__

TEST(Bf16Dot, IsOffByDefaultAndRefusedWithoutTheInstruction) {
  EXPECT_FALSE(bf16_dot());
  if (bf16_dot_supported()) {
    set_bf16_dot(true);
    EXPECT_TRUE(bf16_dot());
    set_bf16_dot(false);
  } else {
    EXPECT_THROW(set_bf16_dot(true), std::invalid_argument);
  }
  EXPECT_FALSE(bf16_dot());
}

}  // namespace
}  // namespace shrike::kernels
