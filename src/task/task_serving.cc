#include "task/task_serving.h"

#include "task/answer_constraint.h"
#include "task/intent_route.h"
#include "task/task_format.h"

namespace shrike::task {

TaskAttachment::TaskAttachment(TaskDefinition task, bool schema_by_default)
    : task_(std::move(task)), schema_by_default_(schema_by_default) {
  if (schema_by_default_) spec_ = task_answer_spec(task_);
}

void TaskAttachment::prepare(server::ServedModel& model) {
  if (!schema_by_default_) return;
  holes_ = std::make_shared<const constrain::Constraint>(
      task_answer_automaton(task_.intents, task_.slots, kTaskValueMaxChars, kTaskMaxSlotPairs,
                            TaskValues::Hole),
      model.constraints().vocab());
}

std::optional<constrain::ConstraintSpec> TaskAttachment::default_spec() const {
  return spec_;
}

std::shared_ptr<const constrain::Constraint> TaskAttachment::answer_constraint(
    server::ServedModel& model, std::string_view utterance) {
  if (!spec_) return nullptr;
  if (!holes_ || utterance.empty()) return model.compile(*spec_);
  return constrain::Constraint::with_holes_filled(holes_, task_values_automaton(utterance));
}

std::shared_ptr<const constrain::Constraint> TaskAttachment::constraint_for_prompt(
    server::ServedModel& model, std::string_view prompt) {
  if (const auto u = utterance_of(prompt)) return answer_constraint(model, *u);
  return nullptr;
}

std::optional<std::string> TaskAttachment::utterance_of(std::string_view prompt) const {
  const std::string &head = task_.instruction, &tail = task_.prompt_suffix;
  if (prompt.size() <= head.size() + tail.size() || !prompt.starts_with(head) ||
      !prompt.ends_with(tail))
    return std::nullopt;
  const std::string_view text =
      prompt.substr(head.size(), prompt.size() - head.size() - tail.size());
  if (text.find('\n') != std::string_view::npos) return std::nullopt;
  return std::string(text);
}

std::shared_ptr<TaskAttachment> task_attachment_of(const std::string& model_path,
                                                   bool schema_by_default) {
  auto task = task_of_model(model_path);
  if (!task) return nullptr;
  return std::make_shared<TaskAttachment>(std::move(*task), schema_by_default);
}

void add_task_routes(server::HttpServer& server) {
  server::ModelRoute r;
  r.path = "/v1/intent";
  r.make_request =
      [](std::string_view body,
         server::ServedModel& model) -> std::variant<engine::GenerationRequest, server::ApiError> {
    auto text = parse_intent_request(body);
    if (const auto* e = std::get_if<server::ApiError>(&text)) return *e;
    auto* attached = dynamic_cast<TaskAttachment*>(model.attachment());
    if (!attached)
      return server::not_found(
          "This model carries no task definition (shrike.task.* in its "
          "GGUF, written by `shrike train` or `shrike task set`): "
          "/v1/intent needs one.",
          "no_task");
    const std::string& utterance = std::get<std::string>(text);
    engine::Engine& eng = model.engine();
    // The task's prompts start with BOS (encode_task_prompt), whatever the model's default.
    return intent_generation_request(attached->task(), eng.tokenizer(), utterance,
                                     attached->answer_constraint(model, task_utterance(utterance)),
                                     true, eng.context_length());
  };
  r.reply = [](server::ServedModel&, const std::string& answer, const engine::StreamEvent& last,
               double total_ms,
               double first_token_ms) -> std::variant<nlohmann::json, server::ApiError> {
    const TaskPrediction p = parse_task_answer(answer);
    if (!p.parsed)
      return server::server_error("The model's answer is not a task answer: " + answer);
    return intent_response(p, last, total_ms, first_token_ms);
  };
  server.add_route(std::move(r));
}

}  // namespace shrike::task
