// The intent/slot task a model was trained for, carried in its GGUF so that whoever serves the
// model knows the prompt format, the label set and the slot names without the training data:
//   shrike.task.format      "intent_slots_v1" (task_format.h's prompt and answer)
//   shrike.task.instruction the prompt before the utterance (kTaskInstruction)
//   shrike.task.prompt_suffix the prompt after it ("\n" when absent)
//   shrike.task.intents     the label set, sorted
//   shrike.task.slots       the slot names, sorted (std::map order, as answers list them)
// `shrike train` writes it; distill, prune and quantize copy it; `shrike serve` constrains
// answers to the task's labels and slot names by default (task/answer_constraint.h says how)
// and offers POST /v1/intent.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "data/example.h"
#include "gguf/gguf.h"
#include "task/task_format.h"

namespace shrike::task {

inline constexpr const char* kTaskFormatV1 = "intent_slots_v1";

struct TaskDefinition {
  std::string format = kTaskFormatV1;
  std::string instruction;           // the prompt before the utterance
  std::string prompt_suffix = "\n";  // and after it (shrike.task.prompt_suffix)
  std::vector<std::string> intents;  // sorted, distinct
  std::vector<std::string> slots;    // sorted, distinct
  bool operator==(const TaskDefinition&) const = default;
  PromptFormat prompt_format() const { return {instruction, prompt_suffix}; }
};

// The prompt format of a model file's task, or the default when it carries none.
PromptFormat prompt_format_of(const std::optional<TaskDefinition>& task);

// The labels and slot names of the examples, with this build's instruction.
TaskDefinition task_definition_from(const std::vector<data::Example>& examples);

void add_task_to_gguf(const TaskDefinition& task, gguf::GgufWriter& w);
// What train::save_model (and the other writers of a model file) take to carry the task on:
// add_task_to_gguf when there is a task, nothing otherwise.
std::function<void(gguf::GgufWriter&)> task_metadata(const std::optional<TaskDefinition>& task);
// The model's task, or none when the file has no shrike.task.format. Throws FileError for a
// format this build does not know, an empty label set, or keys of the wrong type.
std::optional<TaskDefinition> task_from_gguf(const gguf::GgufFile& f);
// The task of a model file: a GGUF's (task_from_gguf), none for a Hugging Face folder (which has
// no place for one: `shrike task set` attaches one to the converted GGUF).
std::optional<TaskDefinition> task_of_model(const std::string& path);

}  // namespace shrike::task
