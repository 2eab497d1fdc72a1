// A task model on `shrike serve`: the task attached to the model (server/model_hooks.h), so that
// requests without a constraint of their own answer in the task's schema (unless the server runs
// with --no-task-schema), a completion prompt in the task's format gets slot values restricted to
// its utterance, and POST /v1/intent (intent_route.h) answers with the task.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "server/http_server.h"
#include "server/model_hooks.h"
#include "task/task_definition.h"

namespace shrike::task {

class TaskAttachment : public server::ModelAttachment {
 public:
  TaskAttachment(TaskDefinition task, bool schema_by_default);

  const TaskDefinition& task() const { return task_; }
  bool schema_by_default() const { return schema_by_default_; }

  // Compiles the task's answer constraints over the model's vocabulary (0.2 s for the built-in
  // task: 9,131 DFA states with any values; the one with holes for the utterance's values is
  // much smaller).
  void prepare(server::ServedModel& model) override;
  std::optional<constrain::ConstraintSpec> default_spec() const override;
  std::string default_spec_name() const override { return "task schema"; }
  std::shared_ptr<const constrain::Constraint> constraint_for_prompt(
      server::ServedModel& model, std::string_view prompt) override;

  // With the schema on: the task's answer for one utterance, slot values restricted to its
  // substrings (answer_constraint.h); the rest of the answer keeps the masks shared by every
  // request. Null with the schema off.
  std::shared_ptr<const constrain::Constraint> answer_constraint(server::ServedModel& model,
                                                                 std::string_view utterance);
  // The utterance of a completions prompt written in the task's format (instruction +
  // utterance + suffix, task_format.h), or none.
  std::optional<std::string> utterance_of(std::string_view prompt) const;

 private:
  TaskDefinition task_;
  bool schema_by_default_;
  std::optional<constrain::ConstraintSpec> spec_;
  std::shared_ptr<const constrain::Constraint> holes_;  // the answer with a hole per value
};

// The attachment for a model file's task (task_of_model), or null when it carries none.
std::shared_ptr<TaskAttachment> task_attachment_of(const std::string& model_path,
                                                   bool schema_by_default);

// Registers POST /v1/intent on the server.
void add_task_routes(server::HttpServer& server);

}  // namespace shrike::task
