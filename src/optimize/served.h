// One stage's server: `shrike serve` as a child process on 127.0.0.1 and a free port (the port it
// prints), ready once /health answers 200. Everything the report reads about the server comes
// from the server itself: its effective options (the "shrike" field of /v1/models), its queue-wait
// histogram (/metrics) and its peak resident memory (/proc/PID/status VmHWM).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "optimize/process.h"
#include "optimize/report.h"

namespace shrike::optimize {

class ServedModel {
 public:
  // Starts `shrike_bin serve MODEL --host 127.0.0.1 --port 0 serve_args...`, logging to log_path,
  // and waits up to ready_timeout_s for it to listen and answer /health. Throws
  // std::runtime_error with the log's tail when it exits or does not become ready.
  ServedModel(const std::string& shrike_bin, const std::string& model,
              const std::vector<std::string>& serve_args, const std::string& log_path,
              double ready_timeout_s);
  ~ServedModel();  // stops the server

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  pid_t pid() const { return child_->pid(); }
  // The serving options the server reports (/v1/models, data[0].shrike.serving_options).
  std::map<std::string, std::string> serving_options() const;
  std::string metrics() const;  // GET /metrics
  // POST /v1/completions with a greedy request; the generated text.
  std::string complete(const std::string& prompt, int max_tokens) const;
  int64_t peak_rss_bytes() const;  // VmHWM of the server process
  // SIGTERM (the server drains), SIGKILL after grace_s. Returns the exit status.
  int stop(double grace_s);

 private:
  std::string get(const std::string& path) const;
  std::unique_ptr<Child> child_;
  std::string log_path_;
  int port_ = 0;
};

// The p-quantile (0..1) of the requests a Prometheus histogram counted between two scrapes
// (`before` may be ""), as the upper bound of the bucket it falls in, in the histogram's unit.
// NaN when no request was counted; +inf when it falls in the +Inf bucket.
double histogram_quantile(const std::string& before, const std::string& after,
                          const std::string& name, double p);

// The sum of a metric's samples over its label sets (a counter or gauge in Prometheus text);
// NaN when the text has none.
double metric_sum(const std::string& text, const std::string& name);

// Where the requests between two scrapes spent their time, means per request from the
// server's histograms (queue wait, time to first token, end to end) and its step counter;
// every field NaN when no request finished in between.
LatencyBreakdown latency_breakdown(const std::string& before, const std::string& after);

// "VmHWM: 1234 kB" from a /proc/PID/status text, in bytes; -1 when absent.
int64_t parse_vm_hwm(const std::string& status_text);

}  // namespace shrike::optimize
