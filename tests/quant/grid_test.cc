// The quantisation grids and GPTQ: round-to-nearest through RowQuantizer writes exactly the
// reference quantiser's bytes; GPTQ equals round-to-nearest when the inputs are uncorrelated and
// beats it on the layer's output error when they are not.
#include "quant/grid.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "quant/calibration.h"
#include "quant/gptq.h"

namespace shrike::quant {
namespace {

const DType kTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_G128, DType::Q8_C, DType::FP8_E4M3,
                        DType::F16,  DType::BF16, DType::Q4_K,    DType::Q5_K, DType::Q6_K};

std::vector<float> random_row(int64_t n, uint32_t seed, float outlier = 0) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.05f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  if (outlier != 0) v[static_cast<size_t>(n / 3)] = outlier;
  return v;
}

TEST(RowQuantizer, RoundToNearestWritesTheReferenceBytes) {
  for (DType t : kTypes) {
    const int64_t n = 512;  // two k-quant super-blocks
    for (uint32_t seed = 1; seed <= 5; ++seed) {
      const auto row = random_row(n, seed, seed == 3 ? 1.5f : 0.0f);
      const size_t bytes = size_t(dtype_row_bytes(t, n));
      std::vector<uint8_t> want(bytes), got(bytes);
      float want_scale = 0, got_scale = 0;
      quantize_row(t, row.data(), want.data(), n, &want_scale);
      RowQuantizer rq(t, n);
      std::vector<float> deq(static_cast<size_t>(n));
      rq.round_to_nearest(row.data(), deq.data());
      rq.write(got.data(), &got_scale);
      EXPECT_EQ(got, want) << dtype_name(t) << " seed " << seed;
      if (dtype_has_row_scale(t)) {
        EXPECT_EQ(got_scale, want_scale) << dtype_name(t);
      }
      // The values RowQuantizer reports are what dequantisation of the bytes gives.
      std::vector<float> ref(static_cast<size_t>(n));
      dequantize_row(t, want.data(), ref.data(), n, want_scale);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(deq[size_t(i)], ref[size_t(i)]) << dtype_name(t) << " " << i;
    }
  }
}

TEST(RowQuantizer, RejectsRowsTheTypeCannotHold) {
  EXPECT_THROW(RowQuantizer(DType::Q4_0, 48), std::invalid_argument);
  EXPECT_THROW(RowQuantizer(DType::Q4_G128, 96), std::invalid_argument);
  EXPECT_NO_THROW(RowQuantizer(DType::Q8_C, 172));
  EXPECT_THROW(RowQuantizer(DType::Q4_K, 128), std::invalid_argument);
  EXPECT_THROW(RowQuantizer(DType::Q2_K, 256), std::invalid_argument);  // read, not written
  EXPECT_THROW(RowQuantizer(DType::IQ4_XS, 256), std::invalid_argument);
  EXPECT_FALSE(type_fits(DType::Q8_0, 172));
  EXPECT_TRUE(type_fits(DType::FP8_E4M3, 172));
  EXPECT_TRUE(type_fits(DType::Q4_G128, 256));
}

TEST(Gptq, InverseHessianFactor) {
  const int64_t n = 24;
  std::mt19937 rng(7);
  std::normal_distribution<double> d;
  std::vector<double> x(size_t(n * 3 * n));
  for (double& v : x) v = d(rng);
  std::vector<double> h(size_t(n * n), 0.0);  // XᵀX of 3n rows: positive definite
  for (int64_t r = 0; r < 3 * n; ++r)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        h[size_t(i * n + j)] += x[size_t(r * n + i)] * x[size_t(r * n + j)];
  std::vector<double> damped = h, u;
  ASSERT_TRUE(inverse_hessian_factor(damped, n, 0.0, u));
  // U is upper triangular and H · (UᵀU) = I.
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < i; ++j) EXPECT_EQ(u[size_t(i * n + j)], 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k) {
        double hinv_kj = 0;
        for (int64_t m = 0; m < n; ++m) hinv_kj += u[size_t(m * n + k)] * u[size_t(m * n + j)];
        s += h[size_t(i * n + k)] * hinv_kj;
      }
      EXPECT_NEAR(s, i == j ? 1.0 : 0.0, 1e-8) << i << "," << j;
    }
}

