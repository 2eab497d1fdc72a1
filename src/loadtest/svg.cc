// A hand-written SVG: one empirical CDF line per metric over a log10 millisecond axis (TTFT and
// ITL differ by orders of magnitude, so a linear axis would squash one of them).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "loadtest/report.h"

namespace shrike::loadtest {

std::string svg_cdf(const RunResult& run) {
  struct Series {
    const char* name;
    const char* colour;
    std::vector<double> ms;
  };
  std::vector<Series> series = {{"TTFT", "#1f77b4", {}},
                                {"TPOT", "#ff7f0e", {}},
                                {"ITL", "#2ca02c", {}},
                                {"E2E", "#d62728", {}}};
  for (const auto& r : run.records) {
    if (r.outcome != Outcome::kCompleted) continue;
    if (std::isfinite(r.ttft)) series[0].ms.push_back(r.ttft * 1000);
    if (std::isfinite(r.tpot)) series[1].ms.push_back(r.tpot * 1000);
    for (double g : r.itl) series[2].ms.push_back(g * 1000);
    if (std::isfinite(r.e2e)) series[3].ms.push_back(r.e2e * 1000);
  }
  double lo = INFINITY, hi = 0;
  for (auto& s : series) {
    std::sort(s.ms.begin(), s.ms.end());
    for (double v : s.ms) {
      const double c = std::max(v, 0.01);  // zero gaps (tokens in one read) sit at 0.01 ms
      lo = std::min(lo, c);
      hi = std::max(hi, c);
    }
  }
  if (!(hi > 0)) lo = 0.1, hi = 1000;
  const double l0 = std::floor(std::log10(lo)), l1 = std::max(l0 + 1, std::ceil(std::log10(hi)));
  const double W = 720, H = 420, x0 = 60, y0 = 20, pw = 620, ph = 340;
  auto X = [&](double ms) { return x0 + (std::log10(std::max(ms, 0.01)) - l0) / (l1 - l0) * pw; };
  auto Y = [&](double f) { return y0 + (1 - f) * ph; };
  char buf[256];
  std::string o;
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
                "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" "
                "height=\"100%%\" fill=\"white\"/>\n",
                W, H);
  o += buf;
  for (double e = l0; e <= l1; e += 1) {
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"#ddd\"/><text "
                  "x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%g</text>\n",
                  X(std::pow(10, e)), y0, X(std::pow(10, e)), y0 + ph, X(std::pow(10, e)),
                  y0 + ph + 15, std::pow(10, e));
    o += buf;
  }
  for (int i = 0; i <= 4; ++i) {
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#ddd\"/><text "
                  "x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n",
                  x0, Y(i / 4.0), x0 + pw, Y(i / 4.0), x0 - 5, Y(i / 4.0) + 4, i / 4.0);
    o += buf;
  }
  std::snprintf(buf, sizeof buf,
                "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">latency (ms, log scale)</text>\n"
                "<text x=\"15\" y=\"%g\" transform=\"rotate(-90 15 %g)\" "
                "text-anchor=\"middle\">fraction</text>\n",
                x0 + pw / 2, H - 10, y0 + ph / 2, y0 + ph / 2);
  o += buf;
  int legend = 0;
  for (const auto& s : series) {
    if (s.ms.empty()) continue;
    // At most ~1000 points per line: the CDF at evenly spaced ranks.
    const size_t n = s.ms.size(), step = std::max<size_t>(1, n / 1000);
    o += std::string("<polyline fill=\"none\" stroke=\"") + s.colour +
         "\" stroke-width=\"1.5\" points=\"";
    for (size_t i = 0; i < n; i += step) {
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", X(s.ms[i]), Y((i + 1.0) / n));
      o += buf;
    }
    std::snprintf(buf, sizeof buf, "%.1f,%.1f\"/>\n", X(s.ms[n - 1]), Y(1));
    o += buf;
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%g\" y=\"%d\" width=\"12\" height=\"3\" fill=\"%s\"/><text x=\"%g\" "
                  "y=\"%d\">%s (n=%zu)</text>\n",
                  x0 + 10, (int)y0 + 10 + 16 * legend, s.colour, x0 + 26,
                  (int)y0 + 15 + 16 * legend, s.name, n);
    o += buf;
    ++legend;
  }
  o += "</svg>\n";
  return o;
}

}  // namespace shrike::loadtest
