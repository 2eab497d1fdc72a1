// What the engine counts while it serves, in the shape Prometheus expects: cumulative histograms
// (seconds), monotonic counters and point-in-time gauges. Every member is safe to update from the
// engine thread while HTTP threads read it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace shrike::engine {

class Histogram {
 public:
  // bounds: upper bounds of the buckets, strictly increasing (+Inf is implicit).
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);  // NaN is ignored
  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf last (== count)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), +Inf last
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Latency buckets (seconds) from 1 ms to 60 s, roughly x2 apart.
std::vector<double> latency_buckets();

// Why a request ended; the names are what the metrics and the HTTP API show.
enum class FinishReason : int { Stop = 0, Length, Cancelled, Deadline, Error, kCount };
const char* finish_reason_name(
    FinishReason r);  // "stop", "length", "cancelled", "deadline", "error"

struct EngineMetrics {
  Histogram e2e_latency{latency_buckets()};            // submit -> last token
  Histogram time_to_first_token{latency_buckets()};    // submit -> first token
  Histogram time_per_output_token{latency_buckets()};  // (last - first token) / (tokens - 1)
  Histogram inter_token_latency{latency_buckets()};    // between consecutive tokens of a request
  Histogram queue_wait{latency_buckets()};             // submit -> first scheduled
  std::array<std::atomic<int64_t>, size_t(FinishReason::kCount)> finished{};  // by reason
  std::atomic<int64_t> prompt_tokens{0};  // prompt tokens of admitted requests
  std::atomic<int64_t> generated_tokens{0};
  std::atomic<int64_t> preemptions{0};
  std::atomic<int64_t> rejected{0};      // refused at submit (queue full, draining)
  std::atomic<int64_t> timed_out{0};     // deadline passed (also counted in finished)
  std::atomic<int64_t> steps{0};         // engine steps that ran the model
  std::atomic<int64_t> batch_tokens{0};  // tokens computed over all steps
  // Speculative decoding: verification steps (one per speculating sequence per engine step),
  // draft tokens proposed and accepted, and where the time went (drafting, target passes).
  std::atomic<int64_t> spec_steps{0}, spec_proposed{0}, spec_accepted{0};
  std::atomic<int64_t> spec_draft_ns{0}, forward_ns{0};
};

// Values read at scrape time.
struct EngineGauges {
  int64_t running = 0, waiting = 0;
  int64_t kv_blocks_used = 0, kv_blocks_total = 0, kv_blocks_cached = 0;
  // Blocks the engine could hold now: kv_blocks_total, or under a shared budget (EngineConfig::
  // kv_budget) the blocks it has committed plus what the budget would still grant it.
  int64_t kv_blocks_usable = 0;
  int64_t kv_blocks_committed = 0;  // blocks used at least once (their memory is resident)
  int64_t kv_bytes_total = 0;
  int64_t kv_bytes_used = 0;      // blocks held by requests, plus (int8-mixed) the policy's state
  int64_t kv_f16_copy_bytes = 0;  // int8-mixed: the f16 copies' share of kv_bytes_used
  int64_t kv_tokens_used = 0;     // positions held by running requests
  std::string kv_type = "f16";    // the cache type (kv::kv_type_name)
  double kv_bytes_per_token = 0;  // bytes one position takes in the blocks (K and V, all layers)
  int64_t prefix_queried_tokens = 0, prefix_hit_tokens = 0;  // counters kept by the block pool
};

// Counters kept by the HTTP layer: requests by route and status code.
struct HttpRequestCount {
  std::string route;
  int status = 0;
  int64_t count = 0;
};

// One engine's metrics for the exposition, under its model's name (empty: no model label).
struct ModelMetricsView {
  std::string model;
  const EngineMetrics* metrics = nullptr;
  EngineGauges gauges;
  // `label_name="model"`, escaped; empty when model is.
  std::string label(const char* label_name) const;
};

struct PrometheusOptions {
  // --metrics-compat vllm: vllm:num_requests_waiting, vllm:num_requests_running and
  // vllm:kv_cache_usage_perc (label model_name) as well, the gauges the Gateway API Inference
  // Extension's model-server protocol reads.
  bool vllm_compat = false;
  // A KV memory budget shared by the models (0: none): shrike_kv_memory_budget_bytes and
  // shrike_kv_memory_claimed_bytes.
  int64_t shared_kv_budget_bytes = 0, shared_kv_claimed_bytes = 0;
};

// KV cache usage from 0 to 1: blocks held by requests / blocks the engine could hold now.
double kv_cache_usage(const EngineGauges& g);

// Prometheus text exposition format (version 0.0.4) of everything above, every metric with
// # HELP and # TYPE lines, names prefixed shrike_; each family once, with one sample (set) per
// model, labelled model="NAME" after any other label.
std::string render_prometheus(const std::vector<ModelMetricsView>& models,
                              const std::vector<HttpRequestCount>& http,
                              const PrometheusOptions& opt);
// One unnamed engine (no model label).
std::string render_prometheus(const EngineMetrics& m, const EngineGauges& g,
                              const std::vector<HttpRequestCount>& http);

// A sample value or "le" bound as the Go client writes it: the shortest digits that read back
// exactly, exponent form below 1e-4 and from 1e6 ("0.005", "1", "2.5e-05", "1.5e+06"), "+Inf",
// "-Inf", "NaN".
std::string format_prometheus_value(double v);
// A label value with backslash, double quote and newline escaped.
std::string escape_label_value(std::string_view v);

}  // namespace shrike::engine
