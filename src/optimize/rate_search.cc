#include "optimize/rate_search.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace shrike::optimize {

int RateSearchResult::runs() const {
  int n = 0;
  for (const auto& p : probes) n += int(p.runs.size());
  return n;
}

double median_of(std::vector<double> v) {
  if (v.empty()) throw std::invalid_argument("median_of: empty sample");
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

RateSearchResult search_rate(const RateSearchOptions& o,
                             const std::function<double(double, int)>& measure) {
  RateSearchResult r;
  const int repeats = std::max(1, o.repeats);
  const int majority = repeats / 2 + 1;
  double lo = 0, hi = 0;  // best pass, lowest fail (0: none yet)
  auto probe = [&](double rate) {
    Probe p;
    p.rate = rate;
    int passed = 0, failed = 0;
    // Stop once either side has a majority: the remaining runs cannot change the verdict.
    while (passed < majority && failed < repeats - majority + 1) {
      const double f = measure(rate, int(p.runs.size()));
      p.runs.push_back(f);
      (f >= o.target ? passed : failed) += 1;
    }
    p.within_budget = median_of(p.runs);
    p.pass = passed >= majority;
    r.probes.push_back(p);
    if (p.pass) {
      lo = std::max(lo, rate);
    } else {
      hi = hi > 0 ? std::min(hi, rate) : rate;
    }
  };
  double rate = std::clamp(o.start_rate, o.min_rate, o.max_rate);
  while (int(r.probes.size()) < o.max_probes) {
    probe(rate);
    if (lo > 0 && hi > 0) break;
    const double g = std::max(o.growth, 1.01);
    const double next = std::clamp(lo > 0 ? rate * g : rate / g, o.min_rate, o.max_rate);
    if (next == rate) break;  // at a bound: nothing further to learn in this direction
    rate = next;
  }
  // Bisect while the bracket is wider than 10% and probes remain.
  while (lo > 0 && hi > 0 && int(r.probes.size()) < o.max_probes && hi / lo > 1.1)
    probe(std::sqrt(lo * hi));
  r.best_rate = lo;
  r.lower_bound = lo > 0 && hi == 0;
  return r;
}

}  // namespace shrike::optimize
