#include "constrain/spec.h"

#include "constrain/error.h"
#include "constrain/json_schema.h"
#include "constrain/regex.h"

namespace shrike::constrain {

Automaton choices_automaton(const std::vector<std::string>& choices) {
  if (choices.empty()) throw ConstraintError("choice list is empty");
  if (choices.size() > kMaxChoices)
    throw ConstraintError("choice list has " + std::to_string(choices.size()) +
                          " entries; at most " + std::to_string(kMaxChoices) + " are allowed");
  size_t total = 0;
  for (const auto& c : choices) total += c.size();
  if (total > kMaxChoiceBytes)
    throw ConstraintError("choice list holds " + std::to_string(total) + " bytes; at most " +
                          std::to_string(kMaxChoiceBytes) + " are allowed");
  Nfa nfa;
  std::vector<Frag> alts;
  for (const auto& c : choices) alts.push_back(nfa.literal(c));
  return Automaton::determinize(nfa, nfa.alt(alts));
}

ConstraintSpec automaton_spec(std::string key, Automaton automaton) {
  ConstraintSpec spec{ConstraintSpec::Kind::Automaton, {}, {}, {}};
  spec.automaton = std::make_shared<const Automaton>(std::move(automaton));
  spec.automaton_key = std::move(key);
  return spec;
}

Automaton compile(const ConstraintSpec& spec) {
  switch (spec.kind) {
    case ConstraintSpec::Kind::Choice:
      return choices_automaton(spec.choices);
    case ConstraintSpec::Kind::Regex:
      return regex_automaton(spec.regex);
    case ConstraintSpec::Kind::JsonSchema:
      return json_schema_automaton(spec.schema);
    case ConstraintSpec::Kind::JsonObject:
      return json_object_automaton();
    case ConstraintSpec::Kind::Automaton:
      if (!spec.automaton) throw ConstraintError("no automaton in an automaton constraint");
      return *spec.automaton;
  }
  throw ConstraintError("unknown constraint kind");
}

const char* kind_name(ConstraintSpec::Kind k) {
  switch (k) {
    case ConstraintSpec::Kind::Choice:
      return "choice";
    case ConstraintSpec::Kind::Regex:
      return "regex";
    case ConstraintSpec::Kind::JsonSchema:
      return "JSON schema";
    case ConstraintSpec::Kind::JsonObject:
      return "JSON object";
    case ConstraintSpec::Kind::Automaton:
      return "automaton";
  }
  return "?";
}

}  // namespace shrike::constrain
