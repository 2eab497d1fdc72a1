// The answer of an intent/slot task model (task/task_format.h: {"intent":...,"slots":{...}},
// compact) as a byte automaton: what a task model's answers are constrained to by default
// (`shrike serve`, `shrike eval --task-schema on`).
//
// It is not a JSON schema on purpose. It accepts what the free-form reader
// (task::parse_task_answer) reads, restricted to the task's names: the intent one of the labels,
// then up to max_pairs "name":"value" pairs, each name one of the slot names, in any order, a
// name allowed to repeat (the reader keeps the last value), each value a JSON string of at most
// max_value_chars code points. A schema would fix one order and forbid repeats, and a model that
// writes its slots in another order, or repeats one, would be pushed to another (wrong) name.
// Here a free-form answer that is compact, names a label and known slot names only, and keeps
// within the two bounds is accepted token by token, so greedy decoding under the constraint
// picks exactly the free-form tokens: the constrained answer is the free-form one and differs
// only where the free-form answer was malformed, used a name outside the task or ran past a
// bound.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "constrain/automaton.h"
#include "constrain/spec.h"
#include "task/task_definition.h"

namespace shrike::task {

// Slot values longer than this are refused: a model stuck repeating itself inside a value
// ("5-5-5-5...") must still close the answer within its token budget. The built-in data's
// longest value is 27 characters.
inline constexpr int kTaskValueMaxChars = 64;
// At most this many slots per answer, for the same reason: a model repeating one slot forever
// must still close the answer (seen: a 2-epoch teacher looping through product/quantity pairs
// past 96 tokens, and with 8 allowed the demo's small teacher looping inside 64-character
// addresses: 2-4 of 800 answers cut). Built-in answers hold at most 2, free-form answers of the
// teachers measured at most 5 (one, degenerate); each allowed slot is one more copy of a
// value's states in the automaton.
inline constexpr int kTaskMaxSlotPairs = 4;

// What a slot value may be: any JSON string of at most max_value_chars code points, or a hole
// (one kHoleByte between the quotes, constraint.h) that each request fills with the values of
// its own utterance (task_values_automaton) through Constraint::with_holes_filled.
enum class TaskValues { AnyString, Hole };

// Throws ConstraintError when there is no intent, a name is empty or not valid UTF-8, or a bound
// is below 1.
constrain::Automaton task_answer_automaton(const std::vector<std::string>& intents,
                                           const std::vector<std::string>& slots,
                                           int max_value_chars = kTaskValueMaxChars,
                                           int max_pairs = kTaskMaxSlotPairs,
                                           TaskValues values = TaskValues::AnyString);

// The task's answer as a constraint spec (an automaton spec keyed by the labels and slot names):
// what a task model's requests follow by default.
constrain::ConstraintSpec task_answer_spec(const TaskDefinition& task);

// The slot values an utterance allows: its non-empty substrings, cut at character boundaries,
// as JSON string content (each character as task::task_answer writes it: raw UTF-8, with '"',
// '\\' and control characters escaped; invalid UTF-8 as U+FFFD). The gold values of the built-in
// data are always such substrings. About 2 DFA states per byte of the text (the substring
// automaton of a string is linear in its length). Throws ConstraintError for an empty text.
constrain::Automaton task_values_automaton(std::string_view utterance);

}  // namespace shrike::task
