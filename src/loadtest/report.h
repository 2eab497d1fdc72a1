// Output of a run: a Markdown summary (stdout), a JSON file with every request's record, and an
// SVG plot of the latency CDFs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "loadtest/stats.h"

namespace shrike::loadtest {

struct ReportContext {
  std::string url, mode;  // mode: e.g. "closed loop, concurrency 8" or "trace conv.csv x4"
  bool chat = false, stream = true;
  bool synthetic_prompts = true;
  Slo slo;
};

std::string markdown_report(const Summary& s, const ReportContext& ctx);
nlohmann::json json_report(const RunResult& run, const Summary& s, const ReportContext& ctx);
// Empirical CDFs of TTFT, TPOT, ITL and E2E (completed requests) on a log-scaled ms axis.
std::string svg_cdf(const RunResult& run);

}  // namespace shrike::loadtest
