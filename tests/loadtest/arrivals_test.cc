// Arrival schedules: gamma gaps have the asked mean and shape; trace replay reproduces the trace.
#include "loadtest/arrivals.h"

#include <gtest/gtest.h>

#include <cmath>

namespace shrike::loadtest {
namespace {

void expect_gamma(double rate, double burstiness) {
  GammaGaps g(rate, burstiness, 42);
  const int n = 200000;
  double sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    const double x = g.next();
    ASSERT_GE(x, 0);
    sum += x;
    sum2 += x * x;
  }
  const double mean = sum / n, var = sum2 / n - mean * mean;
  const double cv = std::sqrt(var) / mean;
  // Standard error of the mean is cv/sqrt(n) relative (< 0.5% here); 2% cannot flake.
  EXPECT_NEAR(mean, 1 / rate, 0.02 / rate);
  EXPECT_NEAR(cv, 1 / std::sqrt(burstiness), 0.03 / std::sqrt(burstiness));
}

TEST(LoadtestArrivals, PoissonGapsHaveMeanOneOverRateAndCvOne) {
  expect_gamma(10, 1.0);
}
TEST(LoadtestArrivals, BurstyGapsHaveCvTwoAtShapeQuarter) {
  expect_gamma(250, 0.25);
}
TEST(LoadtestArrivals, RegularGapsAtShapeFour) {
  expect_gamma(3, 4.0);
}

TEST(LoadtestArrivals, SeededAndDeterministic) {
  auto a = rate_schedule(5, 0.5, 9, 10, 10), b = rate_schedule(5, 0.5, 9, 10, 10),
       c = rate_schedule(5, 0.5, 10, 10, 10);
  EXPECT_EQ(a.next()->at, 0.0);  // first arrival at the start
  b.next();
  c.next();
  bool differ = false;
  for (int i = 0; i < 100; ++i) {
    const double x = a.next()->at;
    EXPECT_EQ(x, b.next()->at);
    differ |= x != c.next()->at;
  }
  EXPECT_TRUE(differ);
  EXPECT_EQ(a.intended_rate, 5);
}

TEST(LoadtestArrivals, RejectsNonPositiveRateOrShape) {
  EXPECT_THROW(GammaGaps(0, 1, 1), std::invalid_argument);
  EXPECT_THROW(GammaGaps(1, 0, 1), std::invalid_argument);
}

TEST(LoadtestArrivals, TraceScheduleReproducesArrivalsAndLengths) {
  std::vector<TraceEntry> t = {{0, 100, 10, {}}, {0.5, 200, 20, {1, 2}}, {2.25, 300, 30, {}}};
  auto s = trace_schedule(transform_trace(t, 1, 1, 0, 0));
  EXPECT_NEAR(s.intended_rate, 2 / 2.25, 1e-12);
  const double want[] = {0, 0.5, 2.25};
  for (int i = 0; i < 3; ++i) {
    auto p = s.next();
    ASSERT_TRUE(p);
    EXPECT_DOUBLE_EQ(p->at, want[i]);
    EXPECT_EQ(p->input_tokens, 100 * (i + 1));
    EXPECT_EQ(p->output_tokens, 10 * (i + 1));
  }
  EXPECT_FALSE(s.next());
}

TEST(LoadtestArrivals, TraceSpeedupLengthScaleAndWindow) {
  std::vector<TraceEntry> t = {{0, 100, 10, {}}, {1, 200, 3, {}}, {2, 300, 30, {}}, {4, 5, 1, {}}};
  const auto out = transform_trace(t, /*speedup=*/2, /*length_scale=*/0.1, 1, 4);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_DOUBLE_EQ(out[0].t, 0);
  EXPECT_DOUBLE_EQ(out[1].t, 0.5);
  EXPECT_EQ(out[0].input_tokens, 20);
  EXPECT_EQ(out[0].output_tokens, 1);  // never below one token
  EXPECT_EQ(out[1].output_tokens, 3);
}

TEST(LoadtestArrivals, ClosedLoopNeverRunsOut) {
  auto s = closed_loop_schedule(8, 5, 6);
  EXPECT_EQ(s.concurrency, 8);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(s.next()->output_tokens, 6);
}

}  // namespace
}  // namespace shrike::loadtest
