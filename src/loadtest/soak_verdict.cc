// The soak's criteria, judged from what a run measured (SoakSummary), and its report; and the
// readers of what the soak samples (/metrics text, /proc/PID/status).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "loadtest/soak.h"

namespace shrike::loadtest {
namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

double metric_sum(const std::string& text, const std::string& name, const std::string& label) {
  double sum = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || !line.starts_with(name)) continue;
    const char after = line.size() > name.size() ? line[name.size()] : '\0';
    if (after != '{' && after != ' ') continue;  // a longer name with this prefix
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    if (!label.empty()) {
      const size_t close = line.find('}');
      if (after != '{' || close == std::string::npos ||
          line.substr(name.size(), close - name.size()).find(label) == std::string::npos)
        continue;
    }
    sum += std::strtod(line.c_str() + space + 1, nullptr);
  }
  return sum;
}

ServerMetrics parse_server_metrics(const std::string& text) {
  ServerMetrics m;
  m.kv_blocks_used = metric_sum(text, "shrike_kv_blocks_used");
  m.running = metric_sum(text, "shrike_requests_running");
  m.waiting = metric_sum(text, "shrike_requests_waiting");
  m.finished_total = metric_sum(text, "shrike_requests_finished_total");
  m.finished_error = metric_sum(text, "shrike_requests_finished_total", "reason=\"error\"");
  m.finished_cancelled = metric_sum(text, "shrike_requests_finished_total", "reason=\"cancelled\"");
  m.finished_deadline = metric_sum(text, "shrike_requests_finished_total", "reason=\"deadline\"");
  m.rejected_total = metric_sum(text, "shrike_requests_rejected_total");
  return m;
}

int64_t parse_vm_rss(const std::string& status_text) {
  const size_t p = status_text.find("VmRSS:");
  if (p == std::string::npos) return -1;
  return int64_t(std::strtoll(status_text.c_str() + p + 6, nullptr, 10)) * 1024;
}

int64_t soak_count(const SoakSummary& s, SoakOutcome o) {
  int64_t n = 0;
  for (const auto& row : s.counts) n += row[size_t(o)];
  return n;
}

int64_t soak_count(const SoakSummary& s, SoakKind k) {
  int64_t n = 0;
  for (int64_t c : s.counts[size_t(k)]) n += c;
  return n;
}

int64_t soak_accepted(const SoakSummary& s) {
  return soak_count(s, SoakOutcome::kCompleted) + soak_count(s, SoakOutcome::kDeadline) +
         soak_count(s, SoakOutcome::kCancelled);
}

std::vector<SoakVerdict> soak_verdicts(const SoakSummary& s, double max_rss_growth) {
  std::vector<SoakVerdict> v;
  const auto n = [&](SoakOutcome o) { return soak_count(s, o); };
  const auto str = [](double x) { return std::to_string(int64_t(std::llround(x))); };

  v.push_back({"no 5xx other than the documented 503",
               std::to_string(n(SoakOutcome::kServerError)) + " other 5xx; " +
                   std::to_string(n(SoakOutcome::kRefused503)) + " 503, " +
                   std::to_string(n(SoakOutcome::kRefused429)) + " 429",
               n(SoakOutcome::kServerError) == 0});

  // Malformed requests have their own criterion below; these are the generation requests.
  int64_t undocumented = 0, unanswered = 0;
  for (size_t k = 0; k < size_t(SoakKind::kCount); ++k)
    if (!is_malformed(SoakKind(k))) {
      undocumented += s.counts[k][size_t(SoakOutcome::kUndocumented)];
      unanswered += s.counts[k][size_t(SoakOutcome::kTransport)];
    }
  const int64_t accepted = soak_accepted(s);
  v.push_back({"every accepted request ended as documented",
               std::to_string(accepted) +
                   " accepted: " + std::to_string(n(SoakOutcome::kCompleted)) + " stop/length, " +
                   std::to_string(n(SoakOutcome::kDeadline)) + " deadline, " +
                   std::to_string(n(SoakOutcome::kCancelled)) + " cancelled by the client; " +
                   std::to_string(undocumented) + " undocumented, " + std::to_string(unanswered) +
                   " without an answer",
               undocumented == 0 && unanswered == 0});

  const double finished = s.metrics_end.finished_total - s.metrics_start.finished_total;
  const double errors = s.metrics_end.finished_error - s.metrics_start.finished_error;
  v.push_back(
      {"the server finished exactly the accepted requests, none with an error",
       s.metrics_ok
           ? "server: " + str(finished) + " finished (" +
                 str(s.metrics_end.finished_cancelled - s.metrics_start.finished_cancelled) +
                 " cancelled, " +
                 str(s.metrics_end.finished_deadline - s.metrics_start.finished_deadline) +
                 " deadline, " + str(errors) + " error); client: " + std::to_string(accepted) +
                 " accepted"
           : "a /metrics scrape failed",
       s.metrics_ok && std::llround(finished) == accepted && errors == 0});

  int64_t malformed = 0;
  for (size_t k = 0; k < size_t(SoakKind::kCount); ++k)
    if (is_malformed(SoakKind(k))) malformed += soak_count(s, SoakKind(k));
  v.push_back({"every malformed request refused with its 4xx",
               std::to_string(n(SoakOutcome::kRejected4xx)) + " of " + std::to_string(malformed),
               malformed > 0 && n(SoakOutcome::kRejected4xx) == malformed});

  v.push_back(
      {"bursts went above capacity (429 seen)",
       std::to_string(n(SoakOutcome::kRefused429)) + " 429 in all, " +
           std::to_string(s.counts[size_t(SoakKind::kBurst)][size_t(SoakOutcome::kRefused429)]) +
           " of them to the " + std::to_string(soak_count(s, SoakKind::kBurst)) + " burst requests",
       n(SoakOutcome::kRefused429) > 0});

  // Memory: from the first sample after the warm-up to the last (taken after the run settled).
  const RssSample* base = nullptr;
  for (const auto& r : s.rss)
    if (r.t_s >= s.warmup_s) {
      base = &r;
      break;
    }
  if (!base || s.rss.size() < 2 || base == &s.rss.back()) {
    v.push_back({"resident memory growth after warm-up < " + fmt("%.0f%%", max_rss_growth * 100),
                 "not measured (no server PID, or too few samples)", false});
  } else {
    int64_t peak = 0;
    for (const auto& r : s.rss)
      if (r.t_s >= s.warmup_s) peak = std::max(peak, r.bytes);
    const double growth = double(s.rss.back().bytes) / double(base->bytes) - 1;
    v.push_back({"resident memory growth after warm-up < " + fmt("%.0f%%", max_rss_growth * 100),
                 fmt("%.1f MiB", base->bytes / 1048576.0) + " at " + fmt("%.0f s", base->t_s) +
                     " -> " + fmt("%.1f MiB", s.rss.back().bytes / 1048576.0) + " at the end (" +
                     fmt("%+.2f%%", growth * 100) + "; peak " + fmt("%.1f MiB", peak / 1048576.0) +
                     ")",
                 growth < max_rss_growth});
  }

  v.push_back({"KV blocks in use back to zero (queue and running empty) after the run",
               "blocks " + str(s.kv_blocks_used_end) + ", running " + str(s.running_end) +
                   ", waiting " + str(s.waiting_end) + " after " + fmt("%.1f s", s.settle_s) +
                   " (peak during the run: " + str(s.kv_blocks_used_max) + " blocks, " +
                   str(s.waiting_max) + " waiting)",
               s.kv_blocks_used_end == 0 && s.running_end == 0 && s.waiting_end == 0});

  v.push_back({"/health answered every poll",
               std::to_string(s.health_polls - s.health_failures) + " of " +
                   std::to_string(s.health_polls) + " polls; worst " +
                   fmt("%.1f ms", s.health_worst_s * 1000),
               s.health_polls > 0 && s.health_failures == 0});
  return v;
}

