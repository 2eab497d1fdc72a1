// The staged report: one row per stage (measured, or "not available"), each stage's ratios to
// stage 0, the options that changed from the previous measured stage, and the plots. Rendering is
// pure (report data in, text out), so it is tested without a server.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "optimize/rate_search.h"
#include "optimize/stages.h"

namespace shrike::optimize {

struct TaskScores {
  double intent = NAN, slot_f1 = NAN;  // fractions
};

// A request's time at concurrency 1, split the way the server sees it: waiting to be scheduled
// (for static batching, the batch window), its prompt (time to first token after the wait, which
// includes the first token's step), and the rest of its answer (model steps x step time).
struct LatencyBreakdown {
  double e2e_ms = NAN;      // mean, submission to the last token
  double queue_ms = NAN;    // mean wait before the first step
  double prefill_ms = NAN;  // mean time to first token minus the wait
  double decode_ms = NAN;   // e2e - time to first token
  double steps = NAN;       // model steps per request
  double step_ms = NAN;     // decode_ms / (steps - 1): one decoding step
};

struct StageResult {
  Stage stage;
  std::string model_path;
  std::map<std::string, std::string> options;  // effective, as /v1/models reported them
  std::vector<std::string> changes;            // option_diff against the previous measured stage
  std::string serve_command;                   // as run, with the binary shown as `shrike`
  std::vector<std::string> serve_argv;         // the same, one argument each (scripts rerun it)
  // Concurrency 1: end-to-end latency of the held-out requests, ms.
  double p50_ms = NAN, p99_ms = NAN;
  std::vector<double> e2e_ms;  // every completed request, for the CDF
  int64_t c1_failed = 0;
  // Open-loop rate search: the highest rate with >= target within the budget.
  RateSearchResult rate;
  // At the common rate.
  double queue_wait_p99_ms = NAN, timeout_rate = NAN, common_within_budget = NAN;
  int64_t weight_bytes = -1, kv_bytes = -1, peak_rss_bytes = -1, model_file_bytes = -1;
  TaskScores clean, noisy;
  // Speculative stages, from the server's counters after the concurrency-1 run: accepted /
  // proposed draft tokens, and accepted tokens per verification step.
  double spec_acceptance = NAN, spec_accepted_per_step = NAN;
  // Where a request's time goes at concurrency 1, means per request from the server's
  // histograms and counters over the concurrency-1 run (LatencyBreakdown).
  LatencyBreakdown breakdown;
};

// One speculative decoding kind measured on the first speculative stage's options, at
// concurrency 1 on the same requests (the report's "what each draft kind bought").
struct SpecVariant {
  SpecKind kind = SpecKind::Ngram;
  std::string draft;  // the draft model file and its shape (a draft kind), else ""
  double p50_ms = NAN, p99_ms = NAN;
  double acceptance = NAN, accepted_per_step = NAN;
  bool chosen = false;  // the faster P50: what the speculative stages serve
  std::string serve_command;
};

struct Report {
  std::string command, machine, data_dir, teacher_origin;
  double budget_ms = 100, burstiness = 0.3, target = 0.99, common_rate = 0;
  int test_requests = 0, max_tokens = 0;
  int probe_repeats = 3;                      // rate-search runs per probed rate at most
  int64_t vocab_before = 0, vocab_after = 0;  // the student's vocabulary, before/after trim-vocab
  double wall_s = 0;
  std::vector<StageResult> stages;
  std::vector<SpecVariant> spec_variants;  // measured on the first speculative stage
  // Stage 0's static-batch window (its server's batch_wait_ms), and stage 0 measured again at
  // concurrency 1 without it (--batch-wait-ms 0): what the window alone costs.
  double stage0_batch_wait_ms = NAN;
  double stage0_no_window_p50_ms = NAN, stage0_no_window_p99_ms = NAN;
  LatencyBreakdown stage0_no_window;
  std::vector<std::string> notes;
  std::string sample_prompt, sample_answer;  // one request to the last measured stage
};

// The seed's targets, read from the report: the last measured stage against stage 0 (P50 at
// concurrency 1 at least kP50Target x lower, the highest rate within the budget at least 15x,
// intent accuracy within 0.5 points and slot F1 within 1 point, clean and noisy), and each
// latency lever (every measured stage but 4, continuous batching) at least kStepP50Target x
// lower P50 than the measured stage before it (issue 29).
inline constexpr double kP50Target = 10, kStepP50Target = 1.2;
struct TargetCheck {
  std::string target;
  std::string stage0, last;  // the values compared, as shown
  // "met", "missed", "not defined" (stage 0 sustains no rate), "not decided" (only bounds were
  // measured) or "not measured"
  std::string verdict;
  std::string why;  // unless met: which stage fell short and why, from the measured values
};
std::vector<TargetCheck> check_targets(const Report& r);

std::string render_markdown(const Report& r);
nlohmann::json render_json(const Report& r);

// The plots the Markdown embeds, by file name (latency_cdf.svg, latency.svg, goodput.svg,
// memory.svg, accuracy.svg).
std::map<std::string, std::string> render_plots(const Report& r);

// A grouped bar chart: one group per category, one bar per series (NaN: no bar). Pure SVG text.
struct BarSeries {
  std::string name;
  std::vector<double> values;
};
std::string svg_bars(const std::string& title, const std::string& unit,
                     const std::vector<std::string>& categories,
                     const std::vector<BarSeries>& series);
// Empirical CDFs of several samples on a log10 axis (one line each).
std::string svg_cdfs(const std::string& title, const std::string& unit,
                     const std::vector<std::pair<std::string, std::vector<double>>>& samples);

}  // namespace shrike::optimize
