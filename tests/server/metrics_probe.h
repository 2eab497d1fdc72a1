// Polling a running `shrike serve` from tests: a /metrics sample's value, and waiting for a
// condition. Shared by the server tests that start a real server process.
#pragma once

#include <httplib.h>

#include <chrono>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

namespace shrike::testing {

// The value of the first /metrics sample whose line starts with `prefix` (a metric name, with
// its labels in order when it has them), or -1.
inline double scrape(int port, const std::string& prefix) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(10, 0);
  const auto r = c.Get("/metrics");
  if (!r || r->status != 200) return -1;
  std::istringstream in(r->body);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0 && line.size() > prefix.size() &&
        std::string(" {,}").find(line[prefix.size()]) != std::string::npos)
      return std::stod(line.substr(line.rfind(' ') + 1));
  return -1;
}

// Polls `cond` every 20 ms for up to timeout_s; its last answer.
inline bool eventually(const std::function<bool()>& cond, double timeout_s) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

}  // namespace shrike::testing
