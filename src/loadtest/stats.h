// Summary statistics of a run: latency distributions, throughput, error rates, goodput under
// SLOs, and achieved against intended arrival rate.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "loadtest/client.h"

namespace shrike::loadtest {

struct Distribution {
  size_t n = 0;
  double mean = NAN, p50 = NAN, p90 = NAN, p99 = NAN, max = NAN;
};

// NaNs are ignored. Percentiles interpolate linearly between order statistics (numpy's default).
Distribution distribution(std::vector<double> values);
double percentile(const std::vector<double>& sorted, double p);

// Service-level objectives in milliseconds; 0 means no objective on that metric.
struct Slo {
  double ttft_ms = 0, tpot_ms = 0, e2e_ms = 0;
  bool any() const { return ttft_ms > 0 || tpot_ms > 0 || e2e_ms > 0; }
};
// "ttft=500,tpot=50,e2e=10000" (any subset). Throws std::invalid_argument naming the bad part.
Slo parse_slo(const std::string& spec);
// A completed request meets the SLO if each set objective holds (TPOT is vacuous for 1 token).
bool meets_slo(const RequestRecord& r, const Slo& slo);

struct Summary {
  int64_t sent = 0, completed = 0, failed = 0, timed_out = 0;
  Distribution ttft, tpot, itl, e2e;  // seconds, completed requests only
  Distribution setup;                 // client-side set-up before sending (see RequestRecord)
  double wall_s = 0, requests_per_s = 0, output_tokens_per_s = 0;
  int64_t output_tokens = 0, prompt_tokens = 0;
  double error_rate = 0, timeout_rate = 0;
  int64_t good = 0;
  double goodput_per_s = 0;
  double intended_rate = 0, achieved_rate = 0;  // requests/s offered vs actually sent
  double mean_send_lag = 0, max_send_lag = 0;   // actual - intended send time (open loop)
  int concurrency = 0, max_in_flight = 0;
  bool usage_from_server = false;  // every completed request's token counts came from `usage`
  // The most frequent error messages (first 100 characters) with their counts, most first.
  std::vector<std::pair<std::string, int64_t>> top_errors;
};

Summary summarise(const RunResult& run, const Slo& slo);

}  // namespace shrike::loadtest
