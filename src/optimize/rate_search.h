// The highest arrival rate a server sustains within a latency budget, found by a few probes: from
// a starting guess, multiply (or divide) by `growth` until the outcome flips, then bisect
// (geometrically) between the best passing and the lowest failing rate. One open-loop run is noisy
// (a short run of a few dozen requests fails the 99% target on a single slow request), so each
// candidate rate is run up to `repeats` times and passes when a majority of its runs meet the
// target (2 of 3: it stops as soon as the majority is decided). The probe count is the bound;
// measuring is the caller's (a load test per run), so the search itself is a pure function.
#pragma once

#include <functional>
#include <vector>

namespace shrike::optimize {

struct RateSearchOptions {
  double start_rate = 4;  // requests/s of the first probe
  double min_rate = 0.25, max_rate = 1000;
  double target = 0.99;  // fraction of requests that must finish within the budget
  int max_probes = 5;    // distinct rates probed
  double growth = 2;     // factor between probes until the outcome flips (> 1)
  int repeats = 3;       // runs per rate at most (odd: a majority always exists)
};

struct Probe {
  double rate = 0;
  std::vector<double> runs;  // fraction within the budget of each run, in order
  double within_budget = 0;  // median of the runs
  bool pass = false;         // a majority of the rate's runs met the target
};

struct RateSearchResult {
  double best_rate = 0;  // highest passing rate probed; 0 when none passed
  // No failing rate above best_rate was found (the search reached max_rate or ran out of probes
  // first): the capacity may be higher.
  bool lower_bound = false;
  std::vector<Probe> probes;  // in the order probed
  int runs() const;           // load-test runs in all
};

// measure(rate, run) -> fraction within the budget (run: 0, 1, ... at that rate). Rates are never
// probed twice, never outside [min_rate, max_rate], and at most max_probes of them.
RateSearchResult search_rate(const RateSearchOptions& o,
                             const std::function<double(double rate, int run)>& measure);

// The median of a non-empty sample (the mean of the middle two for an even count).
double median_of(std::vector<double> v);

}  // namespace shrike::optimize
