// A scripted OpenAI-compatible server for the load tester's tests: loopback, ephemeral port, one
// epoll thread, timers on a timerfd with absolute deadlines (microsecond-exact, not the 1 ms
// granularity of epoll_wait), HTTP/1.1 keep-alive, chunked SSE streaming.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace shrike::loadtest::testing {

struct StubScript {
  double first_token_ms = 50;  // from request receipt to the first token event
  int tokens = 10;
  double gap_ms = 20;  // between token events; token k goes out at first + k * gap
  int status = 200;    // non-200: every request answered at once with this status
  int fail_every = 0;  // > 0: every fail_every-th request (1-based) gets fail_status
  int fail_status = 500;
  bool hang = false;  // read requests, never answer
  bool usage = true;  // send `usage` (else the client counts events)
};

class StubServer {
 public:
  explicit StubServer(StubScript script);
  ~StubServer();
  StubServer(const StubServer&) = delete;
  StubServer& operator=(const StubServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int64_t requests() const { return requests_.load(); }
  int max_concurrent() const { return max_concurrent_.load(); }  // responses in progress
  int64_t connections() const { return connections_.load(); }    // accepted in all
  // Every request body received so far, in arrival order.
  std::vector<std::string> bodies() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return bodies_;
  }

 private:
  void loop();

  StubScript script_;
  int listen_fd_ = -1, epoll_fd_ = -1, timer_fd_ = -1, wake_fd_ = -1, port_ = 0;
  std::atomic<int64_t> requests_{0}, connections_{0};
  std::atomic<int> max_concurrent_{0};
  std::thread thread_;
  mutable std::mutex mutex_;
  std::vector<std::string> bodies_;
};

}  // namespace shrike::loadtest::testing
