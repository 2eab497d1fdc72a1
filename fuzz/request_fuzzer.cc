// Request bodies of POST /v1/completions and /v1/chat/completions: the nesting check and the
// parser/validator, which never throws (every problem is a 400 ApiError), and the token budget.
#include <cstdint>
#include <variant>

#include "fuzz_input.h"
#include "server/openai_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shrike::server;
  const std::string_view body = shrike::fuzz::as_text(data, size);
  (void)json_too_deep(body, kMaxJsonDepth);
  for (Endpoint e : {Endpoint::Completions, Endpoint::ChatCompletions}) {
    auto parsed = parse_request(body, e);
    if (auto* error = std::get_if<ApiError>(&parsed)) {
      (void)error_body(*error);
      continue;
    }
    const ParsedRequest& p = std::get<ParsedRequest>(parsed);
    const int64_t prompt = int64_t(p.prompt_text.size() + p.prompt_tokens.size());
    (void)resolve_max_tokens(prompt, p.max_tokens, 2048);
  }
  return 0;
}
