#include "loadtest/report.h"

#include <cmath>
#include <cstdio>

namespace shrike::loadtest {
namespace {

std::string fmt(const char* f, double v) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string row(const char* name, const Distribution& d) {
  auto ms = [](double s) { return fmt("%.1f", s * 1000); };
  return std::string("| ") + name + " | " + std::to_string(d.n) + " | " + ms(d.mean) + " | " +
         ms(d.p50) + " | " + ms(d.p90) + " | " + ms(d.p99) + " | " + ms(d.max) + " |\n";
}

nlohmann::json num(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}

nlohmann::json dist_json(const Distribution& d) {
  return {{"n", d.n},
          {"mean_ms", num(d.mean * 1000)},
          {"p50_ms", num(d.p50 * 1000)},
          {"p90_ms", num(d.p90 * 1000)},
          {"p99_ms", num(d.p99 * 1000)},
          {"max_ms", num(d.max * 1000)}};
}

}  // namespace

std::string markdown_report(const Summary& s, const ReportContext& c) {
  std::string o;
  o += "## shrike loadtest: " + c.url + (c.chat ? " (chat" : " (completions") +
       (c.stream ? ", streaming)" : ", not streamed)") + "\n\n";
  o += "mode: " + c.mode + "\n\n";
  o += "| latency (ms) | n | mean | P50 | P90 | P99 | max |\n|---|---:|---:|---:|---:|---:|---:|\n";
  o += row("TTFT", s.ttft) + row("TPOT", s.tpot) + row("ITL", s.itl) + row("E2E", s.e2e);
  o += "\n| | |\n|---|---:|\n";
  o += "| requests sent | " + std::to_string(s.sent) + " |\n";
  o += "| completed / failed / timed out | " + std::to_string(s.completed) + " / " +
       std::to_string(s.failed) + " / " + std::to_string(s.timed_out) + " |\n";
  o += "| error rate / timeout rate | " + fmt("%.2f%%", 100 * s.error_rate) + " / " +
       fmt("%.2f%%", 100 * s.timeout_rate) + " |\n";
  o += "| wall time (s) | " + fmt("%.2f", s.wall_s) + " |\n";
  o += "| requests/s (completed) | " + fmt("%.2f", s.requests_per_s) + " |\n";
  o += "| output tokens/s | " + fmt("%.1f", s.output_tokens_per_s) + " |\n";
  o += "| output tokens (" + std::string(s.usage_from_server ? "server usage" : "counted events") +
       ") | " + std::to_string(s.output_tokens) + " |\n";
  if (s.prompt_tokens > 0)
    o += "| prompt tokens (server usage) | " + std::to_string(s.prompt_tokens) + " |\n";
  if (c.slo.any()) {
    std::string spec;
    if (c.slo.ttft_ms > 0) spec += "TTFT <= " + fmt("%g", c.slo.ttft_ms) + " ms ";
    if (c.slo.tpot_ms > 0) spec += "TPOT <= " + fmt("%g", c.slo.tpot_ms) + " ms ";
    if (c.slo.e2e_ms > 0) spec += "E2E <= " + fmt("%g", c.slo.e2e_ms) + " ms ";
    o += "| goodput (" + spec + ") | " + fmt("%.2f", s.goodput_per_s) + " req/s, " +
         std::to_string(s.good) + " of " + std::to_string(s.sent) + " (" +
         fmt("%.1f%%", s.sent ? 100.0 * s.good / s.sent : 0.0) + ") |\n";
  }
  if (s.concurrency > 0)
    o += "| concurrency (closed loop) | " + std::to_string(s.concurrency) + " |\n";
  else
    o += "| arrival rate intended / achieved | " + fmt("%.2f", s.intended_rate) + " / " +
         fmt("%.2f", s.achieved_rate) + " req/s |\n| send lag mean / max (ms) | " +
         fmt("%.2f", s.mean_send_lag * 1000) + " / " + fmt("%.2f", s.max_send_lag * 1000) + " |\n";
  o += "| max requests in flight | " + std::to_string(s.max_in_flight) + " |\n";
  o += "| client set-up before send, mean / max (ms) | " + fmt("%.2f", s.setup.mean * 1000) +
       " / " + fmt("%.2f", s.setup.max * 1000) + " |\n";
  for (const auto& [text, n] : s.top_errors)
    o += "\nerror x" + std::to_string(n) + ": " + text + "\n";
  if (c.synthetic_prompts)
    o += "\nPrompts were synthesised from common English words, each ~1 token in Llama 2/3 "
         "vocabularies, so planned prompt lengths are approximate; server-reported usage is "
         "exact.\n";
  if (!c.stream) o += "\nNot streamed: TTFT equals E2E and there are no inter-token gaps.\n";
  return o;
}

nlohmann::json json_report(const RunResult& run, const Summary& s, const ReportContext& c) {
  nlohmann::json j;
  j["url"] = c.url;
  j["mode"] = c.mode;
  j["endpoint"] = c.chat ? "chat" : "completions";
  j["stream"] = c.stream;
  j["summary"] = {{"sent", s.sent},
                  {"completed", s.completed},
                  {"failed", s.failed},
                  {"timed_out", s.timed_out},
                  {"wall_s", s.wall_s},
                  {"requests_per_s", s.requests_per_s},
                  {"output_tokens_per_s", s.output_tokens_per_s},
                  {"output_tokens", s.output_tokens},
                  {"error_rate", s.error_rate},
                  {"timeout_rate", s.timeout_rate},
                  {"good", s.good},
                  {"goodput_per_s", s.goodput_per_s},
                  {"intended_rate", num(s.intended_rate)},
                  {"achieved_rate", num(s.achieved_rate)},
                  {"max_in_flight", s.max_in_flight},
                  {"ttft", dist_json(s.ttft)},
                  {"tpot", dist_json(s.tpot)},
                  {"itl", dist_json(s.itl)},
                  {"e2e", dist_json(s.e2e)},
                  {"setup", dist_json(s.setup)}};
  if (c.slo.any())
    j["slo_ms"] = {{"ttft", c.slo.ttft_ms}, {"tpot", c.slo.tpot_ms}, {"e2e", c.slo.e2e_ms}};
  auto& reqs = j["requests"] = nlohmann::json::array();
  for (const auto& r : run.records) {
    nlohmann::json itl = nlohmann::json::array();
    for (double g : r.itl) itl.push_back(g * 1000);
    reqs.push_back({{"id", r.id},
                    {"scheduled_s", r.scheduled_s},
                    {"sent_s", r.sent_s},
                    {"outcome", outcome_name(r.outcome)},
                    {"http_status", r.http_status},
                    {"error", r.error},
                    {"ttft_ms", num(r.ttft * 1000)},
                    {"tpot_ms", num(r.tpot * 1000)},
                    {"e2e_ms", num(r.e2e * 1000)},
                    {"setup_ms", num(r.setup * 1000)},
                    {"itl_ms", std::move(itl)},
                    {"prompt_tokens",
                     r.prompt_tokens >= 0 ? nlohmann::json(r.prompt_tokens) : nlohmann::json()},
                    {"planned_prompt_tokens", r.planned_prompt_tokens},
                    {"planned_output_tokens", r.planned_output_tokens},
                    {"output_tokens", r.output_tokens},
                    {"usage_from_server", r.usage_from_server}});
  }
  return j;
}

}  // namespace shrike::loadtest