std::string soak_report(const SoakSummary& s, const std::vector<SoakVerdict>& verdicts) {
  std::ostringstream o;
  o << "## shrike soak: " << fmt("%.0f s", s.wall_s) << " of traffic\n\n";
  o << "| criterion | measured | verdict |\n|---|---|---|\n";
  for (const auto& v : verdicts)
    o << "| " << v.criterion << " | " << v.measured << " | " << (v.pass ? "PASS" : "FAIL")
      << " |\n";
  o << "\n| request kind | sent |";
  for (size_t c = 0; c < size_t(SoakOutcome::kCount); ++c)
    o << ' ' << soak_outcome_name(SoakOutcome(c)) << " |";
  o << "\n|---|---|";
  for (size_t c = 0; c < size_t(SoakOutcome::kCount); ++c) o << "---|";
  o << '\n';
  int64_t total = 0;
  for (size_t k = 0; k < size_t(SoakKind::kCount); ++k) {
    const int64_t sent = soak_count(s, SoakKind(k));
    total += sent;
    o << "| " << soak_kind_name(SoakKind(k)) << " | " << sent << " |";
    for (int64_t c : s.counts[k]) o << ' ' << c << " |";
    o << '\n';
  }
  o << "| all | " << total << " |";
  for (size_t c = 0; c < size_t(SoakOutcome::kCount); ++c)
    o << ' ' << soak_count(s, SoakOutcome(c)) << " |";
  o << "\n";
  if (!s.rss.empty()) {
    // The memory curve in tenths of the run (the sample nearest each mark): a leak climbs
    // steadily, warm-up effects (allocator arenas, thread stacks first touched) level off.
    o << "\nServer VmRSS (MiB) by tenth of the run:";
    size_t i = 0;
    for (int tenth = 0; tenth <= 10; ++tenth) {
      const double t = s.duration_s * tenth / 10;
      while (i + 1 < s.rss.size() && s.rss[i + 1].t_s <= t) ++i;
      o << (tenth ? ", " : " ") << tenth * 10 << "%: " << fmt("%.1f", s.rss[i].bytes / 1048576.0);
    }
    o << "; end: " << fmt("%.1f", s.rss.back().bytes / 1048576.0) << '\n';
  }
  if (!s.failures.empty()) {
    o << "\nFirst unexpected answers:\n\n";
    for (const auto& f : s.failures) o << "- " << f << '\n';
  }
  const bool all = std::all_of(verdicts.begin(), verdicts.end(), [](auto& v) { return v.pass; });
  o << "\nverdict: " << (all ? "PASS" : "FAIL") << '\n';
  return o.str();
}

}  // namespace shrike::loadtest
