// The regex compiler of constrained decoding (guided_regex, a schema's "pattern"): full-match
// DFAs, plain and inside a JSON string; ConstraintError is its documented refusal.
#include <cstdint>

#include "constrain/automaton.h"
#include "constrain/error.h"
#include "constrain/nfa.h"
#include "constrain/regex.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shrike;
  const std::string_view pattern = fuzz::as_text(data, size);
  try {
    (void)constrain::regex_automaton(pattern);
  } catch (const constrain::ConstraintError&) {
  }
  try {
    constrain::Nfa nfa;
    constrain::RegexOptions options;
    options.json_string = true;
    (void)constrain::compile_regex(nfa, pattern, options);
  } catch (const constrain::ConstraintError&) {
  }
  return 0;
}
