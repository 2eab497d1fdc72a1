#include "constrain/cache.h"

#include <algorithm>

#include "constrain/error.h"
#include "core/memory_release.h"

namespace shrike::constrain {

ConstraintCache::ConstraintCache(std::shared_ptr<const TokenVocab> vocab, size_t capacity,
                                 size_t mask_bytes)
    : vocab_(std::move(vocab)), capacity_(std::max<size_t>(1, capacity)), mask_bytes_(mask_bytes) {}

std::string ConstraintCache::key(const ConstraintSpec& spec) {
  std::string k(1, char('0' + int(spec.kind)));
  switch (spec.kind) {
    case ConstraintSpec::Kind::Choice:
      for (const auto& c : spec.choices) k += std::to_string(c.size()) + ":" + c;
      break;
    case ConstraintSpec::Kind::Regex:
      k += spec.regex;
      break;
    case ConstraintSpec::Kind::JsonSchema:
      k += spec.schema.dump();
      break;
    case ConstraintSpec::Kind::JsonObject:
      break;
    case ConstraintSpec::Kind::Automaton:
      k += spec.automaton_key;
      break;
  }
  return k;
}

std::shared_ptr<const Constraint> ConstraintCache::get(const ConstraintSpec& spec) {
  const std::string k = key(spec);
  {
    std::lock_guard lock(mu_);
    if (const auto it = index_.find(k); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      if (!it->second->error.empty()) throw ConstraintError(it->second->error);
      return it->second->constraint;
    }
  }
  Entry e{k, nullptr, {}};
  try {
    e.constraint = std::make_shared<const Constraint>(compile(spec), vocab_, mask_bytes_);
  } catch (const ConstraintError& err) {
    e.error = err.what();
  }
  // Compiling freed its scratch (NFA, subsets), often megabytes: let the allocator return it.
  request_memory_release();
  std::lock_guard lock(mu_);
  if (const auto it = index_.find(k); it == index_.end()) {
    lru_.push_front(e);
    index_.emplace(k, lru_.begin());
    if (lru_.size() > capacity_) {
      index_.erase(lru_.back().key);
      lru_.pop_back();
    }
  }
  if (!e.error.empty()) throw ConstraintError(e.error);
  return e.constraint;
}

size_t ConstraintCache::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

int64_t ConstraintCache::hits() const {
  std::lock_guard lock(mu_);
  return hits_;
}

}  // namespace shrike::constrain
