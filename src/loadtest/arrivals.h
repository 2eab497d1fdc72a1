// When requests are sent and how long they are: open-loop gamma arrivals (Poisson at shape 1),
// trace replay, or a closed loop of N outstanding requests.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <vector>

#include "loadtest/trace.h"

namespace shrike::loadtest {

struct PlannedRequest {
  double at = 0;  // intended send time, seconds after the start (ignored by closed loops)
  int64_t input_tokens = 0, output_tokens = 0;
  std::vector<int64_t> hash_ids;  // prompt blocks shared with other requests (Mooncake)
};

// Gaps between arrivals: gamma with mean 1/rate and shape `burstiness` (coefficient of variation
// 1/sqrt(burstiness)): 1 is a Poisson process, < 1 burstier, > 1 more regular. Deterministic for
// a seed (with this standard library).
class GammaGaps {
 public:
  GammaGaps(double rate, double burstiness, uint64_t seed);
  double next() { return dist_(rng_); }

 private:
  std::mt19937_64 rng_;
  std::gamma_distribution<double> dist_;
};

// Where requests come from. A closed loop (`concurrency` > 0) asks `next` whenever a slot frees;
// an open loop sends each request at its `at`. `next` returns nullopt when the source is spent.
struct Schedule {
  int concurrency = 0;       // > 0: closed loop
  double intended_rate = 0;  // requests/s the schedule means to offer (0: not applicable)
  std::function<std::optional<PlannedRequest>()> next;
};

Schedule closed_loop_schedule(int concurrency, int64_t input_tokens, int64_t output_tokens);
Schedule rate_schedule(double rate, double burstiness, uint64_t seed, int64_t input_tokens,
                       int64_t output_tokens);
// Replays entries (already transformed) in order; intended rate is (n-1)/span.
Schedule trace_schedule(std::vector<TraceEntry> entries);

}  // namespace shrike::loadtest
