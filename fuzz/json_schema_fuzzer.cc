// The JSON-schema compiler of constrained decoding (response_format json_schema, guided_json):
// any JSON document as a schema; ConstraintError is its documented refusal.
#include <cstdint>
#include <nlohmann/json.hpp>

#include "constrain/error.h"
#include "constrain/json_schema.h"
#include "fuzz_input.h"
#include "server/openai_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shrike;
  // The server checks the nesting limit before its (recursive) JSON parser runs; so does this.
  const std::string_view text = fuzz::as_text(data, size);
  if (server::json_too_deep(text, server::kMaxJsonDepth)) return 0;
  nlohmann::ordered_json schema =
      nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  try {
    (void)constrain::json_schema_automaton(schema);
  } catch (const constrain::ConstraintError&) {
  }
  return 0;
}
