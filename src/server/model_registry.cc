#include "server/model_registry.h"

#include <stdexcept>

#include "constrain/task_answer.h"

namespace shrike::server {

ServedModel::ServedModel(std::unique_ptr<ModelInstance> instance) : inst_(std::move(instance)) {
  if (!inst_ || !inst_->engine || !inst_->tokenizer)
    throw std::invalid_argument("ServedModel: an instance without engine or tokenizer");
  if (inst_->task && inst_->schema_by_default) {
    const constrain::ConstraintSpec spec =
        constrain::task_answer_spec(inst_->task->intents, inst_->task->slots);
    default_spec_ = spec;
    compile(spec);
    task_holes_ = std::make_shared<const constrain::Constraint>(
        constrain::task_answer_automaton(inst_->task->intents, inst_->task->slots,
                                         constrain::kTaskValueMaxChars,
                                         constrain::kTaskMaxSlotPairs, constrain::TaskValues::Hole),
        constraints_->vocab());
  }
}

std::shared_ptr<const constrain::Constraint> ServedModel::task_constraint(
    std::string_view utterance) {
  if (!task_holes_ || utterance.empty()) return compile(*default_spec_);
  return constrain::Constraint::with_holes_filled(task_holes_,
                                                  constrain::task_values_automaton(utterance));
}

std::optional<std::string> ServedModel::task_utterance(std::string_view prompt) const {
  if (!inst_->task) return std::nullopt;
  const std::string& head = inst_->task->instruction;
  if (prompt.size() <= head.size() + 1 || prompt.substr(0, head.size()) != head ||
      prompt.back() != '\n')
    return std::nullopt;
  const std::string_view text = prompt.substr(head.size(), prompt.size() - head.size() - 1);
  if (text.find('\n') != std::string_view::npos) return std::nullopt;
  return std::string(text);
}

std::shared_ptr<const constrain::Constraint> ServedModel::compile(
    const constrain::ConstraintSpec& spec) {
  std::call_once(constraints_once_, [&] {
    constraints_ = std::make_unique<constrain::ConstraintCache>(
        constrain::TokenVocab::from_tokenizer(*inst_->tokenizer));
  });
  return constraints_->get(spec);
}

void ModelRegistry::add(std::shared_ptr<ServedModel> m) {
  if (!m || m->name().empty()) throw std::invalid_argument("a served model needs a name");
  std::unique_lock lock(mu_);
  if (models_.count(m->name()))
    throw std::invalid_argument("a model named '" + m->name() + "' is already served");
  const std::string name = m->name();
  models_.emplace(name, std::move(m));
}

std::shared_ptr<ServedModel> ModelRegistry::find(const std::string& name) const {
  std::shared_lock lock(mu_);
  const auto it = models_.find(name);
  return it == models_.end() ? nullptr : it->second;
}

std::shared_ptr<ServedModel> ModelRegistry::remove(const std::string& name) {
  std::unique_lock lock(mu_);
  const auto it = models_.find(name);
  if (it == models_.end()) return nullptr;
  auto m = std::move(it->second);
  models_.erase(it);
  return m;
}

std::vector<std::shared_ptr<ServedModel>> ModelRegistry::all() const {
  std::shared_lock lock(mu_);
  std::vector<std::shared_ptr<ServedModel>> out;
  for (const auto& [name, m] : models_) out.push_back(m);
  return out;
}

size_t ModelRegistry::size() const {
  std::shared_lock lock(mu_);
  return models_.size();
}

}  // namespace shrike::server
