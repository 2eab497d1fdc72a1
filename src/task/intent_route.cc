#include "task/intent_route.h"

#include <algorithm>

namespace shrike::task {

std::variant<std::string, server::ApiError> parse_intent_request(std::string_view body) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return server::bad_request(
        "The body must be a JSON object such as {\"text\": \"where is my order\"}.", "",
        "invalid_json");
  const auto it = j.find("text");
  if (it == j.end())
    return server::bad_request("'text' is required.", "text", "missing_required_parameter");
  if (!it->is_string())
    return server::bad_request("Invalid type for 'text': expected a string.", "text",
                               "invalid_type");
  std::string text = it->get<std::string>();
  if (text.empty()) return server::bad_request("'text' is empty.", "text", "invalid_value");
  return text;
}

std::string intent_prompt(const TaskDefinition& task, std::string_view text) {
  return task.prompt_format().text(text);
}

std::variant<engine::GenerationRequest, server::ApiError> intent_generation_request(
    const TaskDefinition& task, const tokenizer::Tokenizer& tok, std::string_view text,
    std::shared_ptr<const constrain::Constraint> constraint, bool add_bos, int64_t context_length,
    int64_t max_answer_tokens) {
  engine::GenerationRequest g;
  g.prompt = tok.encode(intent_prompt(task, text), add_bos);
  if (int64_t(g.prompt.size()) >= context_length)
    return server::bad_request("The text is too long: its prompt has " +
                                   std::to_string(g.prompt.size()) + " tokens, the context " +
                                   std::to_string(context_length) + ".",
                               "text", "context_length_exceeded");
  g.max_tokens = std::min(max_answer_tokens, context_length - int64_t(g.prompt.size()));
  g.sampling.temperature = 0;
  g.constraint = std::move(constraint);
  return g;
}

nlohmann::json intent_response(const TaskPrediction& p, const engine::StreamEvent& last,
                               double total_ms, double first_token_ms) {
  return {{"intent", p.intent},
          {"slots", p.slots},
          {"usage",
           {{"prompt_tokens", last.prompt_tokens},
            {"completion_tokens", last.completion_tokens},
            {"total_tokens", last.prompt_tokens + last.completion_tokens}}},
          {"timing",
           {{"total_ms", total_ms},
            {"first_token_ms", first_token_ms},
            {"model_steps", last.model_steps}}}};
}

}  // namespace shrike::task
