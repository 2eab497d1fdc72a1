// `shrike soak`: mixed traffic against a running `shrike serve` for a bounded time and request
// count (loopback only), while /health, /metrics and the server's resident memory are watched;
// then a verdict per criterion (docs/ARCHITECTURE.md, "The soak"). Client threads use blocking
// libcurl calls (http_call.h); what they send and how answers are judged is soak_traffic.h.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "loadtest/soak_traffic.h"

namespace shrike::loadtest {

struct SoakConfig {
  std::string base_url;  // http://127.0.0.1:PORT
  pid_t server_pid = 0;  // its VmRSS is sampled; 0: memory not measured (that criterion fails)
  double duration_s = 30;
  int64_t max_requests = 1000000;  // sent by the steady clients (bursts come on top)
  int clients = 6;                 // steady client threads, each one request at a time
  // Shares of the steady clients' requests; the rest are plain completions and chats, half
  // streamed. Bursts come on top of these.
  double disconnect_share = 0.10, malformed_share = 0.05, deadline_share = 0.05,
         long_prompt_share = 0.05;
  double burst_every_s = 10;   // the first burst comes in the warm-up
  int burst_size = 48;         // requests sent at once, above --max-seqs + --max-queue
  double warmup_share = 0.10;  // RSS growth is measured from the end of this share of the run
  double health_every_s = 0.25, metrics_every_s = 1, rss_every_s = 1;
  double health_timeout_s = 5;     // a /health poll slower than this counts as unanswered
  double request_timeout_s = 300;  // the client's own limit on one request
  double settle_timeout_s = 30;    // after the run: how long KV blocks may take to return
  double max_rss_growth = 0.05;
  uint64_t seed = 1;
  std::string model;                 // the served id to name in requests ("" leaves it out)
  int64_t max_body_bytes = 8 << 20;  // the server's --max-body-mb, for the oversize requests
  bool progress = false;
  const std::atomic<bool>* stop = nullptr;  // set (SIGINT) to end the run early
};

// The server's gauges and counters the soak reads from /metrics (summed over models).
struct ServerMetrics {
  double kv_blocks_used = 0, running = 0, waiting = 0;
  double finished_total = 0, finished_error = 0, finished_cancelled = 0, finished_deadline = 0;
  double rejected_total = 0;
};
// Sum of every sample of `name` (with any labels, or with labels containing `label` when given).
double metric_sum(const std::string& text, const std::string& name, const std::string& label = "");
ServerMetrics parse_server_metrics(const std::string& text);
// "VmRSS:  1234 kB" from /proc/PID/status text, in bytes; -1 when absent.
int64_t parse_vm_rss(const std::string& status_text);

struct RssSample {
  double t_s;
  int64_t bytes;
};

// Everything a run measured; the verdicts are computed from this alone (soak_verdicts).
struct SoakSummary {
  double duration_s = 0, wall_s = 0;
  std::array<std::array<int64_t, size_t(SoakOutcome::kCount)>, size_t(SoakKind::kCount)> counts{};
  std::vector<std::string> failures;  // the first few unexpected answers, for the report
  int64_t health_polls = 0, health_failures = 0;
  double health_worst_s = 0;
  double kv_blocks_used_max = 0, waiting_max = 0, running_max = 0;
  double kv_blocks_used_end = -1, running_end = -1, waiting_end = -1;  // after settling
  double settle_s = 0;
  ServerMetrics metrics_start, metrics_end;
  bool metrics_ok = true;  // every /metrics scrape answered and parsed
  std::vector<RssSample> rss;
  double warmup_s = 0;
};

int64_t soak_count(const SoakSummary& s, SoakOutcome o);
int64_t soak_count(const SoakSummary& s, SoakKind k);
// Generation requests the server accepted: answered 200 (cancelled ones included).
int64_t soak_accepted(const SoakSummary& s);

struct SoakVerdict {
  std::string criterion, measured;
  bool pass;
};
std::vector<SoakVerdict> soak_verdicts(const SoakSummary& s, double max_rss_growth);

// Markdown: the verdicts, then requests by kind and outcome, then the first failures.
std::string soak_report(const SoakSummary& s, const std::vector<SoakVerdict>& verdicts);

// Runs the soak. Throws std::invalid_argument for a non-loopback URL or a bad config, and
// std::runtime_error when the server cannot be reached at the start.
SoakSummary run_soak(const SoakConfig& config);

}  // namespace shrike::loadtest
