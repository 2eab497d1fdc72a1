// The highest arrival rate a server sustains within a latency budget, found by a few probes: from
// a starting guess, double (or halve) until the outcome flips, then bisect (geometrically) between
// the best passing and the lowest failing rate. The probe count is the bound; measuring is the
// caller's (a load test per probe), so the search itself is a pure function.
#pragma once

#include <functional>
#include <vector>

namespace shrike::optimize {

struct RateSearchOptions {
  double start_rate = 4;  // requests/s of the first probe
  double min_rate = 0.25, max_rate = 1000;
  double target = 0.99;  // fraction of requests that must finish within the budget
  int max_probes = 5;
};

struct Probe {
  double rate = 0;
  double within_budget = 0;  // fraction of requests that finished within the budget
  bool pass = false;
};

struct RateSearchResult {
  double best_rate = 0;  // highest passing rate probed; 0 when none passed
  std::vector<Probe> probes;
};

// measure(rate) -> fraction within the budget. Probes are never repeated at one rate, never
// outside [min_rate, max_rate], and at most max_probes.
RateSearchResult search_rate(const RateSearchOptions& o,
                             const std::function<double(double)>& measure);

}  // namespace shrike::optimize
