#include "optimize/rate_search.h"

#include <algorithm>
#include <cmath>

namespace shrike::optimize {

RateSearchResult search_rate(const RateSearchOptions& o,
                             const std::function<double(double)>& measure) {
  RateSearchResult r;
  double lo = 0, hi = 0;  // best pass, lowest fail (0: none yet)
  auto probe = [&](double rate) {
    const double f = measure(rate);
    const bool pass = f >= o.target;
    r.probes.push_back({rate, f, pass});
    if (pass) {
      lo = std::max(lo, rate);
    } else {
      hi = hi > 0 ? std::min(hi, rate) : rate;
    }
  };
  double rate = std::clamp(o.start_rate, o.min_rate, o.max_rate);
  while (int(r.probes.size()) < o.max_probes) {
    probe(rate);
    if (lo > 0 && hi > 0) break;
    const double next = std::clamp(lo > 0 ? rate * 2 : rate / 2, o.min_rate, o.max_rate);
    if (next == rate) break;  // at a bound: nothing further to learn in this direction
    rate = next;
  }
  // Bisect while the bracket is wider than 10% and probes remain.
  while (lo > 0 && hi > 0 && int(r.probes.size()) < o.max_probes && hi / lo > 1.1)
    probe(std::sqrt(lo * hi));
  r.best_rate = lo;
  return r;
}

}  // namespace shrike::optimize
