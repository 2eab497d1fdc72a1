#include "loadtest/client.h"

#include <curl/curl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "loadtest/sse.h"

namespace shrike::loadtest {
namespace {

using Clock = std::chrono::steady_clock;

struct Transfer {
  RequestRecord rec;
  ResponseParser parser;
  std::string body;
  char errbuf[CURL_ERROR_SIZE] = {};
  Clock::time_point start;
  bool stream;
  Transfer(bool chat, bool stream) : parser(chat, stream), stream(stream) {}
};

struct Loop {
  Clock::time_point t0 = Clock::now();
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - t0).count(); }
};

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const double now = std::chrono::duration<double>(Clock::now() - t->start).count();
  t->parser.feed(std::string_view(data, size * n), now);
  return size * n;
}

void check(CURLMcode c, const char* what) {
  if (c != CURLM_OK) throw std::runtime_error(std::string(what) + ": " + curl_multi_strerror(c));
}

// epoll set and timer deadline that libcurl drives through its socket and timer callbacks.
struct Sockets {
  int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  bool has_deadline = false;
  Clock::time_point deadline;
  Sockets() {
    if (epoll_fd < 0) throw std::runtime_error("epoll_create1 failed");
  }
  ~Sockets() { close(epoll_fd); }
};

int on_socket(CURL*, curl_socket_t s, int what, void* user, void*) {
  auto* so = static_cast<Sockets*>(user);
  if (what == CURL_POLL_REMOVE) {
    epoll_ctl(so->epoll_fd, EPOLL_CTL_DEL, s, nullptr);  // may already be closed: harmless
    return 0;
  }
  epoll_event ev{};
  ev.events = ((what & CURL_POLL_IN) ? (uint32_t)EPOLLIN : 0u) |
              ((what & CURL_POLL_OUT) ? (uint32_t)EPOLLOUT : 0u);
  ev.data.fd = s;
  if (epoll_ctl(so->epoll_fd, EPOLL_CTL_MOD, s, &ev) != 0 && errno == ENOENT)
    epoll_ctl(so->epoll_fd, EPOLL_CTL_ADD, s, &ev);
  return 0;
}

int on_timer(CURLM*, long timeout_ms, void* user) {
  auto* so = static_cast<Sockets*>(user);
  so->has_deadline = timeout_ms >= 0;
  if (timeout_ms >= 0) so->deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  return 0;
}

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
  ~CurlGlobal() { curl_global_cleanup(); }
};

// Fills the record's outcome and latencies once curl reports the transfer done. Token times are
// relative to the moment the request was handed to curl.
void finish(Transfer& t, CURL* easy, CURLcode code, double end) {
  auto& r = t.rec;
  t.parser.finish(end);
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &r.http_status);
  curl_off_t pretransfer_us = -1;
  if (curl_easy_getinfo(easy, CURLINFO_PRETRANSFER_TIME_T, &pretransfer_us) == CURLE_OK &&
      pretransfer_us > 0)
    r.setup = pretransfer_us * 1e-6;
  r.e2e = end;
  if (code == CURLE_OPERATION_TIMEDOUT) {
    r.outcome = Outcome::kTimedOut;
    r.error = t.errbuf[0] ? t.errbuf : curl_easy_strerror(code);
  } else if (code != CURLE_OK) {
    r.outcome = Outcome::kFailed;
    r.error = t.errbuf[0] ? t.errbuf : curl_easy_strerror(code);
  } else if (r.http_status != 200) {
    r.outcome = Outcome::kFailed;
    r.error = "HTTP " + std::to_string(r.http_status) + ": " + t.parser.body().substr(0, 300);
  } else if (!t.parser.error().empty()) {
    r.outcome = Outcome::kFailed;
    r.error = t.parser.error();
  } else {
    r.outcome = Outcome::kCompleted;
  }
  const auto& times = t.parser.token_times();
  r.usage_from_server = t.parser.usage_completion_tokens() >= 0;
  r.output_tokens =
      r.usage_from_server ? t.parser.usage_completion_tokens() : (int64_t)times.size();
  r.prompt_tokens = t.parser.usage_prompt_tokens();
  if (r.outcome != Outcome::kCompleted) {
    r.ttft = r.tpot = NAN;
    return;
  }
  if (!times.empty()) r.ttft = times.front();
  for (size_t i = 1; i < times.size(); ++i) r.itl.push_back(times[i] - times[i - 1]);
  // TPOT as vLLM's benchmark defines it: the time after the first token, per later token.
  // Not defined without streaming (the whole answer arrives at once).
  if (t.stream && r.output_tokens > 1 && std::isfinite(r.ttft))
    r.tpot = (r.e2e - r.ttft) / (r.output_tokens - 1);
}

