#include "engine/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

namespace shrike::engine {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i]))
      throw std::invalid_argument("histogram bound " + std::to_string(i) +
                                  " is not finite (+Inf is implicit)");
    if (i > 0 && !(bounds_[i] > bounds_[i - 1]))
      throw std::invalid_argument("histogram bounds must be strictly increasing (bound " +
                                  std::to_string(i) + ")");
  }
  counts_.assign(bounds_.size() + 1, 0);
}

void Histogram::observe(double value) {
  if (std::isnan(value)) return;  // would poison the sum and belongs in no bucket
  // Prometheus buckets are "le": the first bound >= value, or +Inf.
  const size_t bucket =
      size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  std::lock_guard lock(mu_);
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.bounds = bounds_;  // immutable after construction
  std::lock_guard lock(mu_);
  s.cumulative.reserve(counts_.size());
  uint64_t running = 0;
  for (uint64_t c : counts_) s.cumulative.push_back(running += c);
  s.sum = sum_;
  s.count = count_;
  return s;
}

std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop:
      return "stop";
    case FinishReason::Length:
      return "length";
    case FinishReason::Cancelled:
      return "cancelled";
    case FinishReason::Deadline:
      return "deadline";
    case FinishReason::Error:
      return "error";
    case FinishReason::kCount:
      break;
  }
  return "unknown";
}

std::string format_prometheus_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // Go's strconv.FormatFloat(v, 'g', -1, 64), as the reference client writes values: the
  // shortest digits that read back to v, in exponent form below 1e-4 or from 1e6 up.
  char sci[32];
  const auto [end, ec] = std::to_chars(sci, sci + sizeof sci, v, std::chars_format::scientific);
  if (ec != std::errc()) return std::to_string(v);  // cannot happen with 32 bytes
  const std::string_view text(sci, size_t(end - sci));
  const size_t e = text.find('e');
  const int exponent = std::stoi(std::string(text.substr(e + 1)));
  if (exponent < -4 || exponent >= 6) return std::string(text);
  // Digits without sign or point, then placed around the point.
  std::string digits;
  const bool negative = text[0] == '-';
  for (char c : text.substr(0, e))
    if (c >= '0' && c <= '9') digits += c;
  std::string out = negative ? "-" : "";
  if (exponent < 0) {
    out += "0." + std::string(size_t(-exponent - 1), '0') + digits;
  } else {
    const size_t int_digits = size_t(exponent) + 1;
    if (digits.size() <= int_digits) {
      out += digits + std::string(int_digits - digits.size(), '0');
    } else {
      out += digits.substr(0, int_digits) + "." + digits.substr(int_digits);
    }
  }
  return out;
}

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, std::string_view name, std::string_view labels, int64_t v) {
  out += name;
  if (!labels.empty()) {
    out += '{';
    out += labels;
    out += '}';
  }
  out += ' ';
  out += std::to_string(v);
  out += '\n';
}

void sample(std::string& out, std::string_view name, std::string_view labels, double v) {
  out += name;
  if (!labels.empty()) {
    out += '{';
    out += labels;
    out += '}';
  }
  out += ' ';
  out += format_prometheus_value(v);
  out += '\n';
}

// The label set of one model's samples: `extra` (e.g. le="0.5") and model="NAME" (none when the
// server holds a single unnamed engine).
std::string labels(const std::string& model_label, const std::string& extra) {
  if (model_label.empty()) return extra;
  if (extra.empty()) return model_label;
  return extra + "," + model_label;
}

using Models = std::vector<ModelMetricsView>;

void histogram(std::string& out, const std::string& name, const char* help, const Models& models,
               const Histogram EngineMetrics::*member) {
  family(out, name.c_str(), "histogram", help);
  for (const ModelMetricsView& mv : models) {
    const Histogram::Snapshot s = (mv.metrics->*member).snapshot();
    const std::string ml = mv.label("model");
    for (size_t i = 0; i <= s.bounds.size(); ++i) {
      const std::string le =
          i < s.bounds.size() ? format_prometheus_value(s.bounds[i]) : std::string("+Inf");
      sample(out, name + "_bucket", labels(ml, "le=\"" + le + "\""), int64_t(s.cumulative[i]));
    }
    sample(out, name + "_sum", ml, s.sum);
    sample(out, name + "_count", ml, int64_t(s.count));
  }
}

// One sample per model of a counter or gauge.
template <typename F>
void per_model(std::string& out, const char* name, const char* type, const char* help,
               const Models& models, F value, const char* label_name = "model") {
  family(out, name, type, help);
  for (const ModelMetricsView& mv : models) sample(out, name, mv.label(label_name), value(mv));
}

int64_t load(const std::atomic<int64_t>& a) {
  return a.load(std::memory_order_relaxed);
}

}  // namespace

