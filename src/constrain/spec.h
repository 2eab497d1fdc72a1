// What a request asks its output to match, as the API gives it (vLLM's guided_choice /
// guided_regex / guided_json, OpenAI's response_format), and its compilation to an automaton.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "constrain/automaton.h"

namespace shrike::constrain {

struct ConstraintSpec {
  enum class Kind { Choice, Regex, JsonSchema, JsonObject, Automaton };
  Kind kind = Kind::Regex;
  std::vector<std::string> choices;  // Choice
  std::string regex;                 // Regex
  nlohmann::ordered_json schema;     // JsonSchema (properties in the order written)
  // Automaton: one built by a layer above (a task's answer, task/answer_constraint.h), cached
  // under automaton_key, which must name it uniquely.
  std::shared_ptr<const Automaton> automaton = {};
  std::string automaton_key = {};
};

// Limits on a choice list: more or longer would only be a way to make the server work hard.
inline constexpr size_t kMaxChoices = 10000;
inline constexpr size_t kMaxChoiceBytes = 1 << 20;  // all choices together

// Exactly one of the strings (an empty string is a valid choice).
Automaton choices_automaton(const std::vector<std::string>& choices);

// The Automaton spec of a prebuilt automaton, cached under key.
ConstraintSpec automaton_spec(std::string key, Automaton automaton);

// Throws ConstraintError naming what is wrong or unsupported.
Automaton compile(const ConstraintSpec& spec);

// "guided_choice", "guided_regex", "response_format json_schema", ...: for messages.
const char* kind_name(ConstraintSpec::Kind k);

}  // namespace shrike::constrain
