#include "server/model_registry.h"

#include <stdexcept>

namespace shrike::server {

ServedModel::ServedModel(std::unique_ptr<ModelInstance> instance) : inst_(std::move(instance)) {
  if (!inst_ || !inst_->engine || !inst_->tokenizer)
    throw std::invalid_argument("ServedModel: an instance without engine or tokenizer");
  if (inst_->attachment) {
    inst_->attachment->prepare(*this);
    default_spec_ = inst_->attachment->default_spec();
    if (default_spec_) compile(*default_spec_);
  }
}

const constrain::ConstraintCache& ServedModel::constraints() {
  std::call_once(constraints_once_, [&] {
    constraints_ = std::make_unique<constrain::ConstraintCache>(
        constrain::TokenVocab::from_tokenizer(*inst_->tokenizer));
  });
  return *constraints_;
}

std::shared_ptr<const constrain::Constraint> ServedModel::compile(
    const constrain::ConstraintSpec& spec) {
  constraints();
  return constraints_->get(spec);
}

std::optional<std::string> model_name_problem(const std::string& name) {
  if (name.empty()) return "a served model needs a name";
  if (name.size() > kMaxModelNameBytes)
    return "a model name has at most " + std::to_string(kMaxModelNameBytes) + " bytes (this one " +
           std::to_string(name.size()) + ")";
  for (unsigned char c : name)
    if (c <= 0x20 || c == 0x7f) return "a model name holds no spaces or control characters";
  return std::nullopt;
}

void ModelRegistry::add(std::shared_ptr<ServedModel> m) {
  if (!m) throw std::invalid_argument("a served model needs a name");
  if (const auto problem = model_name_problem(m->name())) throw std::invalid_argument(*problem);
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
