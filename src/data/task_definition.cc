#include "data/task_definition.h"

#include <algorithm>
#include <set>

#include "core/file_buffer.h"
#include "data/task_format.h"

namespace shrike::data {

TaskDefinition task_definition_from(const std::vector<Example>& examples) {
  std::set<std::string> intents, slots;
  for (const Example& e : examples) {
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
  w.set_string_array("shrike.task.intents", task.intents);
  w.set_string_array("shrike.task.slots", task.slots);
}

std::optional<TaskDefinition> task_from_gguf(const gguf::GgufFile& f) {
  if (!f.has("shrike.task.format")) return std::nullopt;
  TaskDefinition t;
  t.format = f.get_string("shrike.task.format");
  if (t.format != kTaskFormatV1)
    throw FileError(f.path() + ": unknown task format '" + t.format + "' (this build knows '" +
                    kTaskFormatV1 + "')");
  t.instruction = f.get_string("shrike.task.instruction");
  t.intents = f.get_string_array("shrike.task.intents");
  t.slots = f.has("shrike.task.slots") ? f.get_string_array("shrike.task.slots")
                                       : std::vector<std::string>{};
  if (t.intents.empty()) throw FileError(f.path() + ": shrike.task.intents is empty");
  std::sort(t.intents.begin(), t.intents.end());
  std::sort(t.slots.begin(), t.slots.end());
  return t;
}

}  // namespace shrike::data
