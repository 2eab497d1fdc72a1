// The chi-square p-value the sampling tests rely on, against closed forms and table values.
#include "decode/chi_square.h"

#include <gtest/gtest.h>

#include <cmath>

namespace shrike::testing {
namespace {

TEST(ChiSquare, OneDegreeOfFreedomIsTheComplementaryErrorFunction) {
  // Both branches: the series (x < a + 1 = 1.5) and the continued fraction.
  for (double x : {0.01, 0.5, 1.0, 2.0, 3.841458820694124, 10.0, 30.0, 80.0})
    EXPECT_NEAR(chi_square_p_value(x, 1), std::erfc(std::sqrt(x / 2)),
                1e-12 * std::max(1.0, std::erfc(std::sqrt(x / 2))) + 1e-300)
        << x;
}

TEST(ChiSquare, EvenDegreesOfFreedomArePoissonTails) {
  // Q(k, y) = e^-y sum_{i < k} y^i / i! for an integer k = df / 2.
  for (int64_t df : {2, 4, 10, 40})
    for (double x : {0.5, 3.0, double(df), 2.0 * double(df), 5.0 * double(df)}) {
      const double y = x / 2;
      double term = 1, sum = 0;
      for (int64_t i = 0; i < df / 2; ++i) {
        sum += term;
        term *= y / double(i + 1);
      }
      const double expected = std::exp(-y) * sum;
      EXPECT_NEAR(chi_square_p_value(x, df), expected, 1e-12 + 1e-10 * expected) << df << " " << x;
    }
}

TEST(ChiSquare, TableCriticalValues) {
  EXPECT_NEAR(chi_square_p_value(3.841458820694124, 1), 0.05, 1e-9);
  EXPECT_NEAR(chi_square_p_value(6.634896601021214, 1), 0.01, 1e-9);
  EXPECT_NEAR(chi_square_p_value(13.276704135987622, 4), 0.01, 1e-9);
  EXPECT_NEAR(chi_square_p_value(18.307038053275146, 10), 0.05, 1e-9);
  EXPECT_NEAR(chi_square_p_value(16.918977604620448, 9), 0.05, 1e-9);
  EXPECT_NEAR(chi_square_p_value(124.34211340400407, 100), 0.05, 1e-9);
  EXPECT_DOUBLE_EQ(chi_square_p_value(0, 5), 1.0);
}

TEST(ChiSquare, StatisticPoolsSmallBinsAndCountsImpossibleOnes) {
  // 100 observations (the impossible one included); expected 50, 45, 3 and 2 (the last two
  // pooled into one bin of 5), and 0.
  const ChiSquare r = chi_square({50, 44, 4, 1, 1}, {0.5, 0.45, 0.03, 0.02, 0.0});
  EXPECT_EQ(r.impossible, 1);
  EXPECT_EQ(r.df, 2);
  const double stat = 0.0 + 1.0 / 45 + 0.0;  // (50-50)^2/50 + (44-45)^2/45 + (5-5)^2/5
  EXPECT_NEAR(r.statistic, stat, 1e-12);
  EXPECT_NEAR(r.p_value, chi_square_p_value(stat, 2), 1e-15);
  EXPECT_NEAR(r.p_value, std::exp(-stat / 2), 1e-12);
}

}  // namespace
}  // namespace shrike::testing
