// The OpenAI wire format, without any I/O: a request body becomes a validated ParsedRequest or an
// ApiError (status, message, type, param, code); engine output becomes response and stream-chunk
// JSON. Every rule an HTTP client can break is checked here, so the rules are unit-tested alone.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "constrain/spec.h"
#include "decode/sampler.h"
#include "engine/metrics.h"

namespace shrike::server {

// What goes back to the client as {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null
};

std::string error_body(const ApiError& e);

// The errors the HTTP layer raises itself, by status, with the type and code the docs list.
ApiError bad_request(std::string message, std::string param = {}, std::string code = {});
ApiError unauthorized(std::string message);
ApiError not_found(std::string message, std::string code = "not_found");
ApiError model_not_found(const std::string& model);
ApiError method_not_allowed(std::string message);
ApiError payload_too_large(size_t limit_bytes);
ApiError queue_full(std::string message);
ApiError unavailable(std::string message);
ApiError server_error(std::string message);

enum class Endpoint { Completions, ChatCompletions };

struct ChatMessage {
  std::string role;  // system | user | assistant ("developer" is read as system)
  std::string content;
};

// Limits of the request grammar.
inline constexpr int kMaxJsonDepth = 64;  // nesting of [ and {: deeper bodies are refused unread
inline constexpr size_t kMaxStopStrings = 4;
inline constexpr int kMaxCompletionLogprobs = 5;  // completions: logprobs 0..5
inline constexpr int kMaxTopLogprobs = 20;        // chat: top_logprobs 0..20

struct ParsedRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::string model;  // empty when absent
  // Completions: the prompt as text, or as token ids when prompt_is_tokens.
  std::string prompt_text;
  std::vector<int32_t> prompt_tokens;
  bool prompt_is_tokens = false;
  // Chat: the conversation, at least one message.
  std::vector<ChatMessage> messages;
  std::optional<int64_t> max_tokens;  // absent: up to the context
  decode::SamplerParams sampling;     // seed meaningful only when seed_given
  bool seed_given = false;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;
  bool jump_forward = true;         // shrike's own: false steps through forced constraint tokens
  std::optional<double> timeout_s;  // extension: seconds until the request's deadline
  // What the output must match: OpenAI's response_format json_object / json_schema, or vLLM's
  // guided_choice / guided_regex / guided_json (at most one of them). Parsed, not compiled:
  // to_generation_request compiles it (and answers 400 for what the compiler refuses).
  std::optional<constrain::ConstraintSpec> constraint;
  std::string constraint_param;  // the parameter it came from, for error messages
};

// Parses and validates a request body for `endpoint`. Never throws: malformed JSON, nesting
// deeper than kMaxJsonDepth, wrong types, out-of-range values and unsupported options all come
// back as a 400 ApiError naming the parameter.
std::variant<ParsedRequest, ApiError> parse_request(std::string_view body, Endpoint endpoint);

// True when `body` nests [ or { deeper than max_depth (outside strings). Linear, no recursion:
// run before the recursive JSON parser so a body of 100000 '[' cannot exhaust the stack.
bool json_too_deep(std::string_view body, int max_depth);

// The number of tokens to generate given the prompt length and the request: max_tokens, or what
// is left of the context when absent. 400 (code context_length_exceeded) when the prompt alone
// fills the context, or prompt + max_tokens exceeds it; the message gives the numbers.
std::variant<int64_t, ApiError> resolve_max_tokens(int64_t prompt_tokens,
                                                   std::optional<int64_t> max_tokens,
                                                   int64_t context_length);

// OpenAI's finish_reason for an engine finish reason: "stop" or "length". A deadline reads as
// "length" (output cut short by a limit); `finish_detail` says which limit.
const char* openai_finish_reason(engine::FinishReason r);
// shrike's own name for it ("stop", "length", "deadline", "cancelled", "error").
const char* finish_detail(engine::FinishReason r);

// One generated token with its log probability, already turned into text by the caller.
struct LogprobEntry {
  std::string token;  // the token's text (may be part of a UTF-8 character)
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;  // most likely alternatives, best first
  int64_t text_offset = 0;  // completions: bytes of output text before this token
};

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_prompt_tokens = 0;
  // An extension, present when the server speculates: usage.speculative {proposed, accepted}.
  bool speculative = false;
  int64_t spec_proposed = 0, spec_accepted = 0;
};

// What every response and chunk of one request shares.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::Completions;
  std::string id;       // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
  bool logprobs = false;  // include a logprobs object (completions: also when logprobs = 0)
};

// The non-streaming response body.
nlohmann::json completion_response(const ResponseMeta& meta, const std::string& text,
                                   engine::FinishReason reason,
                                   const std::vector<LogprobEntry>& logprobs, const Usage& usage);

// One streamed chunk. `first` (chat) adds "role": "assistant" to the delta; `finish` sets
// finish_reason (otherwise null).
nlohmann::json stream_chunk(const ResponseMeta& meta, const std::string& text,
                            const std::vector<LogprobEntry>& logprobs, bool first,
                            std::optional<engine::FinishReason> finish);

// The last chunk when stream_options.include_usage: empty choices, usage set.
nlohmann::json usage_chunk(const ResponseMeta& meta, const Usage& usage);

// "data: <json>\n\n". Invalid UTF-8 (a token that is half a character) is replaced, not thrown.
std::string sse_event(const nlohmann::json& j);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// JSON text that never throws: invalid UTF-8 in strings becomes U+FFFD.
std::string dump_json(const nlohmann::json& j);

}  // namespace shrike::server