std::string ModelMetricsView::label(const char* label_name) const {
  if (model.empty()) return {};
  return std::string(label_name) + "=\"" + escape_label_value(model) + "\"";
}

double kv_cache_usage(const EngineGauges& g) {
  if (g.kv_blocks_usable <= 0) return 0;
  return std::min(1.0, double(g.kv_blocks_used) / double(g.kv_blocks_usable));
}

std::string render_prometheus(const EngineMetrics& m, const EngineGauges& g,
                              const std::vector<HttpRequestCount>& http) {
  return render_prometheus({{"", &m, g}}, http, {});
}

std::string render_prometheus(const std::vector<ModelMetricsView>& models,
                              const std::vector<HttpRequestCount>& http,
                              const PrometheusOptions& opt) {
  std::string out;
  out.reserve(8192 * std::max<size_t>(1, models.size()));
  histogram(out, "shrike_request_latency_seconds",
            "End-to-end request latency: submission to the last token.", models,
            &EngineMetrics::e2e_latency);
  histogram(out, "shrike_time_to_first_token_seconds",
            "Time from submission to the first generated token.", models,
            &EngineMetrics::time_to_first_token);
  histogram(out, "shrike_time_per_output_token_seconds",
            "Per request: (last token - first token) / (generated tokens - 1).", models,
            &EngineMetrics::time_per_output_token);
  histogram(out, "shrike_inter_token_latency_seconds",
            "Time between consecutive generated tokens of a request.", models,
            &EngineMetrics::inter_token_latency);
  histogram(out, "shrike_queue_wait_seconds",
            "Time from submission to the first step that scheduled the request.", models,
            &EngineMetrics::queue_wait);

  family(out, "shrike_requests_finished_total", "counter", "Requests finished, by reason.");
  for (const ModelMetricsView& mv : models)
    for (int r = 0; r < int(FinishReason::kCount); ++r)
      sample(out, "shrike_requests_finished_total",
             labels(mv.label("model"),
                    std::string("reason=\"") + finish_reason_name(FinishReason(r)) + "\""),
             load(mv.metrics->finished[size_t(r)]));
  const auto counter = [&](const char* name, const char* help,
                           std::atomic<int64_t> EngineMetrics::*a) {
    per_model(out, name, "counter", help, models,
              [&](const ModelMetricsView& mv) { return load(mv.metrics->*a); });
  };
  counter("shrike_prompt_tokens_total", "Prompt tokens of admitted requests.",
          &EngineMetrics::prompt_tokens);
  counter("shrike_generation_tokens_total", "Generated tokens.", &EngineMetrics::generated_tokens);
  counter("shrike_preemptions_total", "Requests preempted to free KV cache blocks.",
          &EngineMetrics::preemptions);
  counter("shrike_requests_rejected_total",
          "Requests refused at submission (queue full or draining).", &EngineMetrics::rejected);
  counter("shrike_requests_timed_out_total",
          "Requests whose deadline passed (also counted as finished with reason deadline).",
          &EngineMetrics::timed_out);
  counter("shrike_engine_steps_total", "Engine steps that ran the model.", &EngineMetrics::steps);
  counter("shrike_batch_tokens_total", "Tokens computed over all engine steps.",
          &EngineMetrics::batch_tokens);
  counter("shrike_spec_steps_total",
          "Speculative verification steps (one per speculating sequence per engine step).",
          &EngineMetrics::spec_steps);
  counter("shrike_spec_proposed_tokens_total", "Draft tokens proposed for verification.",
          &EngineMetrics::spec_proposed);
  counter("shrike_spec_accepted_tokens_total", "Draft tokens the target accepted.",
          &EngineMetrics::spec_accepted);
  {
    const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    per_model(out, "shrike_spec_acceptance_rate", "gauge",
              "Accepted / proposed draft tokens since the start.", models,
              [&](const ModelMetricsView& mv) {
                return ratio(double(load(mv.metrics->spec_accepted)),
                             double(load(mv.metrics->spec_proposed)));
              });
    per_model(out, "shrike_spec_mean_accepted_tokens", "gauge",
              "Draft tokens accepted per verification step since the start.", models,
              [&](const ModelMetricsView& mv) {
                return ratio(double(load(mv.metrics->spec_accepted)),
                             double(load(mv.metrics->spec_steps)));
              });
    per_model(out, "shrike_spec_draft_time_share", "gauge",
              "Drafting time / (drafting + target forward passes) since the start.", models,
              [&](const ModelMetricsView& mv) {
                const double draft = double(load(mv.metrics->spec_draft_ns));
                return ratio(draft, draft + double(load(mv.metrics->forward_ns)));
              });
  }
  const auto gauge_of = [&](const char* name, const char* type, const char* help,
                            int64_t EngineGauges::*v) {
    per_model(out, name, type, help, models,
              [&](const ModelMetricsView& mv) { return mv.gauges.*v; });
  };
  gauge_of("shrike_prefix_cache_queried_tokens_total", "counter",
           "Prompt tokens looked up in the prefix cache.", &EngineGauges::prefix_queried_tokens);
  gauge_of("shrike_prefix_cache_hit_tokens_total", "counter",
           "Prompt tokens found in the prefix cache.", &EngineGauges::prefix_hit_tokens);

  family(out, "shrike_http_requests_total", "counter", "HTTP requests, by route and status code.");
  for (const HttpRequestCount& h : http)
    sample(
        out, "shrike_http_requests_total",
        "route=\"" + escape_label_value(h.route) + "\",code=\"" + std::to_string(h.status) + "\"",
        h.count);

  gauge_of("shrike_requests_running", "gauge", "Requests in the running batch.",
           &EngineGauges::running);
  gauge_of("shrike_requests_waiting", "gauge", "Requests waiting to be scheduled.",
           &EngineGauges::waiting);
  gauge_of("shrike_kv_blocks_used", "gauge", "KV cache blocks held by requests.",
           &EngineGauges::kv_blocks_used);
  gauge_of("shrike_kv_blocks_capacity", "gauge", "KV cache blocks in the pool.",
           &EngineGauges::kv_blocks_total);
  gauge_of("shrike_kv_blocks_usable", "gauge",
           "KV cache blocks the model could hold now: the pool, or under a shared KV memory "
           "budget the blocks it has committed plus what the budget would still grant it.",
           &EngineGauges::kv_blocks_usable);
  gauge_of("shrike_kv_blocks_committed", "gauge",
           "KV cache blocks used at least once (their memory is resident).",
           &EngineGauges::kv_blocks_committed);
  gauge_of("shrike_kv_blocks_cached", "gauge",
           "Free KV cache blocks that still hold a cached prefix.",
           &EngineGauges::kv_blocks_cached);
  gauge_of("shrike_kv_cache_capacity_bytes", "gauge", "Bytes of KV cache memory.",
           &EngineGauges::kv_bytes_total);
  gauge_of("shrike_kv_cache_bytes_used", "gauge",
           "Bytes of KV cache memory held by requests (blocks, and the int8-mixed f16 copies and "
           "bookkeeping).",
           &EngineGauges::kv_bytes_used);
  gauge_of(
      "shrike_kv_cache_f16_copy_bytes", "gauge",
      "Bytes of f16 copies the int8-mixed KV cache keeps (part of shrike_kv_cache_bytes_used).",
      &EngineGauges::kv_f16_copy_bytes);
  gauge_of("shrike_kv_cache_tokens_used", "gauge",
           "Positions held in the KV cache by running requests.", &EngineGauges::kv_tokens_used);
  family(out, "shrike_kv_cache_bytes_per_token", "gauge",
         "Bytes one position takes in the KV cache blocks (keys and values of every layer, int8 "
         "scales included), by cache type.");
  for (const ModelMetricsView& mv : models)
    sample(out, "shrike_kv_cache_bytes_per_token",
           labels(mv.label("model"), "type=\"" + escape_label_value(mv.gauges.kv_type) + "\""),
           mv.gauges.kv_bytes_per_token);

  if (opt.shared_kv_budget_bytes > 0) {
    family(out, "shrike_kv_memory_budget_bytes", "gauge",
           "The KV memory budget all models share (serve --kv-memory).");
    sample(out, "shrike_kv_memory_budget_bytes", "", opt.shared_kv_budget_bytes);
    family(out, "shrike_kv_memory_claimed_bytes", "gauge",
           "Sum over models of max(committed KV bytes, guaranteed minimum): never above the "
           "budget.");
    sample(out, "shrike_kv_memory_claimed_bytes", "", opt.shared_kv_claimed_bytes);
  }

  if (opt.vllm_compat) {
    // The Gateway API Inference Extension's model-server protocol reads these three gauges under
    // vLLM's names and its model_name label.
    per_model(
        out, "vllm:num_requests_waiting", "gauge",
        "Requests waiting to be processed (shrike_requests_waiting).", models,
        [](const ModelMetricsView& mv) { return mv.gauges.waiting; }, "model_name");
    per_model(
        out, "vllm:num_requests_running", "gauge",
        "Requests being processed (shrike_requests_running).", models,
        [](const ModelMetricsView& mv) { return mv.gauges.running; }, "model_name");
    per_model(
        out, "vllm:kv_cache_usage_perc", "gauge",
        "KV cache usage, 0 to 1: blocks held by requests / blocks the model could hold.", models,
        [](const ModelMetricsView& mv) { return kv_cache_usage(mv.gauges); }, "model_name");
  }
  return out;
}

}  // namespace shrike::engine