// The curl multi handle and the epoll set it drives. curl_multi_perform walks every transfer on
// each call, which is quadratic when hundreds of streams open at once; the socket interface
// touches only the sockets epoll reports ready.
class Multi {
 public:
  Multi() {
    curl_multi_setopt(multi_.get(), CURLMOPT_MAXCONNECTS, 4096L);
    curl_multi_setopt(multi_.get(), CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(multi_.get(), CURLMOPT_SOCKETDATA, &sockets_);
    curl_multi_setopt(multi_.get(), CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(multi_.get(), CURLMOPT_TIMERDATA, &sockets_);
    // "Expect:" stops curl from waiting for 100-continue before sending bodies over 1 KiB.
    for (const char* h : {"Content-Type: application/json", "Expect:"})
      headers_.reset(curl_slist_append(headers_.release(), h));
  }

  // Hands the transfer (its body already written) to curl, which owns it until done.
  void add(std::unique_ptr<Transfer> t, const RunConfig& cfg) {
    CURL* e = curl_easy_init();
    if (!e) throw std::runtime_error("curl_easy_init failed");
    curl_easy_setopt(e, CURLOPT_URL, cfg.url.c_str());
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->body.c_str());
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)t->body.size());
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers_.get());
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)std::ceil(cfg.timeout_s * 1000));
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    // Never through a proxy (http_proxy in the environment would send traffic off the machine),
    // never follow redirects, plain HTTP(S) only.
    curl_easy_setopt(e, CURLOPT_PROXY, "");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_PRIVATE, t.get());
    t->start = Clock::now();
    check(curl_multi_add_handle(multi_.get(), e), "curl_multi_add_handle");
    t.release();
  }

  // Waits up to max_wait_s (less when curl's own timer fires sooner) and lets curl act on what
  // the sockets report.
  void wait(double max_wait_s) {
    double wait = max_wait_s;
    if (sockets_.has_deadline)
      wait =
          std::min(wait, std::chrono::duration<double>(sockets_.deadline - Clock::now()).count());
    wait = std::max(wait, 0.0);
    const timespec ts{(time_t)wait, (long)((wait - std::floor(wait)) * 1e9)};
    const int n =
        epoll_pwait2(sockets_.epoll_fd, events_.data(), (int)events_.size(), &ts, nullptr);
    if (n < 0 && errno != EINTR) throw std::runtime_error("epoll_pwait2 failed");
    int running = 0;
    for (int i = 0; i < n; ++i) {
      const uint32_t ev = events_[i].events;
      const int flags = ((ev & EPOLLIN) ? CURL_CSELECT_IN : 0) |
                        ((ev & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
                        ((ev & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);
      check(curl_multi_socket_action(multi_.get(), events_[i].data.fd, flags, &running),
            "curl_multi_socket_action");
    }
    if (sockets_.has_deadline && Clock::now() >= sockets_.deadline) {
      sockets_.has_deadline = false;
      check(curl_multi_socket_action(multi_.get(), CURL_SOCKET_TIMEOUT, 0, &running),
            "curl_multi_socket_action");
    }
  }

  // Calls done(record) for each transfer curl finished since the last call.
  template <class F>
  void collect(F&& done) {
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(multi_.get(), &left)) {
      if (m->msg != CURLMSG_DONE) continue;
      CURL* e = m->easy_handle;
      Transfer* raw = nullptr;
      curl_easy_getinfo(e, CURLINFO_PRIVATE, &raw);
      std::unique_ptr<Transfer> t(raw);
      finish(*t, e, m->data.result, std::chrono::duration<double>(Clock::now() - t->start).count());
      curl_multi_remove_handle(multi_.get(), e);
      curl_easy_cleanup(e);
      done(std::move(t->rec));
    }
  }

 private:
  std::unique_ptr<CURLM, decltype(&curl_multi_cleanup)> multi_{curl_multi_init(),
                                                               curl_multi_cleanup};
  Sockets sockets_;
  std::vector<epoll_event> events_ = std::vector<epoll_event>(256);
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers_{nullptr,
                                                                       curl_slist_free_all};
};

// The transfer a planned request becomes: its record's plan and its body (a prompt from the
// file, cycled, or synthesised to the planned length).
std::unique_ptr<Transfer> plan_transfer(const RunConfig& cfg, const PlannedRequest& p, int64_t id,
                                        double scheduled_s) {
  auto t = std::make_unique<Transfer>(cfg.chat, cfg.stream);
  auto& r = t->rec;
  r.id = id;
  r.scheduled_s = scheduled_s;
  r.planned_prompt_tokens = p.input_tokens;
  r.planned_output_tokens = p.output_tokens;
  std::string prompt;
  int64_t max_tokens = p.output_tokens;
  if (!cfg.prompts.empty()) {
    const auto& e = cfg.prompts[size_t(id) % cfg.prompts.size()];
    prompt = e.prompt;
    if (e.max_tokens > 0) max_tokens = r.planned_output_tokens = e.max_tokens;
    r.planned_prompt_tokens = -1;
  } else {
    prompt = synth_prompt(p.input_tokens, p.hash_ids, uint64_t(id), cfg.seed);
  }
  t->body = request_body(cfg, prompt, max_tokens);
  return t;
}

}  // namespace

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kCompleted:
      return "completed";
    case Outcome::kFailed:
      return "failed";
    case Outcome::kTimedOut:
      return "timed_out";
  }
  return "?";
}

