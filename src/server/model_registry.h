// The models one server holds, by name (`shrike serve a.gguf b.gguf`, `--model NAME=PATH`, and
// the admin route that adds or removes one while serving). Each is a ModelInstance (the model,
// its tokenizer and its engine) wrapped as a ServedModel with what the routes need per model: its
// compiled constraints and what a layer above attached to it (model_hooks.h). Routes hold a
// shared_ptr for as long as they use a model, so removing one from the registry never pulls it from
// under a running request.
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
#include "engine/engine.h"
#include "server/chat_format.h"
#include "server/model_hooks.h"

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
  // What a layer above attached (model_hooks.h; the task layer's task): its default constraint
  // applies to requests without one of their own. Null: none.
  std::shared_ptr<ModelAttachment> attachment;

  ModelInstance() = default;
  ModelInstance(const ModelInstance&) = delete;
  ModelInstance& operator=(const ModelInstance&) = delete;
  ~ModelInstance() { engine.reset(); }
};

class ServedModel {
 public:
  // Lets the attachment prepare (ModelAttachment::prepare).
  explicit ServedModel(std::unique_ptr<ModelInstance> instance);

  const std::string& name() const { return inst_->name; }
  const ModelInstance& instance() const { return *inst_; }
  engine::Engine& engine() { return *inst_->engine; }
  const engine::Engine& engine() const { return *inst_->engine; }

  // A constraint compiled over this model's vocabulary (cached; the vocabulary's trie is built on
  // first use).
  std::shared_ptr<const constrain::Constraint> compile(const constrain::ConstraintSpec& spec);
  // The cache compile() uses (made on first use), for its vocabulary.
  const constrain::ConstraintCache& constraints();
  // The attachment's default constraint (ModelAttachment::default_spec), or none.
  const std::optional<constrain::ConstraintSpec>& default_spec() const { return default_spec_; }
  ModelAttachment* attachment() const { return inst_->attachment.get(); }

 private:
  std::unique_ptr<ModelInstance> inst_;
  std::once_flag constraints_once_;
  std::unique_ptr<constrain::ConstraintCache> constraints_;
  std::optional<constrain::ConstraintSpec> default_spec_;
};

// The longest model name served: it appears in every /metrics sample and in the admin routes'
// URIs, so a huge one would bloat each scrape and could not be deleted (docs/SECURITY.md).
constexpr size_t kMaxModelNameBytes = 128;
// Why a model name cannot be served (empty, longer than kMaxModelNameBytes, or holding a control
// character or a space), or nullopt when it can.
std::optional<std::string> model_name_problem(const std::string& name);

class ModelRegistry {
 public:
  // std::invalid_argument when the name cannot be served (model_name_problem) or is taken.
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
