// What a request asks its output to match, as the API gives it (vLLM's guided_choice /
// guided_regex / guided_json, OpenAI's response_format), and its compilation to an automaton.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "constrain/automaton.h"

namespace shrike::constrain {

// The answer of a task model (task_answer.h): the labels and slot names of its task.
struct TaskAnswerSpec {
  std::vector<std::string> intents, slots;
};

struct ConstraintSpec {
  enum class Kind { Choice, Regex, JsonSchema, JsonObject, TaskAnswer };
  Kind kind = Kind::Regex;
  std::vector<std::string> choices;  // Choice
  std::string regex;                 // Regex
  nlohmann::ordered_json schema;     // JsonSchema (properties in the order written)
  TaskAnswerSpec task = {};          // TaskAnswer
};

// Limits on a choice list: more or longer would only be a way to make the server work hard.
inline constexpr size_t kMaxChoices = 10000;
inline constexpr size_t kMaxChoiceBytes = 1 << 20;  // all choices together

// Exactly one of the strings (an empty string is a valid choice).
Automaton choices_automaton(const std::vector<std::string>& choices);

// The TaskAnswer spec of a task's labels and slot names.
ConstraintSpec task_answer_spec(std::vector<std::string> intents, std::vector<std::string> slots);

// Throws ConstraintError naming what is wrong or unsupported.
Automaton compile(const ConstraintSpec& spec);

// "guided_choice", "guided_regex", "response_format json_schema", ...: for messages.
const char* kind_name(ConstraintSpec::Kind k);

}  // namespace shrike::constrain
