// Hand-written SVG bar charts and CDFs for the staged report (no plotting dependency). The load
// tester's svg_cdf plots the metrics of one run; these compare stages.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "optimize/report.h"

namespace shrike::optimize {
namespace {

const char* kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                          "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else
      o += c;
  }
  return o;
}

std::string header(double w, double h, const std::string& title) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
                "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" "
                "height=\"100%%\" fill=\"white\"/>\n<text x=\"%g\" y=\"18\" "
                "text-anchor=\"middle\" font-size=\"14\">%s</text>\n",
                w, h, w / 2, escape(title).c_str());
  return buf;
}

// A "nice" axis maximum: 1, 2 or 5 times a power of ten at or above v.
double nice_max(double v) {
  if (!(v > 0)) return 1;
  const double p = std::pow(10, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= v) return m * p;
  return 10 * p;
}

}  // namespace

std::string svg_bars(const std::string& title, const std::string& unit,
                     const std::vector<std::string>& categories,
                     const std::vector<BarSeries>& series) {
  const double W = 720, H = 400, x0 = 70, y0 = 40, pw = 620, ph = 280;
  double top = 0;
  for (const auto& s : series)
    for (double v : s.values)
      if (std::isfinite(v)) top = std::max(top, v);
  top = nice_max(top);
  std::string o = header(W, H, title);
  char buf[512];
  for (int i = 0; i <= 5; ++i) {
    const double v = top * i / 5, y = y0 + ph - ph * i / 5;
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#ddd\"/><text "
                  "x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                  x0, y, x0 + pw, y, x0 - 5, y + 4, v);
    o += buf;
  }
  std::snprintf(buf, sizeof buf,
                "<text x=\"15\" y=\"%g\" transform=\"rotate(-90 15 %g)\" "
                "text-anchor=\"middle\">%s</text>\n",
                y0 + ph / 2, y0 + ph / 2, escape(unit).c_str());
  o += buf;
  const size_t nc = std::max<size_t>(1, categories.size()), ns = std::max<size_t>(1, series.size());
  const double group = pw / double(nc), bar = group * 0.8 / double(ns);
  for (size_t c = 0; c < categories.size(); ++c) {
    const double gx = x0 + group * double(c) + group * 0.1;
    for (size_t s = 0; s < series.size(); ++s) {
      const double v = c < series[s].values.size() ? series[s].values[c] : NAN;
      if (!std::isfinite(v)) continue;
      const double h = ph * std::clamp(v / top, 0.0, 1.0);
      std::snprintf(
          buf, sizeof buf,
          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>%s "
          "%s: %g</title></rect>\n",
          gx + bar * double(s), y0 + ph - h, bar * 0.95, h, kColours[s % 8],
          escape(series[s].name).c_str(), escape(categories[c]).c_str(), v);
      o += buf;
    }
    std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%s</text>\n",
                  gx + group * 0.4, y0 + ph + 16, escape(categories[c]).c_str());
    o += buf;
  }
  for (size_t s = 0; s < series.size(); ++s) {
    const double lx = x0 + 10 + 150 * double(s);
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%.1f\" y=\"%g\" width=\"12\" height=\"12\" fill=\"%s\"/><text "
                  "x=\"%.1f\" y=\"%g\">%s</text>\n",
                  lx, H - 40, kColours[s % 8], lx + 16, H - 30, escape(series[s].name).c_str());
    o += buf;
  }
  return o + "</svg>\n";
}

std::string svg_cdfs(const std::string& title, const std::string& unit,
                     const std::vector<std::pair<std::string, std::vector<double>>>& samples) {
  const double W = 720, H = 420, x0 = 60, y0 = 40, pw = 620, ph = 300;
  double lo = INFINITY, hi = 0;
  for (const auto& [name, v] : samples)
    for (double x : v)
      if (std::isfinite(x) && x > 0) lo = std::min(lo, x), hi = std::max(hi, x);
  if (!(hi > 0)) lo = 1, hi = 1000;
  const double l0 = std::floor(std::log10(lo)), l1 = std::max(l0 + 1, std::ceil(std::log10(hi)));
  auto X = [&](double v) { return x0 + (std::log10(std::max(v, lo)) - l0) / (l1 - l0) * pw; };
  auto Y = [&](double f) { return y0 + (1 - f) * ph; };
  std::string o = header(W, H, title);
  char buf[512];
  for (double e = l0; e <= l1; e += 1) {
    const double x = X(std::pow(10, e));
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"#ddd\"/><text "
                  "x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%g</text>\n",
                  x, y0, x, y0 + ph, x, y0 + ph + 15, std::pow(10, e));
    o += buf;
  }
  for (int i = 0; i <= 4; ++i) {
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#ddd\"/><text "
                  "x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                  x0, Y(i / 4.0), x0 + pw, Y(i / 4.0), x0 - 5, Y(i / 4.0) + 4, i / 4.0);
    o += buf;
  }
  std::snprintf(buf, sizeof buf, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%s (log)</text>\n",
                x0 + pw / 2, y0 + ph + 32, escape(unit).c_str());
  o += buf;
  for (size_t s = 0; s < samples.size(); ++s) {
    std::vector<double> v;
    for (double x : samples[s].second)
      if (std::isfinite(x)) v.push_back(x);
    std::sort(v.begin(), v.end());
    if (!v.empty()) {
      o += "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"";
      o += kColours[s % 8];
      o += "\" points=\"";
      for (size_t i = 0; i < v.size(); ++i) {
        std::snprintf(buf, sizeof buf, "%.1f,%.1f %.1f,%.1f ", X(v[i]), Y(double(i) / v.size()),
                      X(v[i]), Y(double(i + 1) / v.size()));
        o += buf;
      }
      o += "\"/>\n";
    }
    const double lx = x0 + 10 + 120 * double(s % 5), ly = H - 40 + 14 * double(s / 5);
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%.1f\" y=\"%g\" width=\"12\" height=\"3\" fill=\"%s\"/><text "
                  "x=\"%.1f\" y=\"%g\">%s</text>\n",
                  lx, ly, kColours[s % 8], lx + 16, ly + 5, escape(samples[s].first).c_str());
    o += buf;
  }
  return o + "</svg>\n";
}

}  // namespace shrike::optimize
