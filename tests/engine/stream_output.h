// What a request's stream delivered, collected until its finished event: shared by the engine's
// test binaries (plain, speculative and constrained decoding compare outputs the same way).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "engine/request.h"

namespace shrike::engine::test_util {

struct Output {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<TokenLogprob> logprobs;
  StreamEvent last;
};

// Reads events until the finished one; a request that has not finished within 120 s is a test
// failure (and what arrived so far is returned).
inline Output collect(RequestStream& s) {
  using namespace std::chrono_literals;
  Output o;
  StreamEvent ev;
  const auto give_up = Clock::now() + 120s;
  while (Clock::now() < give_up) {
    if (!s.next(ev, 100ms)) continue;
    o.tokens.insert(o.tokens.end(), ev.tokens.begin(), ev.tokens.end());
    o.logprobs.insert(o.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
    o.text += ev.text;
    if (ev.finished) {
      o.last = ev;
      return o;
    }
  }
  ADD_FAILURE() << "request did not finish within 120 s";
  return o;
}

}  // namespace shrike::engine::test_util
