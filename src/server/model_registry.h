// The models one server holds, by name (`shrike serve a.gguf b.gguf`, `--model NAME=PATH`, and
// the admin route that adds or removes one while serving). Each is a ModelInstance (the model,
// its tokenizer and its engine) wrapped as a ServedModel with what the routes need per model: its
// compiled constraints and its task's schema. Routes hold a shared_ptr for as long as they use a
// model, so removing one from the registry never pulls it from under a running request.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "constrain/cache.h"
#include "data/task_definition.h"
#include "engine/engine.h"
#include "server/chat_format.h"

namespace shrike::server {

// A loaded model ready to serve. The engine is destroyed first (it references the others).
struct ModelInstance {
  std::string name;  // the id /v1/models lists and requests name
  std::unique_ptr<model::Model> model, draft;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::unique_ptr<engine::Engine> engine;
  ChatFormat chat_format = ChatFormat::Plain;
  // Effective settings, listed under "shrike" in /v1/models (serve.cc: serving_options).
  std::map<std::string, std::string> serving_options;
  // The model's task (data/task_definition.h): POST /v1/intent answers with it, and with
  // schema_by_default, requests without a constraint of their own follow its schema.
  std::optional<data::TaskDefinition> task;
  bool schema_by_default = true;

  ModelInstance() = default;
  ModelInstance(const ModelInstance&) = delete;
  ModelInstance& operator=(const ModelInstance&) = delete;
  ~ModelInstance() { engine.reset(); }
};

class ServedModel {
 public:
  // Compiles the task's answer constraints now (0.2 s for the built-in task: 9,131 DFA states
  // with any values; the one with holes for the utterance's values is much smaller), not in the
  // first requests' latency.
  explicit ServedModel(std::unique_ptr<ModelInstance> instance);

  const std::string& name() const { return inst_->name; }
  const ModelInstance& instance() const { return *inst_; }
  engine::Engine& engine() { return *inst_->engine; }
  const engine::Engine& engine() const { return *inst_->engine; }

  // A constraint compiled over this model's vocabulary (cached; the vocabulary's trie is built on
  // first use).
  std::shared_ptr<const constrain::Constraint> compile(const constrain::ConstraintSpec& spec);
  // The task's schema when it constrains requests by default.
  const std::optional<constrain::ConstraintSpec>& default_spec() const { return default_spec_; }
  // With default_spec(): the task's answer for one utterance, slot values restricted to its
  // substrings (constrain/task_answer.h); the rest of the answer keeps the masks shared by
  // every request.
  std::shared_ptr<const constrain::Constraint> task_constraint(std::string_view utterance);
  // The utterance of a completions prompt written in the task's format (instruction +
  // utterance + "\n", task_format.h), or none.
  std::optional<std::string> task_utterance(std::string_view prompt) const;

 private:
  std::unique_ptr<ModelInstance> inst_;
  std::once_flag constraints_once_;
  std::unique_ptr<constrain::ConstraintCache> constraints_;
  std::optional<constrain::ConstraintSpec> default_spec_;
  std::shared_ptr<const constrain::Constraint> task_holes_;  // the answer with a hole per value
};

class ModelRegistry {
 public:
  // std::invalid_argument when the name is empty or taken.
  void add(std::shared_ptr<ServedModel> m);
  // Null when there is none of that name.
  std::shared_ptr<ServedModel> find(const std::string& name) const;
  // Takes the model out (new requests naming it get 404); null when there is none.
  std::shared_ptr<ServedModel> remove(const std::string& name);
  // Every model, by name.
  std::vector<std::shared_ptr<ServedModel>> all() const;
  size_t size() const;

 private:
  mutable std::shared_mutex mu_;
  std::map<std::string, std::shared_ptr<ServedModel>> models_;
};

}  // namespace shrike::server
