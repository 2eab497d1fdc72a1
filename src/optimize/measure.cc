#include "optimize/measure.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "core/file_buffer.h"
#include "optimize/process.h"

namespace shrike::optimize {
namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw FileError(path + ": cannot read");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw FileError(path + ": not JSON: " + e.what());
  }
}

}  // namespace

double json_number(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : NAN;
}

LoadRun run_loadtest(const MeasureConfig& c, const std::string& url,
                     const std::vector<std::string>& mode, const std::string& name,
                     double max_seconds) {
  const std::string json = c.measure_dir + "/" + name + ".json";
  std::vector<std::string> argv = {c.shrike_bin,
                                   "loadtest",
                                   "--url",
                                   url,
                                   "--prompts",
                                   c.prompts,
                                   "--stop-at-eos",
                                   "--timeout",
                                   std::to_string(c.request_timeout_s),
                                   "--slo",
                                   "e2e=" + std::to_string(c.budget_ms),
                                   "--out-json",
                                   json,
                                   "--out-svg",
                                   c.measure_dir + "/" + name + ".svg"};
  argv.insert(argv.end(), mode.begin(), mode.end());
  run_checked(argv, c.log_dir + "/" + name + ".loadtest.log",
              max_seconds + c.request_timeout_s + 60, no_blas_threads_env());
  const auto j = read_json(json);
  LoadRun r;
  r.summary = j.at("summary");
  for (const auto& req : j.at("requests"))
    if (req.value("outcome", "") == "completed" && req["e2e_ms"].is_number())
      r.e2e_ms.push_back(req["e2e_ms"].get<double>());
  const double sent = json_number(r.summary, "sent"), good = json_number(r.summary, "good");
  r.within_budget = sent > 0 ? good / sent : 0;
  return r;
}

LoadRun run_concurrency1(const MeasureConfig& c, const std::string& url, int n,
                         const std::string& name) {
  return run_loadtest(c, url, {"--concurrency", "1", "--max-requests", std::to_string(n)}, name,
                      double(n) * c.request_timeout_s);
}

LoadRun run_open_loop(const MeasureConfig& c, const std::string& url, double rate,
                      const std::string& name, int seed) {
  const int64_t n =
      std::clamp<int64_t>(int64_t(std::ceil(rate * c.probe_seconds)), 20, c.probe_requests);
  const double seconds = std::min(2 * c.probe_seconds, double(n) / rate + 1);
  char r[32];
  std::snprintf(r, sizeof r, "%.4g", rate);
  return run_loadtest(
      c, url,
      {"--rate", r, "--burstiness", std::to_string(c.burstiness), "--seed", std::to_string(seed),
       "--max-requests", std::to_string(n), "--duration", std::to_string(seconds)},
      name, seconds);
}

double start_rate_for(double p50_ms) {
  return std::isfinite(p50_ms) && p50_ms > 0 ? 500 / p50_ms : 1;
}

RateSearchResult search_max_rate(const MeasureConfig& c, const std::string& url, double start_rate,
                                 const std::string& name, const std::string& tag) {
  RateSearchOptions ro;
  ro.start_rate = start_rate;
  ro.target = c.target;
  ro.max_probes = c.max_probes;
  ro.repeats = c.probe_repeats;
  ro.max_rate = c.max_rate;
  ro.growth = c.probe_growth;
  int probe_no = 0;
  return search_rate(ro, [&](double rate, int repeat) {
    if (repeat == 0) ++probe_no;
    const LoadRun p = run_open_loop(
        c, url, rate,
        name + ".probe" + std::to_string(probe_no) + ".run" + std::to_string(repeat + 1),
        repeat + 1);
    if (c.say) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s: probe %.2f req/s, run %d: %.1f%% within %g ms",
                    tag.c_str(), rate, repeat + 1, 100 * p.within_budget, c.budget_ms);
      c.say(buf);
    }
    return p.within_budget;
  });
}

}  // namespace shrike::optimize
