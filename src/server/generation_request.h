// A parsed OpenAI request turned into the engine's request: the prompt's tokens (chat rendered,
// special-token text recognised), the token budget, the sampling seed and the deadline. Pure, so
// it is tested without a server or a model.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <variant>

#include "constrain/constraint.h"
#include "constrain/spec.h"
#include "engine/engine.h"
#include "server/chat_format.h"
#include "server/openai_protocol.h"
#include "tokenizer/tokenizer.h"

namespace shrike::server {

// What the translation needs from the server and the engine at the time of the request.
struct RequestContext {
  const tokenizer::Tokenizer& tok;
  ChatFormat chat_format = ChatFormat::Plain;
  bool add_bos = true;                          // the model's own preference
  int64_t context_length = 0;                   // prompt + output must fit
  std::string model_name;                       // a request naming another model is refused (404)
  double default_timeout_s = 0;                 // when the request sets none; <= 0: no deadline
  uint64_t fresh_seed = 0;                      // the sampling seed when the request gives none
  std::chrono::steady_clock::time_point now{};  // deadlines count from here
  // Compiles a request's constraint for this model (the server's: a ConstraintCache over the
  // vocabulary it builds on first use). Empty: compiled here, with a vocabulary built from `tok`
  // for the request. Throws constrain::ConstraintError.
  std::function<std::shared_ptr<const constrain::Constraint>(const constrain::ConstraintSpec&)>
      compile_constraint = {};
};

// The engine request, or the OpenAI error to answer with: 404 for another model's name, 400 for
// token ids outside the vocabulary, an empty prompt or one that leaves no room in the context, and
// a constraint (guided_* / response_format) the compiler refuses, the message naming why.
// Moves the prompt, stop strings and sampling out of `p`.
std::variant<engine::GenerationRequest, ApiError> to_generation_request(ParsedRequest& p,
                                                                        const RequestContext& ctx);

// The error for a submission the engine refused (not Accepted): 429 for a full queue, 400 for an
// invalid request, and for a draining engine 503 while the server shuts down, 404 otherwise: an
// engine drains alone only when its model is being removed, and a request that looked the model
// up just before the removal gets what any request after it gets.
ApiError submit_refusal(const engine::SubmitResult& sub, bool server_draining,
                        const std::string& model_name);

}  // namespace shrike::server
