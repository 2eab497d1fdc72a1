#include "quant/coverage.h"

#include <gtest/gtest.h>

#include <random>

namespace shrike::quant {
namespace {

// Statistics of n rows drawn by `row(rng, x)`, as collect_input_stats keeps them.
template <typename RowFn>
InputStats stats_of(int64_t dim, int64_t n, uint32_t seed, RowFn row) {
  InputStats s;
  s.dim = dim;
  s.abs_sum.assign(size_t(dim), 0.0);
  s.gram.assign(size_t(dim * dim), 0.0);
  std::mt19937 rng(seed);
  std::vector<double> x(static_cast<size_t>(dim));
  for (int64_t r = 0; r < n; ++r) {
    row(rng, x);
    for (int64_t i = 0; i < dim; ++i) {
      s.abs_sum[size_t(i)] += std::fabs(x[size_t(i)]);
      for (int64_t j = 0; j < dim; ++j) s.gram[size_t(i * dim + j)] += x[size_t(i)] * x[size_t(j)];
    }
  }
  s.n_rows = n;
  return s;
}

constexpr int64_t kDim = 16;

void gaussian(std::mt19937& rng, std::vector<double>& x) {
  std::normal_distribution<double> g;
  for (double& v : x) v = g(rng);
}

TEST(CalibrationCoverage, SameDistributionReadsAsCovered) {
  const auto calib = stats_of(kDim, 4000, 1, gaussian);
  const auto traffic = stats_of(kDim, 4000, 2, gaussian);
  const auto rows = calibration_coverage({{"blk.0.attn_in", calib}}, {{"blk.0.attn_in", traffic}});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].key, "blk.0.attn_in");
  EXPECT_EQ(rows[0].dim, kDim);
  EXPECT_NEAR(rows[0].max_channel_ratio, 1.0, 0.1);
  EXPECT_EQ(rows[0].channels_over, 0);
  // tr(Σc⁻¹Σt)/dim for equal identity covariances is 1/(1 + damp).
  EXPECT_NEAR(rows[0].whitened_energy, 1.0, 0.1);
}

TEST(CalibrationCoverage, ChannelCalibrationLeftQuietIsFlagged) {
  // Calibration barely drives channel 3; traffic drives it like the others.
  const auto calib = stats_of(kDim, 4000, 1, [](std::mt19937& rng, std::vector<double>& x) {
    gaussian(rng, x);
    x[3] *= 0.01;
  });
  const auto traffic = stats_of(kDim, 4000, 2, gaussian);
  const auto rows = calibration_coverage({{"k", calib}}, {{"k", traffic}});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_GT(rows[0].max_channel_ratio, 50.0);
  EXPECT_EQ(rows[0].channels_over, 1);
  // One of 16 directions is ~1/damp times under-covered: the energy rises well above 1.
  EXPECT_GT(rows[0].whitened_energy, 3.0);
}

TEST(CalibrationCoverage, DirectionOutsideCalibrationRaisesWhitenedEnergyOnly) {
  // Every channel has the same magnitude in both sets, but traffic's channels 0 and 1 move
  // against each other where calibration's move together: per-channel salience cannot see it,
  // the second moments can.
  const auto together = [](std::mt19937& rng, std::vector<double>& x) {
    gaussian(rng, x);
    x[1] = x[0];
  };
  const auto opposed = [](std::mt19937& rng, std::vector<double>& x) {
    gaussian(rng, x);
    x[1] = -x[0];
  };
  const auto calib = stats_of(kDim, 4000, 1, together);
  const auto traffic = stats_of(kDim, 4000, 2, opposed);
  const auto rows = calibration_coverage({{"k", calib}}, {{"k", traffic}});
  EXPECT_NEAR(rows[0].max_channel_ratio, 1.0, 0.1);
  EXPECT_GT(rows[0].whitened_energy, 3.0);
  const auto same =
      calibration_coverage({{"k", calib}}, {{"k", stats_of(kDim, 4000, 3, together)}});
  EXPECT_LT(same[0].whitened_energy, 1.2);
}

TEST(CalibrationCoverage, MismatchedStatisticsAreErrors) {
  const auto a = stats_of(kDim, 100, 1, gaussian);
  const auto b = stats_of(kDim / 2, 100, 1, gaussian);
  EXPECT_THROW(calibration_coverage({{"k", a}}, {{"k", b}}), std::invalid_argument);
  EXPECT_THROW(calibration_coverage({{"j", a}}, {{"k", a}}), std::invalid_argument);
  InputStats no_gram = a;
  no_gram.gram.clear();
  EXPECT_THROW(calibration_coverage({{"k", no_gram}}, {{"k", a}}), std::invalid_argument);
  EXPECT_THROW(calibration_coverage({{"k", a}}, {{"k", InputStats{}}}), std::invalid_argument);
}

TEST(CalibrationCoverage, TableNamesEveryInputAndTheWorst) {
  const auto calib = stats_of(kDim, 500, 1, gaussian);
  const auto quiet = stats_of(kDim, 500, 2, [](std::mt19937& rng, std::vector<double>& x) {
    gaussian(rng, x);
    x[0] *= 0.01;
  });
  const auto rows = calibration_coverage({{"blk.0.ffn_in", calib}, {"blk.1.ffn_in", quiet}},
                                         {{"blk.0.ffn_in", calib}, {"blk.1.ffn_in", calib}});
  const std::string t = format_coverage(rows);
  EXPECT_NE(t.find("blk.0.ffn_in"), std::string::npos);
  EXPECT_NE(t.find("worst: blk.1.ffn_in"), std::string::npos);
}

}  // namespace
}  // namespace shrike::quant
