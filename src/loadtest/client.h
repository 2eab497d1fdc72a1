// The load generator: one thread, libcurl's multi interface (event-driven, many transfers over
// keep-alive connections), so a few thousand requests/s and hundreds of open streams cost one
// core at most. Timestamps come from the steady clock in the body callback, i.e. when the bytes
// reached this process.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "loadtest/arrivals.h"
#include "loadtest/prompts.h"

namespace shrike::loadtest {

enum class Outcome { kCompleted, kFailed, kTimedOut };
const char* outcome_name(Outcome o);

// Everything measured about one request. Times are seconds; *_s fields are relative to the start
// of the run, durations are NaN where not applicable (e.g. TTFT of a failed request).
struct RequestRecord {
  int64_t id = 0;
  double scheduled_s = 0, sent_s = 0;  // intended and actual send time
  double ttft = NAN, tpot = NAN, e2e = NAN;
  // From hand-over to curl until the request could be written (connection set-up, queueing in
  // the client): part of TTFT, shown separately so a client bottleneck is visible.
  double setup = NAN;
  std::vector<double> itl;     // every gap between consecutive token events
  int64_t prompt_tokens = -1;  // usage.prompt_tokens, else -1 (unknown)
  int64_t planned_prompt_tokens = 0, planned_output_tokens = 0;
  int64_t output_tokens = 0;  // usage.completion_tokens, else token events counted
  bool usage_from_server = false;
  long http_status = 0;
  Outcome outcome = Outcome::kFailed;
  std::string error;
};

struct RunConfig {
  std::string url;  // full endpoint URL (see endpoint_url)
  bool chat = false, stream = true;
  // POST /v1/intent (a task model's route): the body is {"text": prompt}, the answer one JSON
  // object (not streamed) whose usage counts the tokens.
  bool intent = false;
  std::string model = "default";
  double timeout_s = 600;
  int64_t max_requests = 0;  // 0: unbounded
  double duration_s = 0;     // 0: unbounded; no request is sent after this, in-flight ones finish
  uint64_t seed = 0;
  std::vector<PromptEntry> prompts;  // empty: synthesised prompts
  // true: every request asks for exactly max_tokens (ignore_eos; servers would otherwise stop at
  // EOS); false: answers end at EOS, their natural length, as a task service sees them.
  bool ignore_eos = true;
  bool progress = false;                    // live progress line on stderr
  const std::atomic<bool>* stop = nullptr;  // set (e.g. by SIGINT) to stop sending
};

struct RunResult {
  std::vector<RequestRecord> records;  // in send order
  double wall_s = 0;
  int max_in_flight = 0;
  int concurrency = 0;       // closed loop: N; else 0
  double intended_rate = 0;  // open loop: requests/s offered; else 0
};

// Runs until the schedule is spent, max_requests are sent or duration passes, then waits for
// every in-flight request (each bounded by timeout_s). Every sent request gets a record.
RunResult run_load(const RunConfig& config, Schedule& schedule);

// The JSON body of one request.
std::string request_body(const RunConfig& config, const std::string& prompt, int64_t max_tokens);

}  // namespace shrike::loadtest
