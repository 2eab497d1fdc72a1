#include "task/task_definition.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/file_buffer.h"
#include "task/task_format.h"

namespace shrike::task {

TaskDefinition task_definition_from(const std::vector<data::Example>& examples) {
  std::set<std::string> intents, slots;
  for (const data::Example& e : examples) {
    intents.insert(e.intent);
    for (const auto& [name, value] : e.slots) slots.insert(name);
  }
  TaskDefinition t;
  t.instruction = std::string(kTaskInstruction);
  t.intents.assign(intents.begin(), intents.end());
  t.slots.assign(slots.begin(), slots.end());
  return t;
}

void add_task_to_gguf(const TaskDefinition& task, gguf::GgufWriter& w) {
  w.set_string("shrike.task.format", task.format);
  w.set_string("shrike.task.instruction", task.instruction);
  w.set_string("shrike.task.prompt_suffix", task.prompt_suffix);
  w.set_string_array("shrike.task.intents", task.intents);
  w.set_string_array("shrike.task.slots", task.slots);
}

std::function<void(gguf::GgufWriter&)> task_metadata(const std::optional<TaskDefinition>& task) {
  if (!task) return {};
  return [t = *task](gguf::GgufWriter& w) { add_task_to_gguf(t, w); };
}

PromptFormat prompt_format_of(const std::optional<TaskDefinition>& task) {
  return task ? task->prompt_format() : PromptFormat{};
}

std::optional<TaskDefinition> task_of_model(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return std::nullopt;
  return task_from_gguf(gguf::GgufFile::open(path));
}

std::optional<TaskDefinition> task_from_gguf(const gguf::GgufFile& f) {
  if (!f.has("shrike.task.format")) return std::nullopt;
  TaskDefinition t;
  t.format = f.get_string("shrike.task.format");
  if (t.format != kTaskFormatV1)
    throw FileError(f.path() + ": unknown task format '" + t.format + "' (this build knows '" +
                    kTaskFormatV1 + "')");
  t.instruction = f.get_string("shrike.task.instruction");
  t.prompt_suffix = f.get_string_or("shrike.task.prompt_suffix", "\n");
  // The suffix is where the answer starts: empty, the model could not tell the utterance ended.
  if (t.prompt_suffix.empty())
    throw FileError(f.path() + ": shrike.task.prompt_suffix is empty (the prompt needs an end)");
  t.intents = f.get_string_array("shrike.task.intents");
  t.slots = f.has("shrike.task.slots") ? f.get_string_array("shrike.task.slots")
                                       : std::vector<std::string>{};
  if (t.intents.empty()) throw FileError(f.path() + ": shrike.task.intents is empty");
  std::sort(t.intents.begin(), t.intents.end());
  std::sort(t.slots.begin(), t.slots.end());
  return t;
}

}  // namespace shrike::task
