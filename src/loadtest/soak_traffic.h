// The soak's traffic: what each request is (a plain completion or chat, streamed or not, a client
// that leaves mid-stream, a deadline, a prompt at the context limit, a burst request, or one of
// several malformed requests), how it is written, and how its answer is judged against the
// documented behaviour (docs/serving.md). Pure functions: the soak's threads only send.
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace shrike::loadtest {

enum class SoakKind {
  kCompletion,        // /v1/completions, not streamed
  kCompletionStream,  // /v1/completions, streamed
  kChat,              // /v1/chat/completions, not streamed
  kChatStream,        // /v1/chat/completions, streamed
  kDisconnect,        // streamed, long answer; the client hangs up after the first token
  kDeadline,          // streamed or not, with a short `timeout` and a long answer
  kLongPrompt,        // token-id prompt of (context - max_tokens) tokens: exactly at the limit
  kBurst,             // short completion sent in a burst above the server's capacity
  kBadJson,           // body that is not JSON
  kWrongType,         // a parameter of the wrong type
  kOversize,          // body over the server's --max-body-mb
  kOverContext,       // token-id prompt of `context` tokens: over the limit
  kBadTokenId,        // token id outside the vocabulary
  kUnknownRoute,      // POST to a path that does not exist
  kWrongMethod,       // GET on /v1/completions
  kCount
};
const char* soak_kind_name(SoakKind k);
bool is_malformed(SoakKind k);

// How one request ended, as the client saw it.
enum class SoakOutcome {
  kCompleted,     // 200, finish_reason stop or length, no finish_detail
  kDeadline,      // 200, finish_detail "deadline" (its own `timeout` passed)
  kCancelled,     // we hung up mid-stream on purpose, after a 200
  kRefused429,    // 429 queue_full (documented under load)
  kRefused503,    // 503 (documented while loading or draining)
  kRejected4xx,   // a malformed request answered with its documented 4xx
  kServerError,   // any 5xx other than 503
  kUndocumented,  // anything else: wrong status, no finish_reason, stream without [DONE], ...
  kTransport,     // no answer: connection refused or reset, our client timeout
  kCount
};
const char* soak_outcome_name(SoakOutcome o);

// What the soak knows about the server it talks to.
struct SoakServerShape {
  int64_t context = 0;         // max_model_len
  int64_t vocab = 0;           // serving_options.vocab_size; 0: unknown (no token-id prompts)
  int64_t max_body_bytes = 0;  // oversize bodies are this + 64 KiB
  std::string model;           // the served id ("" leaves `model` out)
};

struct SoakRequest {
  SoakKind kind;
  std::string method = "POST";
  std::string path;  // e.g. "/v1/completions"
  std::string body;
  bool stream = false;
  bool hang_up_after_first_token = false;
  // The documented 4xx status a malformed request must get (0 for the others).
  long expected_status = 0;
};

// The request of a kind; rng draws its lengths, sampling and text.
SoakRequest make_soak_request(SoakKind kind, const SoakServerShape& shape, std::mt19937_64& rng);

// Judges one exchange. body is what arrived (for a stream, the SSE text up to the hang-up).
SoakOutcome judge_soak_reply(const SoakRequest& req, long status, const std::string& body,
                             bool hung_up, bool transport_error, std::string* why);

// True once an SSE body holds a chunk whose choice carries text (the point to hang up).
bool sse_has_token(const std::string& body);

}  // namespace shrike::loadtest
