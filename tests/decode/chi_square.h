// Pearson's chi-square goodness-of-fit test for the sampling tests: the statistic over observed
// counts against expected probabilities, and its p-value from the regularized upper incomplete
// gamma function (series below a + 1, Lentz's continued fraction above, as in Numerical
// Recipes' gammq).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace shrike::testing {

// Q(a, x) = Gamma(a, x) / Gamma(a), for a > 0, x >= 0.
inline double regularized_gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  constexpr double kEps = 1e-15;
  constexpr double kTiny = std::numeric_limits<double>::min() / kEps;
  const double log_prefix = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1) {  // P(a, x) = x^a e^-x / Gamma(a + 1) * sum x^n / ((a + 1) ... (a + n))
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 10000 && std::fabs(term) > std::fabs(sum) * kEps; ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return 1.0 - sum * std::exp(log_prefix);
  }
  double b = x + 1 - a, c = 1 / kTiny, d = 1 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < kEps) break;
  }
  return std::exp(log_prefix) * h;
}

// P(chi-square with df degrees of freedom >= statistic).
inline double chi_square_p_value(double statistic, int64_t df) {
  return regularized_gamma_q(double(df) / 2, statistic / 2);
}

struct ChiSquare {
  double statistic = 0;
  int64_t df = 0;
  double p_value = 1;
  int64_t impossible = 0;  // observations in bins of probability 0: any is a failure by itself
};

// Bins expected to hold fewer than 5 observations are pooled into one (the usual validity rule
// of the chi-square approximation); bins of probability 0 are left out and counted apart.
inline ChiSquare chi_square(const std::vector<int64_t>& observed,
                            const std::vector<double>& expected_probs) {
  int64_t n = 0;
  for (int64_t o : observed) n += o;
  ChiSquare r;
  double pooled_expected = 0, pooled_observed = 0;
  int64_t bins = 0;
  const auto add = [&](double o, double e) {
    r.statistic += (o - e) * (o - e) / e;
    ++bins;
  };
  for (size_t i = 0; i < observed.size(); ++i) {
    const double e = expected_probs[i] * double(n);
    if (expected_probs[i] <= 0) {
      r.impossible += observed[i];
    } else if (e < 5) {
      pooled_expected += e;
      pooled_observed += double(observed[i]);
    } else {
      add(double(observed[i]), e);
    }
  }
  if (pooled_expected > 0) add(pooled_observed, pooled_expected);
  r.df = bins - 1;
  r.p_value = r.df > 0 ? chi_square_p_value(r.statistic, r.df) : 1.0;
  return r;
}

}  // namespace shrike::testing
