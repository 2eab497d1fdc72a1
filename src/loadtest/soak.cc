#include "loadtest/soak.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "loadtest/http_call.h"
#include "loadtest/url.h"

namespace shrike::loadtest {
namespace {

using Clock = std::chrono::steady_clock;

std::string trim_slash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

void check_config(const SoakConfig& c) {
  const auto bad = [](const std::string& what) { throw std::invalid_argument("soak: " + what); };
  if (!(c.duration_s > 0) || c.duration_s > 7 * 86400) bad("duration must be in (0, 7 days]");
  if (c.max_requests < 1) bad("max requests must be at least 1");
  if (c.clients < 1 || c.clients > 512) bad("clients must be in [1, 512]");
  if (c.burst_size < 0 || c.burst_size > 4096) bad("burst size must be in [0, 4096]");
  if (!(c.burst_every_s > 0)) bad("burst interval must be > 0");
  const double shares =
      c.disconnect_share + c.malformed_share + c.deadline_share + c.long_prompt_share;
  for (double s : {c.disconnect_share, c.malformed_share, c.deadline_share, c.long_prompt_share})
    if (!(s >= 0)) bad("shares must be >= 0");
  if (shares > 1) bad("the shares of special requests add up to more than 1");
}

// The steady clients' mix: each special kind at its share, the rest spread evenly over the four
// plain kinds; malformed requests spread evenly over their kinds.
SoakKind draw_kind(const SoakConfig& c, std::mt19937_64& rng) {
  double u = std::uniform_real_distribution<double>(0, 1)(rng);
  const auto take = [&](double share) {
    if (u < share) return true;
    u -= share;
    return false;
  };
  if (take(c.disconnect_share)) return SoakKind::kDisconnect;
  if (take(c.deadline_share)) return SoakKind::kDeadline;
  if (take(c.long_prompt_share)) return SoakKind::kLongPrompt;
  if (take(c.malformed_share)) {
    const int first = int(SoakKind::kBadJson), n = int(SoakKind::kCount) - first;
    return SoakKind(first + int(std::uniform_int_distribution<int>(0, n - 1)(rng)));
  }
  return SoakKind(std::uniform_int_distribution<int>(0, 3)(rng));  // the four plain kinds
}

int64_t read_rss(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  if (!in) return -1;
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_vm_rss(ss.str());
}

class Soak {
 public:
  explicit Soak(const SoakConfig& c) : cfg_(c), base_(trim_slash(c.base_url)) {}

  SoakSummary run() {
    discover();
    summary_.duration_s = cfg_.duration_s;
    summary_.warmup_s = cfg_.warmup_share * cfg_.duration_s;
    t0_ = Clock::now();
    std::thread monitor([this] { monitor_loop(); });
    std::vector<std::thread> clients;
    for (int i = 0; i < cfg_.clients; ++i) clients.emplace_back([this, i] { client_loop(i); });
    std::thread bursts([this] { burst_loop(); });
    for (auto& t : clients) t.join();
    bursts.join();
    summary_.wall_s = elapsed();
    settle();
    monitor_done_ = true;
    monitor.join();
    if (cfg_.server_pid > 0) {
      const int64_t rss = read_rss(cfg_.server_pid);
      if (rss > 0) summary_.rss.push_back({elapsed(), rss});
    }
    return std::move(summary_);
  }

 private:
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }
  bool sending() const { return !(cfg_.stop && cfg_.stop->load()) && elapsed() < cfg_.duration_s; }

  // The served model's context and vocabulary (/v1/models), and the metrics before the run.
  void discover() {
    HttpCaller http;
    const auto models = http.call("GET", base_ + "/v1/models", "", 10);
    if (models.transport_error || models.status != 200)
      throw std::runtime_error(
          base_ + "/v1/models: " +
          (models.transport_error ? models.error : "HTTP " + std::to_string(models.status)));
    const auto j = nlohmann::json::parse(models.body, nullptr, false);
    if (j.is_discarded() || !j.contains("data") || j["data"].empty() ||
        !j["data"][0].contains("max_model_len"))
      throw std::runtime_error(base_ + "/v1/models: no data[0].max_model_len");
    const auto& card = j["data"][0];
    shape_.context = card["max_model_len"].get<int64_t>();
    if (card.contains("shrike") && card["shrike"].contains("serving_options") &&
        card["shrike"]["serving_options"].contains("vocab_size"))
      shape_.vocab = std::stoll(card["shrike"]["serving_options"]["vocab_size"].get<std::string>());
    shape_.model = cfg_.model;
    shape_.max_body_bytes = cfg_.max_body_bytes;
    if (!scrape(http, &summary_.metrics_start))
      throw std::runtime_error(base_ + "/metrics: no answer before the run");
  }

  bool scrape(HttpCaller& http, ServerMetrics* out) {
    const auto r = http.call("GET", base_ + "/metrics", "", 10);
    if (r.transport_error || r.status != 200) return false;
    *out = parse_server_metrics(r.body);
    return true;
  }

