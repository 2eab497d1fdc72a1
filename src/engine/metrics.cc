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

void histogram(std::string& out, const std::string& name, const char* help, const Histogram& h) {
  family(out, name.c_str(), "histogram", help);
  const Histogram::Snapshot s = h.snapshot();
  for (size_t i = 0; i <= s.bounds.size(); ++i) {
    const std::string le =
        i < s.bounds.size() ? format_prometheus_value(s.bounds[i]) : std::string("+Inf");
    sample(out, name + "_bucket", "le=\"" + le + "\"", int64_t(s.cumulative[i]));
  }
  sample(out, name + "_sum", "", s.sum);
  sample(out, name + "_count", "", int64_t(s.count));
}

void counter(std::string& out, const char* name, const char* help, int64_t v) {
  family(out, name, "counter", help);
  sample(out, name, "", v);
}

void gauge(std::string& out, const char* name, const char* help, int64_t v) {
  family(out, name, "gauge", help);
  sample(out, name, "", v);
}

}  // namespace

std::string render_prometheus(const EngineMetrics& m, const EngineGauges& g,
                              const std::vector<HttpRequestCount>& http) {
  std::string out;
  out.reserve(8192);
  histogram(out, "shrike_request_latency_seconds",
            "End-to-end request latency: submission to the last token.", m.e2e_latency);
  histogram(out, "shrike_time_to_first_token_seconds",
            "Time from submission to the first generated token.", m.time_to_first_token);
  histogram(out, "shrike_time_per_output_token_seconds",
            "Per request: (last token - first token) / (generated tokens - 1).",
            m.time_per_output_token);
  histogram(out, "shrike_inter_token_latency_seconds",
            "Time between consecutive generated tokens of a request.", m.inter_token_latency);
  histogram(out, "shrike_queue_wait_seconds",
            "Time from submission to the first step that scheduled the request.", m.queue_wait);

  family(out, "shrike_requests_finished_total", "counter", "Requests finished, by reason.");
  for (int r = 0; r < int(FinishReason::kCount); ++r)
    sample(out, "shrike_requests_finished_total",
           std::string("reason=\"") + finish_reason_name(FinishReason(r)) + "\"",
           m.finished[size_t(r)].load(std::memory_order_relaxed));
  const auto load = [](const std::atomic<int64_t>& a) { return a.load(std::memory_order_relaxed); };
  counter(out, "shrike_prompt_tokens_total", "Prompt tokens of admitted requests.",
          load(m.prompt_tokens));
  counter(out, "shrike_generation_tokens_total", "Generated tokens.", load(m.generated_tokens));
  counter(out, "shrike_preemptions_total", "Requests preempted to free KV cache blocks.",
          load(m.preemptions));
  counter(out, "shrike_requests_rejected_total",
          "Requests refused at submission (queue full or draining).", load(m.rejected));
  counter(out, "shrike_requests_timed_out_total",
          "Requests whose deadline passed (also counted as finished with reason deadline).",
          load(m.timed_out));
  counter(out, "shrike_engine_steps_total", "Engine steps that ran the model.", load(m.steps));
  counter(out, "shrike_batch_tokens_total", "Tokens computed over all engine steps.",
          load(m.batch_tokens));
  counter(out, "shrike_spec_steps_total",
          "Speculative verification steps (one per speculating sequence per engine step).",
          load(m.spec_steps));
  counter(out, "shrike_spec_proposed_tokens_total", "Draft tokens proposed for verification.",
          load(m.spec_proposed));
  counter(out, "shrike_spec_accepted_tokens_total", "Draft tokens the target accepted.",
          load(m.spec_accepted));
  {
    const double proposed = double(load(m.spec_proposed)), steps = double(load(m.spec_steps));
    const double draft = double(load(m.spec_draft_ns)), fwd = double(load(m.forward_ns));
    const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    family(out, "shrike_spec_acceptance_rate", "gauge",
           "Accepted / proposed draft tokens since the start.");
    sample(out, "shrike_spec_acceptance_rate", "", ratio(double(load(m.spec_accepted)), proposed));
    family(out, "shrike_spec_mean_accepted_tokens", "gauge",
           "Draft tokens accepted per verification step since the start.");
    sample(out, "shrike_spec_mean_accepted_tokens", "",
           ratio(double(load(m.spec_accepted)), steps));
    family(out, "shrike_spec_draft_time_share", "gauge",
           "Drafting time / (drafting + target forward passes) since the start.");
    sample(out, "shrike_spec_draft_time_share", "", ratio(draft, draft + fwd));
  }
  counter(out, "shrike_prefix_cache_queried_tokens_total",
          "Prompt tokens looked up in the prefix cache.", g.prefix_queried_tokens);
  counter(out, "shrike_prefix_cache_hit_tokens_total", "Prompt tokens found in the prefix cache.",
          g.prefix_hit_tokens);

  family(out, "shrike_http_requests_total", "counter", "HTTP requests, by route and status code.");
  for (const HttpRequestCount& h : http)
    sample(
        out, "shrike_http_requests_total",
        "route=\"" + escape_label_value(h.route) + "\",code=\"" + std::to_string(h.status) + "\"",
        h.count);

  gauge(out, "shrike_requests_running", "Requests in the running batch.", g.running);
  gauge(out, "shrike_requests_waiting", "Requests waiting to be scheduled.", g.waiting);
  gauge(out, "shrike_kv_blocks_used", "KV cache blocks held by requests.", g.kv_blocks_used);
  gauge(out, "shrike_kv_blocks_total", "KV cache blocks in the pool.", g.kv_blocks_total);
  gauge(out, "shrike_kv_blocks_cached", "Free KV cache blocks that still hold a cached prefix.",
        g.kv_blocks_cached);
  gauge(out, "shrike_kv_cache_bytes_total", "Bytes of KV cache memory.", g.kv_bytes_total);
  gauge(out, "shrike_kv_cache_bytes_used",
        "Bytes of KV cache memory held by requests (blocks, and the int8-mixed f16 copies and "
        "bookkeeping).",
        g.kv_bytes_used);
  gauge(out, "shrike_kv_cache_f16_copy_bytes",
        "Bytes of f16 copies the int8-mixed KV cache keeps (part of shrike_kv_cache_bytes_used).",
        g.kv_f16_copy_bytes);
  gauge(out, "shrike_kv_cache_tokens_used", "Positions held in the KV cache by running requests.",
        g.kv_tokens_used);
  family(out, "shrike_kv_cache_bytes_per_token", "gauge",
         "Bytes one position takes in the KV cache blocks (keys and values of every layer, int8 "
         "scales included), by cache type.");
  sample(out, "shrike_kv_cache_bytes_per_token", "type=\"" + escape_label_value(g.kv_type) + "\"",
         g.kv_bytes_per_token);
  return out;
}

}  // namespace shrike::engine
