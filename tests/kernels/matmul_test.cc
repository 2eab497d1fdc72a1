// Every matmul kernel (each ISA in supported_isas(), 1 and 2 threads) against matmul_reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"

namespace shrike::kernels {
namespace {

struct Case {
  DType type;
  int64_t rows, cols, n;
};

std::vector<uint8_t> random_weights(DType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> f(size_t(rows * cols));
  for (auto& v : f) v = dist(rng);
  // A few exact zeros and large values to exercise rounding and saturation-prone cases.
  if (!f.empty()) f[0] = 0.0f;
  if (f.size() > 5) f[5] = 7.5f;
  std::vector<uint8_t> file(size_t(rows * dtype_row_bytes(type, cols)));
  const size_t rb = size_t(dtype_row_bytes(type, cols));
  for (int64_t r = 0; r < rows; ++r) quantize_row(type, f.data() + r * cols, file.data() + r * rb, cols);
  return file;
}

// Tolerances, relative to sum_c |w_rc * x_tc| (the scale of the rounding error of any summation):
//  * F32 / F16 / BF16: the kernels compute the exact products of the stored weights with f32
//    accumulation in a different order than the double reference: error ~ cols * 2^-24 * sum|.|
//    at worst and ~ sqrt(cols) * 2^-24 typically; 1e-5 covers cols up to 4k with margin.
//  * Q8_0 / Q4_0 on SIMD ISAs: activations are quantised to int8 per block of 32 with scale
//    absmax/127, i.e. each activation moves by at most half a step = absmax/254 <= |x|max/254.
//    The error per product is then <= |w| * absmax_block / 254, so relative to sum|w*x| it is
//    bounded by (absmax/|x|) / 254; for Gaussian data the errors are random-signed and the
//    observed relative error is ~1e-3. We allow 1/127 (worst-case step, not half step) of
//    sum_c |w_rc| * absmax(x block): a provable bound, checked separately.
double tolerance_for(DType type, Isa isa) {
  if (type == DType::Q8_0 || type == DType::Q4_0) return isa == Isa::Scalar ? 1e-5 : -1;  // -1: block bound
  return 1e-5;
}

void check_case(const Case& c, Isa isa, int threads, uint32_t seed) {
  std::mt19937 rng(seed);
  const auto file = random_weights(c.type, c.rows, c.cols, rng);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(c.n * c.cols));
  for (auto& v : x) v = dist(rng);
  // Awkward activations: an all-zero block (scale 0), a block of huge values, a lone outlier.
  if (c.cols >= 96) {
    for (int64_t k = 32; k < 64; ++k) x[size_t(k)] = 0.0f;
    for (int64_t k = 64; k < 96; ++k) x[size_t(c.n - 1) * size_t(c.cols) + size_t(k)] *= 1e4f;
    x[size_t(c.cols / 2)] = -300.0f;
  }
  std::vector<float> want(size_t(c.n * c.rows)), got(size_t(c.n * c.rows), NAN);
  matmul_reference(c.type, c.rows, c.cols, file.data(), x.data(), c.n, want.data());
  const PackedMatrix w = PackedMatrix::pack(c.type, c.rows, c.cols, file.data());
  ThreadPool pool(threads);
  matmul_with(isa, w, x.data(), c.n, got.data(), pool);