  void send(HttpCaller& http, SoakKind kind, std::mt19937_64& rng) {
    const SoakRequest req = make_soak_request(kind, shape_, rng);
    std::function<bool(const std::string&)> on_data;
    if (req.hang_up_after_first_token)
      on_data = [](const std::string& body) { return !sse_has_token(body); };
    const auto reply =
        http.call(req.method, base_ + req.path, req.body, cfg_.request_timeout_s, on_data);
    std::string why;
    const SoakOutcome o =
        judge_soak_reply(req, reply.status, reply.body, reply.hung_up, reply.transport_error, &why);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++summary_.counts[size_t(req.kind)][size_t(o)];
      if (!why.empty() && o != SoakOutcome::kRejected4xx && summary_.failures.size() < 20) {
        if (reply.transport_error) why += " (" + reply.error + ")";
        summary_.failures.push_back(std::string(soak_kind_name(req.kind)) + " at " +
                                    std::to_string(int(elapsed())) + " s: " + why);
      }
    }
    // A refused client waits a little (the server says Retry-After: 1) instead of spinning on
    // 429s for the whole burst; shorter than a second so the queue is probed again while full.
    if (o == SoakOutcome::kRefused429 || o == SoakOutcome::kRefused503)
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::uniform_int_distribution<int>(50, 250)(rng)));
  }

  void client_loop(int i) {
    HttpCaller http;
    std::mt19937_64 rng(cfg_.seed * 1000003 + uint64_t(i));
    while (sending() && sent_.fetch_add(1) < cfg_.max_requests)
      send(http, draw_kind(cfg_, rng), rng);
  }

  // Bursts of burst_size simultaneous requests: the first half-way through the warm-up (so the
  // memory they take is in the baseline), then every burst_every_s.
  void burst_loop() {
    double next = summary_.warmup_s / 2;
    for (int b = 0; cfg_.burst_size > 0; ++b) {
      while (sending() && elapsed() < next)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (!sending()) return;
      std::vector<std::thread> burst;
      for (int i = 0; i < cfg_.burst_size; ++i)
        burst.emplace_back([this, b, i] {
          HttpCaller http;
          std::mt19937_64 rng(cfg_.seed * 7919 + uint64_t(b) * 4096 + uint64_t(i));
          send(http, SoakKind::kBurst, rng);
        });
      for (auto& t : burst) t.join();
      next += cfg_.burst_every_s;
    }
  }

  // /health, /metrics and VmRSS on their own clocks until the run has settled.
  void monitor_loop() {
    HttpCaller health, metrics;
    double next_health = 0, next_metrics = 0, next_rss = 0, next_progress = 5;
    while (!monitor_done_) {
      const double now = elapsed();
      if (now >= next_health) {
        next_health = now + cfg_.health_every_s;
        const auto r = health.call("GET", base_ + "/health", "", cfg_.health_timeout_s);
        std::lock_guard<std::mutex> lock(mu_);
        ++summary_.health_polls;
        summary_.health_worst_s = std::max(summary_.health_worst_s, r.seconds);
        if (r.transport_error || r.status != 200) {
          ++summary_.health_failures;
          if (summary_.failures.size() < 20)
            summary_.failures.push_back(
                "/health at " + std::to_string(int(now)) +
                " s: " + (r.transport_error ? r.error : "HTTP " + std::to_string(r.status)));
        }
      }
      if (now >= next_metrics) {
        next_metrics = now + cfg_.metrics_every_s;
        ServerMetrics m;
        const bool ok = scrape(metrics, &m);
        std::lock_guard<std::mutex> lock(mu_);
        if (!ok) summary_.metrics_ok = false;
        summary_.kv_blocks_used_max = std::max(summary_.kv_blocks_used_max, m.kv_blocks_used);
        summary_.waiting_max = std::max(summary_.waiting_max, m.waiting);
        summary_.running_max = std::max(summary_.running_max, m.running);
        last_kv_ = m.kv_blocks_used;
      }
      if (cfg_.server_pid > 0 && now >= next_rss) {
        next_rss = now + cfg_.rss_every_s;
        const int64_t rss = read_rss(cfg_.server_pid);
        std::lock_guard<std::mutex> lock(mu_);
        if (rss > 0) summary_.rss.push_back({now, rss});
      }
      if (cfg_.progress && now >= next_progress) {
        next_progress = now + 5;
        std::lock_guard<std::mutex> lock(mu_);
        int64_t total = 0;
        for (size_t k = 0; k < size_t(SoakKind::kCount); ++k)
          total += soak_count(summary_, SoakKind(k));
        std::fprintf(
            stderr,
            "soak %.0f s: %lld answered, %lld 429, %zu unexpected, KV %.0f blocks, RSS %.1f MiB\n",
            now, (long long)total, (long long)soak_count(summary_, SoakOutcome::kRefused429),
            summary_.failures.size(), last_kv_,
            summary_.rss.empty() ? 0.0 : summary_.rss.back().bytes / 1048576.0);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // After the last answer: waits (up to settle_timeout_s) for the server to hold no KV block and
  // no request; cancelled streams are noticed at the server's next write, up to a second later.
  void settle() {
    HttpCaller http;
    const double start = elapsed();
    ServerMetrics m;
    bool ok = false;
    while (true) {
      ok = scrape(http, &m);
      if (ok && m.kv_blocks_used == 0 && m.running == 0 && m.waiting == 0) break;
      if (elapsed() - start > cfg_.settle_timeout_s) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    std::lock_guard<std::mutex> lock(mu_);
    summary_.settle_s = elapsed() - start;
    if (!ok) {
      summary_.metrics_ok = false;
      return;
    }
    summary_.metrics_end = m;
    summary_.kv_blocks_used_end = m.kv_blocks_used;
    summary_.running_end = m.running;
    summary_.waiting_end = m.waiting;
  }

  const SoakConfig cfg_;
  const std::string base_;
  SoakServerShape shape_;
  SoakSummary summary_;
  Clock::time_point t0_;
  std::mutex mu_;
  std::atomic<int64_t> sent_{0};
  std::atomic<bool> monitor_done_{false};
  double last_kv_ = 0;
};

}  // namespace

SoakSummary run_soak(const SoakConfig& config) {
  check_url_allowed(config.base_url, /*allow_remote=*/false);
  check_config(config);
  return Soak(config).run();
}

}  // namespace shrike::loadtest
