// A request as submitted (GenerationRequest) and what comes back (StreamEvent, through the
// RequestStream the submitter reads while the engine thread writes).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "decode/sampler.h"
#include "engine/metrics.h"
#include "engine/scheduler.h"

namespace shrike::constrain {
class Constraint;
}

namespace shrike::engine {

struct GenerationRequest {
  std::vector<int32_t> prompt;  // token ids (1 .. context_length - 1 of them)
  decode::SamplerParams sampling;
  int64_t max_tokens = 16;        // >= 1; capped so that prompt + output fit the context
  std::vector<std::string> stop;  // stop strings: output ends before the first match
  bool ignore_eos = false;
  // When it passes, the request ends with FinishReason::Deadline (waiting or running): the
  // stream gets what was generated so far and the blocks are freed within one step.
  std::optional<Clock::time_point> deadline;
  std::shared_ptr<const constrain::Constraint> constraint;  // output must match it (src/constrain)
  // Forced runs of a constraint are appended without sampling and computed as one prefill chunk
  // (the output is the same either way; off only to compare model calls).
  bool jump_forward = true;
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<decode::TopLogprob> top;  // the sampler's top_logprobs alternatives
};

// A piece of a request's output. Events arrive in order; the last one has `finished` set.
struct StreamEvent {
  std::string text;                    // new text: whole UTF-8 characters, stop strings removed
  std::vector<int32_t> tokens;         // tokens this event covers
  std::vector<TokenLogprob> logprobs;  // one per token when logprobs were requested
  bool finished = false;
  FinishReason finish_reason = FinishReason::Stop;  // meaningful when finished
  std::string error;                                // FinishReason::Error: why
  // Usage, filled on the last event.
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_prompt_tokens = 0;
  int64_t model_steps = 0;  // forward passes that computed some of this request's tokens
  // Speculative decoding (when the engine speculates): draft tokens proposed for this request
  // and accepted by the target.
  bool speculative = false;
  int64_t spec_proposed = 0, spec_accepted = 0;
};

// One request's output channel, shared by the engine (producer) and the submitter (consumer).
class RequestStream {
 public:
  // Waits up to `timeout` for the next event; false on timeout. After the finished event has been
  // returned, returns false at once. A zero timeout never blocks (an event loop's poll).
  bool next(StreamEvent& out, std::chrono::milliseconds timeout);
  // Called (on the engine's thread, outside the stream's lock) after each event is pushed, so an
  // event loop can read many streams without a thread waiting on each. It is also called once
  // at once when events are already waiting; nullptr removes it. Must not block.
  void set_listener(std::function<void()> listener);
  // Asks the engine to stop this request (client gone). Its blocks are freed within one step and
  // a final event with FinishReason::Cancelled is pushed.
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

  // Engine side.
  void push(StreamEvent ev);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  std::shared_ptr<const std::function<void()>> listener_;
  bool done_ = false;  // the finished event was pushed
  bool consumed_done_ = false;
  std::atomic<bool> cancelled_{false};
};

}  // namespace shrike::engine
