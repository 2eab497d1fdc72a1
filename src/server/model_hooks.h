// What a layer above the server attaches to it without the server knowing that layer (the task
// layer, src/task, attaches an intent/slot task this way): per model, the constraint that
// requests bringing none of their own follow; per server, POST routes answered by one generation
// on the model the body names.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "constrain/constraint.h"
#include "constrain/spec.h"
#include "engine/request.h"
#include "server/openai_protocol.h"

namespace shrike::server {

class ServedModel;

// Held by a ModelInstance (ModelInstance::attachment) for as long as the model is served.
class ModelAttachment {
 public:
  virtual ~ModelAttachment() = default;
  // Called once by ServedModel's constructor, so that what requests need is compiled over the
  // model's vocabulary now and not in the first requests' latency.
  virtual void prepare(ServedModel& model) {}
  // The constraint requests without one of their own follow, or none (they stay free-form).
  virtual std::optional<constrain::ConstraintSpec> default_spec() const { return std::nullopt; }
  // What such requests report as their constraint ("task schema").
  virtual std::string default_spec_name() const { return "default schema"; }
  // For a completion's text prompt under default_spec: a narrower constraint when the attachment
  // recognises the prompt (a task prompt: slot values from its utterance); null: default_spec's.
  virtual std::shared_ptr<const constrain::Constraint> constraint_for_prompt(
      ServedModel& model, std::string_view prompt) {
    return nullptr;
  }
};

// POST path on the server (GET answers 405): the server reads the body, checks the API key,
// drain and readiness, resolves the model the body's optional "model" names, then asks
// make_request for one generation, runs it to the end and sends reply's JSON with 200, or the
// error either returns.
struct ModelRoute {
  std::string path;
  std::function<std::variant<engine::GenerationRequest, ApiError>(std::string_view body,
                                                                  ServedModel& model)>
      make_request;
  // answer: the generated text; last: the final event (usage, model steps); times in ms from
  // submission.
  std::function<std::variant<nlohmann::json, ApiError>(
      ServedModel& model, const std::string& answer, const engine::StreamEvent& last,
      double total_ms, double first_token_ms)>
      reply;
};

}  // namespace shrike::server
