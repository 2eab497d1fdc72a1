#include "quant/coverage.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "quant/gptq.h"

namespace shrike::quant {
namespace {

void check_stats(const InputStats& s, const std::string& key, const char* which) {
  if (s.dim <= 0 || s.n_rows <= 0 || int64_t(s.abs_sum.size()) != s.dim ||
      int64_t(s.gram.size()) != s.dim * s.dim)
    throw std::invalid_argument("calibration coverage: " + std::string(which) + " statistics of " +
                                key + " are empty or have no Gram matrix");
}

InputCoverage compare(const std::string& key, const InputStats& c, const InputStats& t,
                      const CoverageOptions& o) {
  const int64_t n = c.dim;
  InputCoverage r;
  r.key = key;
  r.dim = n;

  // Channel salience. A channel calibration never excited would divide by zero: floor the
  // denominator at a millionth of the mean channel magnitude, so it reads as "very large".
  const std::vector<float> cm = c.mean_abs(), tm = t.mean_abs();
  double mean_c = 0;
  for (float v : cm) mean_c += v;
  mean_c = mean_c / double(n);
  const double smallest = std::max(1e-30, 1e-6 * mean_c);
  for (int64_t i = 0; i < n; ++i) {
    const double ratio = double(tm[size_t(i)]) / std::max(double(cm[size_t(i)]), smallest);
    r.max_channel_ratio = std::max(r.max_channel_ratio, ratio);
    if (ratio > o.ratio_threshold) ++r.channels_over;
  }

  // Whitened energy: with Σc⁻¹ = UᵀU (inverse_hessian_factor), tr(Σc⁻¹ Σt) = Σ_i u_iᵀ Σt u_i
  // over U's rows u_i.
  std::vector<double> hc(c.gram.size()), u;
  for (size_t i = 0; i < hc.size(); ++i) hc[i] = c.gram[i] / double(c.n_rows);
  for (int64_t i = 0; i < n; ++i)
    if (hc[size_t(i * n + i)] == 0) hc[size_t(i * n + i)] = 1;  // as GPTQ: unit curvature
  if (!inverse_hessian_factor(hc, n, o.damp, u))
    throw std::runtime_error("calibration coverage: " + key +
                             ": calibration's second-moment matrix is not positive definite");
  const double inv_t = 1.0 / double(t.n_rows);
  double trace = 0;
  std::vector<double> su(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double* ui = u.data() + i * n;  // upper triangular: entries j >= i
    for (int64_t a = 0; a < n; ++a) {
      double s = 0;
      const double* row = t.gram.data() + a * n;
      for (int64_t j = i; j < n; ++j) s += row[j] * ui[j];
      su[size_t(a)] = s * inv_t;
    }
    for (int64_t a = i; a < n; ++a) trace += ui[a] * su[size_t(a)];
  }
  r.whitened_energy = trace / double(n);
  return r;
}

}  // namespace

std::vector<InputCoverage> calibration_coverage(const std::map<std::string, InputStats>& calib,
                                                const std::map<std::string, InputStats>& traffic,
                                                const CoverageOptions& o) {
  std::vector<InputCoverage> rows;
  for (const auto& [key, t] : traffic) {
    const auto it = calib.find(key);
    if (it == calib.end())
      throw std::invalid_argument("calibration coverage: calibration has no statistics for " + key);
    check_stats(it->second, key, "calibration");
    check_stats(t, key, "traffic");
    if (it->second.dim != t.dim)
      throw std::invalid_argument("calibration coverage: " + key + " has " +
                                  std::to_string(it->second.dim) + " channels in calibration but " +
                                  std::to_string(t.dim) + " in traffic");
    rows.push_back(compare(key, it->second, t, o));
  }
  return rows;
}

std::string format_coverage(const std::vector<InputCoverage>& rows, const CoverageOptions& o) {
  std::string s;
  char line[256];
  char over[32];
  std::snprintf(over, sizeof over, "ch. > %gx", o.ratio_threshold);
  std::snprintf(line, sizeof line, "%-22s %6s %14s %12s %16s\n", "matrix input", "dim",
                "max ch. ratio", over, "whitened energy");
  s += line;
  const InputCoverage* worst = nullptr;
  for (const InputCoverage& r : rows) {
    std::snprintf(line, sizeof line, "%-22s %6lld %14.2f %12lld %16.2f\n", r.key.c_str(),
                  static_cast<long long>(r.dim), r.max_channel_ratio,
                  static_cast<long long>(r.channels_over), r.whitened_energy);
    s += line;
    if (!worst || r.whitened_energy > worst->whitened_energy) worst = &r;
  }
  if (worst) {
    std::snprintf(
        line, sizeof line,
        "worst: %s (whitened energy %.2f; 1 = traffic's inputs look like calibration's)\n",
        worst->key.c_str(), worst->whitened_energy);
    s += line;
  }
  return s;
}

}  // namespace shrike::quant