std::string request_body(const RunConfig& c, const std::string& prompt, int64_t max_tokens) {
  if (c.intent) return nlohmann::json{{"text", prompt}}.dump();
  nlohmann::json j;
  // Without a name the server uses its own model (OpenAI-compatible servers check a given name).
  if (!c.model.empty()) j["model"] = c.model;
  if (c.chat)
    j["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", prompt}}});
  else
    j["prompt"] = prompt;
  j["max_tokens"] = max_tokens;
  j["temperature"] = 0;
  // llama-server (and vLLM) keep generating to max_tokens, so output lengths follow the plan.
  if (c.ignore_eos) j["ignore_eos"] = true;
  j["stream"] = c.stream;
  if (c.stream) j["stream_options"] = {{"include_usage", true}};
  return j.dump();
}

RunResult run_load(const RunConfig& cfg, Schedule& schedule) {
  static CurlGlobal global;
  RunResult res;
  res.concurrency = schedule.concurrency;
  res.intended_rate = schedule.concurrency > 0 ? 0 : schedule.intended_rate;
  const bool closed = schedule.concurrency > 0;
  Multi multi;
  Loop loop;
  int in_flight = 0;
  int64_t sent = 0, done = 0, errors = 0;
  double next_progress = 0;
  std::optional<PlannedRequest> next = schedule.next();
  const auto below_max = [&] { return cfg.max_requests == 0 || sent < cfg.max_requests; };

  while (true) {
    const double now = loop.elapsed();
    const bool may_send = !(cfg.stop && cfg.stop->load()) && below_max() &&
                          (cfg.duration_s <= 0 || now < cfg.duration_s);
    if (may_send) {
      while (next && below_max() && (cfg.duration_s <= 0 || loop.elapsed() < cfg.duration_s) &&
             (closed ? in_flight < schedule.concurrency : next->at <= loop.elapsed())) {
        auto t = plan_transfer(cfg, *next, sent, closed ? loop.elapsed() : next->at);
        Transfer& added = *t;  // curl owns it from here until collect() hands its record back
        multi.add(std::move(t), cfg);
        added.rec.sent_s = std::chrono::duration<double>(added.start - loop.t0).count();
        ++sent;
        ++in_flight;
        res.max_in_flight = std::max(res.max_in_flight, in_flight);
        next = schedule.next();
      }
    }
    const bool sending = may_send && next && below_max();
    if (!sending && in_flight == 0) break;

    // Wait for socket activity, curl's own timer, the next arrival, or 100 ms (progress line).
    double wait = 0.1;
    if (sending && !closed) wait = std::min(wait, next->at - loop.elapsed());
    if (cfg.duration_s > 0 && sending) wait = std::min(wait, cfg.duration_s - loop.elapsed());
    multi.wait(wait);
    multi.collect([&](RequestRecord rec) {
      --in_flight;
      ++done;
      if (rec.outcome != Outcome::kCompleted) ++errors;
      res.records.push_back(std::move(rec));
    });
    if (cfg.progress && loop.elapsed() >= next_progress) {
      next_progress = loop.elapsed() + 0.5;
      std::fprintf(stderr, "\rsent %lld  done %lld  in flight %d  errors %lld   ", (long long)sent,
                   (long long)done, in_flight, (long long)errors);
    }
  }
  if (cfg.progress) std::fprintf(stderr, "\n");
  res.wall_s = loop.elapsed();
  std::sort(res.records.begin(), res.records.end(), [](auto& a, auto& b) { return a.id < b.id; });
  return res;
}

}  // namespace shrike::loadtest
