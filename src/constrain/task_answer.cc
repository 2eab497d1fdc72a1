#include "constrain/task_answer.h"

#include <nlohmann/json.hpp>

#include "constrain/error.h"
#include "constrain/json_schema.h"

namespace shrike::constrain {
namespace {

// "name" as JSON writes it (quotes included), after checking it can be written.
std::string quoted(const std::string& name, const char* what) {
  if (name.empty()) throw ConstraintError(std::string("task answer: an empty ") + what);
  try {
    return nlohmann::json(name).dump();
  } catch (const nlohmann::json::exception&) {
    throw ConstraintError(std::string("task answer: ") + what + " '" + name +
                          "' is not valid UTF-8");
  }
}

Frag one_of(Nfa& nfa, const std::vector<std::string>& names, const char* what) {
  std::vector<Frag> alts;
  for (const std::string& n : names) alts.push_back(nfa.literal(quoted(n, what)));
  return nfa.alt(alts);
}

}  // namespace

Automaton task_answer_automaton(const std::vector<std::string>& intents,
                                const std::vector<std::string>& slots, int max_value_chars,
                                int max_pairs) {
  if (intents.empty()) throw ConstraintError("task answer: no intent labels");
  if (max_value_chars < 1 || max_pairs < 1)
    throw ConstraintError("task answer: max_value_chars and max_pairs must be >= 1");
  Nfa nfa;
  Frag f = nfa.concat(nfa.literal("{\"intent\":"), one_of(nfa, intents, "intent label"));
  f = nfa.concat(f, nfa.literal(",\"slots\":{"));
  if (!slots.empty()) {
    auto pair = [&] {  // "name":"value"
      Frag value = nfa.optional(json_string_char(nfa));
      for (int i = 1; i < max_value_chars; ++i)
        value = nfa.optional(nfa.concat(json_string_char(nfa), value));
      const Frag p = nfa.concat(one_of(nfa, slots, "slot name"), nfa.literal(":\""));
      return nfa.concat(nfa.concat(p, value), nfa.literal("\""));
    };
    // pair (, pair){0, max - 1}: each position its own copy, so the count is bounded.
    Frag tail = nfa.empty();
    for (int i = 1; i < max_pairs; ++i)
      tail = nfa.optional(nfa.concat(nfa.concat(nfa.literal(","), pair()), tail));
    f = nfa.concat(f, nfa.optional(nfa.concat(pair(), tail)));
  }
  f = nfa.concat(f, nfa.literal("}}"));
  return Automaton::determinize(nfa, f);
}

}  // namespace shrike::constrain
