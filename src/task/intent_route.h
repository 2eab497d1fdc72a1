// POST /v1/intent, the task model's own route: {"text": "..."} in, {"intent", "slots", "usage",
// "timing"} out. The prompt is formatted as the model's task defines it (instruction + utterance
// + "\n"), the answer is greedy and constrained to the task's schema (unless the server runs
// with --no-task-schema), and parsed as eval parses answers. Pure functions here; the route
// itself is registered by task_serving.h (add_task_routes).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "constrain/constraint.h"
#include "engine/request.h"
#include "server/openai_protocol.h"
#include "task/task_definition.h"
#include "task/task_format.h"
#include "tokenizer/tokenizer.h"

namespace shrike::task {

// The utterance, or a 400 naming what is wrong with the body.
std::variant<std::string, server::ApiError> parse_intent_request(std::string_view body);

// The task's prompt for `text`: its instruction, the text with line breaks as spaces, its
// suffix ("\n" unless the task was given another prompt).
std::string intent_prompt(const TaskDefinition& task, std::string_view text);

// Greedy, at most max_answer_tokens (capped by the context), constrained when `constraint` is
// set. A 400 when the utterance leaves no room in the context.
std::variant<engine::GenerationRequest, server::ApiError> intent_generation_request(
    const TaskDefinition& task, const tokenizer::Tokenizer& tok, std::string_view text,
    std::shared_ptr<const constrain::Constraint> constraint, bool add_bos, int64_t context_length,
    int64_t max_answer_tokens = 96);

// The reply: the parsed answer, usage (tokens) and timing (total and first-token milliseconds,
// model calls).
nlohmann::json intent_response(const TaskPrediction& p, const engine::StreamEvent& last,
                               double total_ms, double first_token_ms);

}  // namespace shrike::task
