// Incremental parsing of an OpenAI-compatible response body: server-sent events (`data: {...}`
// lines, ended by `data: [DONE]`) when streaming, one JSON object otherwise. Each event whose
// text (completions: choices[0].text, chat: choices[0].delta.content) is non-empty counts as one
// token arriving at the time its bytes arrived; `usage` overrides the counts when sent.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shrike::loadtest {

class ResponseParser {
 public:
  ResponseParser(bool chat, bool stream) : chat_(chat), stream_(stream) {}

  // Body bytes (already de-chunked) that arrived at time t (seconds, any clock).
  void feed(std::string_view data, double t);
  // End of body: parses a non-streamed body, flushes a last unterminated SSE line.
  void finish(double t);

  const std::vector<double>& token_times() const { return token_times_; }
  int64_t usage_prompt_tokens() const { return usage_prompt_; }          // -1: not sent
  int64_t usage_completion_tokens() const { return usage_completion_; }  // -1: not sent
  bool saw_done() const { return done_; }
  // Error reported inside the body ({"error": ...} or unparsable JSON); empty if none.
  const std::string& error() const { return error_; }
  // The raw body of a non-streamed or failed response (capped), for error messages.
  const std::string& body() const { return body_; }

 private:
  void line(std::string_view l, double t);
  void event(std::string_view json, double t);

  bool chat_, stream_;
  std::string pending_, body_, error_;
  std::vector<double> token_times_;
  int64_t usage_prompt_ = -1, usage_completion_ = -1;
  bool done_ = false;
};

}  // namespace shrike::loadtest