// Rows x cols weights, inputs X [samples][cols] with strongly correlated channels.
struct Layer {
  int64_t rows = 64, cols = 256, samples = 2048;
  std::vector<float> w, x;
  std::vector<double> gram;
  explicit Layer(uint32_t seed, bool correlated) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d;
    w.resize(size_t(rows * cols));
    for (float& v : w) v = 0.05f * d(rng);
    x.resize(size_t(samples * cols));
    for (int64_t s = 0; s < samples; ++s) {
      const float common = d(rng);
      for (int64_t c = 0; c < cols; ++c)
        x[size_t(s * cols + c)] = correlated ? common + 0.3f * d(rng) : d(rng);
    }
    gram.assign(size_t(cols * cols), 0.0);
    for (int64_t s = 0; s < samples; ++s)
      for (int64_t i = 0; i < cols; ++i)
        for (int64_t j = 0; j < cols; ++j)
          gram[size_t(i * cols + j)] += double(x[size_t(s * cols + i)]) * x[size_t(s * cols + j)];
  }
  double output_error(const std::vector<float>& wq) const {
    double e = 0;
    for (int64_t s = 0; s < samples; ++s)
      for (int64_t r = 0; r < rows; ++r) {
        double y = 0;
        for (int64_t c = 0; c < cols; ++c)
          y += double(w[size_t(r * cols + c)] - wq[size_t(r * cols + c)]) * x[size_t(s * cols + c)];
        e += y * y;
      }
    return e;
  }
};

std::vector<float> dequantize(DType t, const std::vector<uint8_t>& bytes,
                              const std::vector<float>& scales, int64_t rows, int64_t cols) {
  std::vector<float> out(size_t(rows * cols));
  const size_t rb = size_t(dtype_row_bytes(t, cols));
  for (int64_t r = 0; r < rows; ++r)
    dequantize_row(t, bytes.data() + size_t(r) * rb, out.data() + r * cols, cols,
                   scales.empty() ? 1.0f : scales[size_t(r)]);
  return out;
}

TEST(Gptq, BeatsRoundToNearestOnCorrelatedInputs) {
  ThreadPool pool(2);
  const Layer layer(11, true);
  for (DType t : {DType::Q4_0, DType::Q4_G128, DType::Q8_C, DType::Q8_0, DType::FP8_E4M3,
                  DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const size_t rb = size_t(dtype_row_bytes(t, layer.cols));
    std::vector<uint8_t> gptq(rb * size_t(layer.rows)), rtn(gptq.size());
    std::vector<float> gs(dtype_has_row_scale(t) ? size_t(layer.rows) : 0), rs(gs.size());
    gptq_quantize(layer.w.data(), layer.rows, layer.cols, layer.gram, layer.samples, t, 0.01,
                  gptq.data(), gs.empty() ? nullptr : gs.data(), pool);
    for (int64_t r = 0; r < layer.rows; ++r)
      quantize_row(t, layer.w.data() + r * layer.cols, rtn.data() + size_t(r) * rb, layer.cols,
                   rs.empty() ? nullptr : &rs[size_t(r)]);
    const double e_gptq = layer.output_error(dequantize(t, gptq, gs, layer.rows, layer.cols));
    const double e_rtn = layer.output_error(dequantize(t, rtn, rs, layer.rows, layer.cols));
    EXPECT_LT(e_gptq, 0.8 * e_rtn) << dtype_name(t) << ": gptq " << e_gptq << " rtn " << e_rtn;
  }
}

TEST(Gptq, EqualsRoundToNearestWhenInputsAreUncorrelated) {
  // H = c·I: no column can compensate another, so every rounding is to nearest.
  ThreadPool pool(1);
  const Layer layer(5, false);
  const int64_t rows = layer.rows, cols = layer.cols;
  std::vector<double> gram(size_t(cols * cols), 0.0);
  for (int64_t i = 0; i < cols; ++i) gram[size_t(i * cols + i)] = 4.0;
  for (DType t :
       {DType::Q4_0, DType::Q8_0, DType::Q4_G128, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const size_t rb = size_t(dtype_row_bytes(t, cols));
    std::vector<uint8_t> gptq(rb * size_t(rows)), rtn(gptq.size());
    gptq_quantize(layer.w.data(), rows, cols, gram, 1, t, 0.01, gptq.data(), nullptr, pool);
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(t, layer.w.data() + r * layer.cols, rtn.data() + size_t(r) * rb, cols);
    EXPECT_EQ(gptq, rtn) << dtype_name(t);
  }
}

TEST(Calibration, InputKeysGroupTheMatricesThatShareAnInput) {
  EXPECT_EQ(input_key("blk.0.attn_q.weight"), "blk.0.attn_in");
  EXPECT_EQ(input_key("blk.12.attn_v.weight"), "blk.12.attn_in");
  EXPECT_EQ(input_key("blk.3.attn_output.weight"), "blk.3.attn_out_in");
  EXPECT_EQ(input_key("blk.3.ffn_up.weight"), "blk.3.ffn_in");
  EXPECT_EQ(input_key("blk.3.ffn_gate.weight"), "blk.3.ffn_in");
  EXPECT_EQ(input_key("blk.3.ffn_down.weight"), "blk.3.ffn_down_in");
  for (const char* none :
       {"token_embd.weight", "output.weight", "blk.0.attn_norm.weight", "blk.x.attn_q.weight",
        "blk..attn_q.weight", "blk.0.attn_q.bias", "blk.0.attn_q.weight.scale"})
    EXPECT_EQ(input_key(none), "") << none;
}

}  // namespace
}  // namespace shrike::quant
