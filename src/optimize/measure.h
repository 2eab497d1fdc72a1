// Measuring one server over HTTP with `shrike loadtest` as a child process: a closed-loop run at
// concurrency 1, one open-loop run (gamma arrivals at a rate, a seed), and the rate search that
// finds the highest arrival rate within the latency budget. `shrike optimize` measures each stage
// with these; `shrike max-rate` measures any OpenAI-compatible server (llama-server) the same way.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "optimize/rate_search.h"

namespace shrike::optimize {

struct MeasureConfig {
  std::string shrike_bin;   // whose `loadtest` subcommand runs the load
  std::string prompts;      // JSONL of {"prompt", "max_tokens"}, replayed in order
  std::string measure_dir;  // each run's loadtest JSON and SVG
  std::string log_dir;      // each run's loadtest log
  double budget_ms = 100, target = 0.99, burstiness = 0.3;
  double request_timeout_s = 2;
  // Rate search: rates probed, runs per rate, and each open-loop run's size: ~probe_seconds of
  // arrivals, at least 20 and at most probe_requests requests, cut at 2 x probe_seconds.
  int max_probes = 6, probe_repeats = 3, probe_requests = 400;
  double probe_seconds = 6;
  double probe_growth = 4, max_rate = 4000;
  std::function<void(const std::string&)> say;  // one progress line per run (may be empty)
};

struct LoadRun {
  nlohmann::json summary;      // the loadtest report's summary
  std::vector<double> e2e_ms;  // every completed request
  double within_budget = 0;    // good / sent
};

// `shrike loadtest` against url with the replay's fixed options plus `mode`; name names the
// output files. Throws std::runtime_error (with the log) when the load test fails.
LoadRun run_loadtest(const MeasureConfig& c, const std::string& url,
                     const std::vector<std::string>& mode, const std::string& name,
                     double max_seconds);
// n requests one after another.
LoadRun run_concurrency1(const MeasureConfig& c, const std::string& url, int n,
                         const std::string& name);
// Open loop at `rate` with gamma gaps of shape c.burstiness from `seed`.
LoadRun run_open_loop(const MeasureConfig& c, const std::string& url, double rate,
                      const std::string& name, int seed);
// The rate search from start_rate (run k at a rate uses seed k, so every server sees the same
// arrival patterns); progress lines start with `tag`, files with `name`.probeI.runK.
RateSearchResult search_max_rate(const MeasureConfig& c, const std::string& url, double start_rate,
                                 const std::string& name, const std::string& tag);
// Where the search starts: half a single stream's capacity (1000 / P50 ms at concurrency 1).
double start_rate_for(double p50_ms);

// A number of a JSON object, NaN when absent or not a number.
double json_number(const nlohmann::json& j, const char* key);

}  // namespace shrike::optimize
