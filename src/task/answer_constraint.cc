#include "task/answer_constraint.h"

#include <nlohmann/json.hpp>

#include "constrain/constraint.h"
#include "constrain/error.h"
#include "constrain/json_schema.h"

namespace shrike::task {

using constrain::Automaton;
using constrain::ConstraintError;
using constrain::Frag;
using constrain::json_string_char;
using constrain::kHoleByte;
using constrain::Nfa;
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
                                int max_pairs, TaskValues values) {
  if (intents.empty()) throw ConstraintError("task answer: no intent labels");
  if (max_value_chars < 1 || max_pairs < 1)
    throw ConstraintError("task answer: max_value_chars and max_pairs must be >= 1");
  Nfa nfa;
  Frag f = nfa.concat(nfa.literal("{\"intent\":"), one_of(nfa, intents, "intent label"));
  f = nfa.concat(f, nfa.literal(",\"slots\":{"));
  if (!slots.empty()) {
    auto pair = [&] {  // "name":"value"
      Frag value = nfa.literal(std::string(1, char(kHoleByte)));
      if (values == TaskValues::AnyString)
        value = nfa.up_to(max_value_chars, [&] { return json_string_char(nfa); });
      const Frag p = nfa.concat(one_of(nfa, slots, "slot name"), nfa.literal(":\""));
      return nfa.concat(nfa.concat(p, value), nfa.literal("\""));
    };
    // pair (, pair){0, max - 1}: each position its own copy, so the count is bounded.
    const Frag tail =
        nfa.up_to(max_pairs - 1, [&] { return nfa.concat(nfa.literal(","), pair()); });
    f = nfa.concat(f, nfa.optional(nfa.concat(pair(), tail)));
  }
  f = nfa.concat(f, nfa.literal("}}"));
  return Automaton::determinize(nfa, f);
}

Automaton task_values_automaton(std::string_view utterance) {
  if (utterance.empty()) throw ConstraintError("task values: an empty utterance");
  // The text as JSON string content, then cut into characters (an escape is one character).
  const std::string dumped = nlohmann::json(std::string(utterance))
                                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const std::string_view e = std::string_view(dumped).substr(1, dumped.size() - 2);
  std::vector<std::string_view> chars;
  for (size_t i = 0; i < e.size();) {
    size_t len = 1;
    const auto c = uint8_t(e[i]);
    if (c == '\\')
      len = e[i + 1] == 'u' ? 6 : 2;
    else if (c >= 0xF0)
      len = 4;
    else if (c >= 0xE0)
      len = 3;
    else if (c >= 0xC0)
      len = 2;
    chars.push_back(e.substr(i, len));
    i += len;
  }
  // Start --eps--> before[k] --char k--> after[k] (accepting) --eps--> before[k + 1]: every
  // non-empty run of whole characters.
  Nfa nfa;
  const int32_t start = nfa.add_state(), accept = nfa.add_state();
  int32_t prev_after = -1;
  for (const std::string_view ch : chars) {
    const Frag f = nfa.literal(ch);
    nfa.add_eps(start, f.in);
    if (prev_after >= 0) nfa.add_eps(prev_after, f.in);
    nfa.add_eps(f.out, accept);
    prev_after = f.out;
  }
  return Automaton::determinize(nfa, {start, accept});
}

constrain::ConstraintSpec task_answer_spec(const TaskDefinition& task) {
  // The key names the labels, then the slot names (each cache is per model, but the key must
  // still say which answer this automaton is).
  std::string key = "task:";
  for (const auto& c : task.intents) key += std::to_string(c.size()) + ":" + c;
  key += ";";
  for (const auto& c : task.slots) key += std::to_string(c.size()) + ":" + c;
  return constrain::automaton_spec(std::move(key), task_answer_automaton(task.intents, task.slots));
}

}  // namespace shrike::task