  const double tol = tolerance_for(c.type, isa);
  std::vector<float> row(size_t(c.cols));
  const size_t rb = size_t(dtype_row_bytes(c.type, c.cols));
  int bad = 0;
  for (int64_t r = 0; r < c.rows && bad < 5; ++r) {
    dequantize_row(c.type, file.data() + r * rb, row.data(), c.cols);
    for (int64_t t = 0; t < c.n && bad < 5; ++t) {
      const float* xt = x.data() + t * c.cols;
      double abs_sum = 0, bound = 0;
      for (int64_t k = 0; k < c.cols; ++k) abs_sum += std::fabs(double(row[size_t(k)]) * xt[k]);
      if (tol < 0) {
        for (int64_t b = 0; b < c.cols; b += 32) {
          double amax = 0, wsum = 0;
          for (int64_t k = b; k < b + 32; ++k) {
            amax = std::max(amax, double(std::fabs(xt[k])));
            wsum += std::fabs(row[size_t(k)]);
          }
          bound += wsum * amax / 127.0;
        }
        bound += 1e-5 * abs_sum;
      } else {
        bound = tol * abs_sum + 1e-30;
      }
      const double g = got[size_t(t * c.rows + r)], e = want[size_t(t * c.rows + r)];
      if (!(std::fabs(g - e) <= bound)) {
        ++bad;
        ADD_FAILURE() << dtype_name(c.type) << " " << isa_name(isa) << " threads=" << threads
                      << " rows=" << c.rows << " cols=" << c.cols << " n=" << c.n << " at r=" << r
                      << " t=" << t << ": got " << g << " want " << e << " bound " << bound;
      }
    }
  }
}

std::vector<Case> float_cases(DType t) {
  return {{t, 1, 1, 1},   {t, 3, 31, 1},  {t, 33, 33, 1}, {t, 31, 3, 3},  {t, 17, 64, 5},
          {t, 70, 100, 9}, {t, 64, 255, 16}, {t, 4095, 33, 2}, {t, 33, 4095, 1}, {t, 129, 96, 37},
          {t, 300, 2050, 40}};
}
std::vector<Case> quant_cases(DType t) {
  return {{t, 1, 32, 1},  {t, 3, 96, 1},  {t, 33, 32, 3},   {t, 31, 64, 5},  {t, 17, 96, 9},
          {t, 70, 128, 16}, {t, 4095, 32, 2}, {t, 33, 4064, 1}, {t, 19, 4128, 4}, {t, 129, 96, 37},
          {t, 300, 4128, 40}};
}

class MatmulTest : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulTest, MatchesReferenceOnEveryIsaAndThreadCount) {
  const DType type = GetParam();
  const bool quant = type == DType::Q8_0 || type == DType::Q4_0;
  uint32_t seed = 1;
  for (const Case& c : quant ? quant_cases(type) : float_cases(type))
    for (Isa isa : supported_isas())
      for (int threads : {1, 2}) check_case(c, isa, threads, seed++);
}

TEST_P(MatmulTest, PackDequantizeRoundTripIsExact) {
  const DType type = GetParam();
  std::mt19937 rng(7);
  for (int64_t rows : {1, 17, 40}) {
    const int64_t cols = 96;
    const auto file = random_weights(type, rows, cols, rng);
    const PackedMatrix w = PackedMatrix::pack(type, rows, cols, file.data());
    EXPECT_EQ(w.weight_bytes(), file.size());
    std::vector<float> want(static_cast<size_t>(cols)), got(static_cast<size_t>(cols));
    const size_t rb = size_t(dtype_row_bytes(type, cols));
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(type, file.data() + r * rb, want.data(), cols);
      w.dequantize_row(r, got.data());
      for (int64_t c = 0; c < cols; ++c)
        ASSERT_EQ(std::memcmp(&want[size_t(c)], &got[size_t(c)], 4), 0) << "r=" << r << " c=" << c;
    }
  }
}

TEST(MatmulDispatch, ActiveIsaMatchesExplicit) {
  std::mt19937 rng(3);
  const int64_t rows = 40, cols = 64, n = 3;
  const auto file = random_weights(DType::F16, rows, cols, rng);
  std::vector<float> x(size_t(n * cols), 0.5f), a(size_t(n * rows)), b(size_t(n * rows));
  const PackedMatrix w = PackedMatrix::pack(DType::F16, rows, cols, file.data());
  ThreadPool pool(2);
  matmul(w, x.data(), n, a.data(), pool);
  matmul_with(active_isa(), w, x.data(), n, b.data(), pool);
  EXPECT_EQ(a, b);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulTest,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0,
                                           DType::Q4_0),
                         [](const ::testing::TestParamInfo<DType>& i) {
                           return std::string(dtype_name(i.param));
                         });

}  // namespace
}  // namespace shrike::kernels
