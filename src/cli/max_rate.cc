// `shrike max-rate --url URL --prompts P.jsonl -o DIR`: any OpenAI-compatible server measured as
// `shrike optimize` measures a stage (src/optimize/measure): P50/P99 at concurrency 1, then the
// highest bursty open-loop arrival rate with the target fraction of requests within the budget.
// Writes DIR/NAME.json; bench/experiments/vs_llama_server.sh runs it against shrike and
// llama-server.

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>

#include "cli/commands.h"
#include "core/file_buffer.h"
#include "optimize/measure.h"
#include "optimize/process.h"

namespace shrike::cli {
namespace {

struct MaxRateArgs {
  optimize::MeasureConfig m;
  std::string url, out_dir, name = "server";
  int c1_requests = 100;
  double start_rate = 0;  // 0: half the single-stream capacity measured at concurrency 1
};

int run_max_rate(MaxRateArgs a) {
  namespace fs = std::filesystem;
  if (!fs::is_regular_file(a.m.prompts)) throw FileError(a.m.prompts + ": not a file (--prompts)");
  a.m.shrike_bin = optimize::current_executable();
  a.m.measure_dir = a.out_dir + "/" + a.name;
  a.m.log_dir = a.m.measure_dir;
  fs::create_directories(a.m.measure_dir);
  a.m.say = [](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  };
  const optimize::LoadRun one =
      optimize::run_concurrency1(a.m, a.url, a.c1_requests, a.name + ".c1");
  const auto& e2e = one.summary.at("e2e");
  const double p50 = optimize::json_number(e2e, "p50_ms"),
               p99 = optimize::json_number(e2e, "p99_ms");
  const double start = a.start_rate > 0 ? a.start_rate : optimize::start_rate_for(p50);
  const auto r = optimize::search_max_rate(a.m, a.url, start, a.name, a.name);

  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  nlohmann::json probes = nlohmann::json::array();
  for (const auto& p : r.probes)
    probes.push_back({{"rate", p.rate},
                      {"runs", p.runs},
                      {"within_budget_median", p.within_budget},
                      {"pass", p.pass}});
  const nlohmann::json j = {
      {"name", a.name},
      {"url", a.url},
      {"prompts", a.m.prompts},
      {"budget_ms", a.m.budget_ms},
      {"target", a.m.target},
      {"burstiness", a.m.burstiness},
      {"probe_repeats", a.m.probe_repeats},
      {"c1", {{"requests", a.c1_requests}, {"p50_ms", num(p50)}, {"p99_ms", num(p99)}}},
      {"max_rate_within_budget", r.best_rate},
      {"max_rate_is_lower_bound", r.lower_bound},
      {"rate_search_runs", r.runs()},
      {"probes", probes}};
  const std::string path = a.out_dir + "/" + a.name + ".json";
  std::ofstream f(path);
  f << j.dump(1) << "\n";
  if (!f) throw FileError(path + ": cannot write");
  std::printf(
      "%s: P50 %.1f ms, P99 %.1f ms at concurrency 1; highest rate with %.1f%% within %g "
      "ms: %s%.2f req/s (%d runs)\n",
      a.name.c_str(), p50, p99, 100 * a.m.target, a.m.budget_ms, r.lower_bound ? ">= " : "",
      r.best_rate, r.runs());
  return 0;
}

}  // namespace

Runner add_max_rate(CLI::App& app) {
  auto a = std::make_shared<MaxRateArgs>();
  app.add_option("--url", a->url, "the server (loopback unless the load test is told otherwise)")
      ->required();
  app.add_option("--prompts", a->m.prompts, "JSONL of {\"prompt\", \"max_tokens\"}, in order")
      ->required();
  app.add_option("-o,--out", a->out_dir, "output folder: NAME.json and NAME/ (each run)")
      ->required();
  app.add_option("--name", a->name, "name of the server in the files and lines")
      ->capture_default_str();
  app.add_option("--c1-requests", a->c1_requests, "requests at concurrency 1")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--start-rate", a->start_rate,
                 "first probed rate (default: half of 1000 / P50 ms at concurrency 1)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--budget-ms", a->m.budget_ms, "end-to-end latency budget")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--target", a->m.target, "fraction of requests within the budget")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--burstiness", a->m.burstiness, "gamma shape of arrival gaps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--probes", a->m.max_probes, "rates probed")
      ->check(CLI::Range(1, 20))
      ->capture_default_str();
  app.add_option("--probe-repeats", a->m.probe_repeats,
                 "runs per probed rate at most (it passes when a majority of them do)")
      ->check(CLI::Range(1, 9))
      ->capture_default_str();
  app.add_option("--probe-requests", a->m.probe_requests, "most requests per run")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--probe-seconds", a->m.probe_seconds, "seconds of arrivals per run")
      ->check(CLI::Range(0.5, 600.0))
      ->capture_default_str();
  app.add_option("--max-rate", a->m.max_rate, "highest rate the search probes")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--request-timeout", a->m.request_timeout_s, "per-request timeout, seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  return [a] { return run_max_rate(*a); };
}

}  // namespace shrike::cli
