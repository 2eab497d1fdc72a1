// The intent/slot task as text: what the model reads (a fixed short instruction + the utterance)
// and what it must generate (one compact JSON object). Training, distillation and eval all go
// through these functions, so the format is defined once.
//
//   prompt: intent+slots: where is order SO123\n
//   answer: {"intent":"order_status","slots":{"order_id":"SO123"}}
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "data/example.h"

namespace shrike::task {

// The instruction in front of every utterance. Short on purpose: every training example pays for
// its tokens.
inline constexpr std::string_view kTaskInstruction = "intent+slots: ";

// How a task's prompt wraps the utterance: prefix + the utterance (line breaks as spaces) +
// suffix. The default is the format shrike trains (kTaskInstruction, "\n"); a model tuned
// elsewhere on its own prompt carries its own in its task (`shrike task set --prompt`).
struct PromptFormat {
  std::string prefix = std::string(kTaskInstruction);
  std::string suffix = "\n";
  std::string text(std::string_view utterance) const;
  bool operator==(const PromptFormat&) const = default;
};

// kTaskInstruction + text + "\n" (PromptFormat{}.text(text)). The final newline separates the
// utterance from the answer, so line breaks inside the text become spaces: the separator is then
// the prompt's only newline. The trainer tokenizes prompt (with BOS) and answer (with EOS)
// separately and concatenates them.
std::string task_prompt(std::string_view text);
// The utterance as task_prompt() shows it to the model (line breaks as spaces): what slot values
// can be copied from.
std::string task_utterance(std::string_view text);

// {"intent":...,"slots":{...}} with no spaces, UTF-8 written raw (only '"', '\\' and control
// characters are escaped; invalid UTF-8 becomes U+FFFD). Slots come in the order their values
// first appear in the utterance (exactly, else ignoring ASCII case); values at the same place or
// not in the text follow, by name. The model then reads the utterance left to right, span after
// span, instead of deciding up front which names the answer will have.
std::string task_answer(const data::Example& example);

struct TaskPrediction {
  bool parsed = false;  // a complete JSON object with a string "intent" was found
  std::string intent;   // also recovered, when possible, from output that did not parse
  std::map<std::string, std::string> slots;
};

// Reads a model's output tolerantly: text before the first '{' and anything after the object that
// it opens are ignored. parsed is true when that object is valid JSON with a string "intent" and
// "slots" absent, null or an object. Slot values that are strings are kept; numbers and booleans
// are kept as their JSON text (5 -> "5", true -> "true"); null, arrays and objects are dropped.
// When the object is malformed or truncated (output cut at the token limit), parsed is false and
// intent holds the value of a complete "intent": "..." pair found in the text, if any; slots stay
// empty.
TaskPrediction parse_task_answer(std::string_view generated);

}  // namespace shrike::task
