#include "optimize/served.h"

#include <httplib.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace shrike::optimize {
namespace {

// The port from "shrike serve: listening on http://HOST:PORT" in the log, or 0.
int port_from_log(const std::string& path) {
  std::ifstream in(path);
  const std::string marker = "shrike serve: listening on http://127.0.0.1:";
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find(marker);
    if (at != std::string::npos) return std::atoi(line.c_str() + at + marker.size());
  }
  return 0;
}

// Cumulative bucket counts of one histogram: upper bound -> count.
std::map<double, double> buckets(const std::string& text, const std::string& name) {
  std::map<double, double> out;
  std::istringstream in(text);
  const std::string prefix = name + "_bucket{le=\"";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    const size_t end = line.find('"', prefix.size());
    if (end == std::string::npos) continue;
    const std::string le = line.substr(prefix.size(), end - prefix.size());
    const double bound = le == "+Inf" ? INFINITY : std::strtod(le.c_str(), nullptr);
    const size_t space = line.rfind(' ');
    out[bound] = std::strtod(line.c_str() + space + 1, nullptr);
  }
  return out;
}

}  // namespace

ServedModel::ServedModel(const std::string& shrike_bin, const std::string& model,
                         const std::vector<std::string>& serve_args, const std::string& log_path,
                         double ready_timeout_s)
    : log_path_(log_path) {
  std::vector<std::string> argv = {shrike_bin,  "serve",  model, "--host",
                                   "127.0.0.1", "--port", "0"};
  argv.insert(argv.end(), serve_args.begin(), serve_args.end());
  {
    std::ofstream log(log_path, std::ios::trunc);
    log << "$ " << shell_join(argv) << "\n";
  }
  child_ = std::make_unique<Child>(argv, log_path, no_blas_threads_env());
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(ready_timeout_s);
  auto fail = [&](const std::string& why) {
    child_->stop(2.0);
    throw std::runtime_error("shrike serve " + model + ": " + why + " (log " + log_path + ")\n" +
                             tail_of(log_path, 8));
  };
  while (true) {
    if (auto status = child_->poll()) fail("exited with status " + std::to_string(*status));
    if (std::chrono::steady_clock::now() >= deadline)
      fail("not ready after " + std::to_string(int(ready_timeout_s)) + " s");
    if (port_ == 0) port_ = port_from_log(log_path);
    if (port_ > 0) {
      httplib::Client c("127.0.0.1", port_);
      c.set_connection_timeout(1);
      c.set_read_timeout(2);
      if (auto res = c.Get("/health"); res && res->status == 200) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

ServedModel::~ServedModel() {
  if (child_) child_->stop(5.0);
}

std::string ServedModel::get(const std::string& path) const {
  httplib::Client c("127.0.0.1", port_);
  c.set_connection_timeout(2);
  c.set_read_timeout(30);
  auto res = c.Get(path);
  if (!res || res->status != 200)
    throw std::runtime_error(url() + path + ": " +
                             (res ? "status " + std::to_string(res->status) : "no answer"));
  return res->body;
}

std::map<std::string, std::string> ServedModel::serving_options() const {
  const auto j = nlohmann::json::parse(get("/v1/models"));
  std::map<std::string, std::string> out;
  const auto& card = j.at("data").at(0);
  if (!card.contains("shrike"))
    throw std::runtime_error(url() + "/v1/models: no \"shrike\" field (an older shrike serve?)");
  for (const auto& [k, v] : card.at("shrike").at("serving_options").items())
    out[k] = v.get<std::string>();
  return out;
}

std::string ServedModel::metrics() const {
  return get("/metrics");
}

std::string ServedModel::complete(const std::string& prompt, int max_tokens) const {
  httplib::Client c("127.0.0.1", port_);
  c.set_connection_timeout(2);
  c.set_read_timeout(60);
  const nlohmann::json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
  auto res = c.Post("/v1/completions", body.dump(), "application/json");
  if (!res || res->status != 200)
    throw std::runtime_error(
        url() + "/v1/completions: " +
        (res ? "status " + std::to_string(res->status) + " " + res->body : "no answer"));
  return nlohmann::json::parse(res->body).at("choices").at(0).at("text").get<std::string>();
}

int64_t parse_vm_hwm(const std::string& status_text) {
  std::istringstream in(status_text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoll(line.c_str() + 6, nullptr, 10) * 1024;
  return -1;
}

int64_t ServedModel::peak_rss_bytes() const {
  std::ifstream in("/proc/" + std::to_string(child_->pid()) + "/status");
  std::stringstream s;
  s << in.rdbuf();
  return parse_vm_hwm(s.str());
}

int ServedModel::stop(double grace_s) {
  return child_->stop(grace_s);
}

double metric_sum(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  double sum = 0;
  bool seen = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name, 0) != 0 || line.size() <= name.size()) continue;
    const char next = line[name.size()];
    if (next != ' ' && next != '{') continue;  // another metric whose name starts the same
    const size_t value = line.rfind(' ');
    sum += std::strtod(line.c_str() + value + 1, nullptr);
    seen = true;
  }
  return seen ? sum : NAN;
}

LatencyBreakdown latency_breakdown(const std::string& before, const std::string& after) {
  // A counter's growth between the scrapes (a server without the metric yet counts 0 before).
  const auto grew = [&](const std::string& name) {
    const double a = metric_sum(after, name), b = metric_sum(before, name);
    return a - (std::isnan(b) ? 0 : b);
  };
  LatencyBreakdown out;
  const double n = grew("shrike_request_latency_seconds_count");
  if (!(n > 0)) return out;
  const auto mean_ms = [&](const std::string& h) { return 1000 * grew(h + "_sum") / n; };
  out.e2e_ms = mean_ms("shrike_request_latency_seconds");
  out.queue_ms = mean_ms("shrike_queue_wait_seconds");
  const double ttft = mean_ms("shrike_time_to_first_token_seconds");
  out.prefill_ms = ttft - out.queue_ms;
  out.decode_ms = out.e2e_ms - ttft;
  out.steps = grew("shrike_engine_steps_total") / n;
  out.step_ms = out.steps > 1 ? out.decode_ms / (out.steps - 1) : NAN;
  return out;
}

double histogram_quantile(const std::string& before, const std::string& after,
                          const std::string& name, double p) {
  const auto b0 = buckets(before, name), b1 = buckets(after, name);
  if (b1.empty()) return NAN;
  const double total = b1.rbegin()->second - (b0.empty() ? 0 : b0.rbegin()->second);
  if (!(total > 0)) return NAN;
  for (const auto& [bound, cum] : b1) {
    const auto it = b0.find(bound);
    const double delta = cum - (it == b0.end() ? 0 : it->second);
    if (delta >= p * total - 1e-9) return bound;
  }
  return INFINITY;
}

}  // namespace shrike::optimize
