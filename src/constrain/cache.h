// Compiled constraints by spec, least recently used first out, so requests repeating a schema
// (the common case: one service, one schema) compile it once and share its warm mask cache.
// Failures are remembered too: resending an expensive unsupported schema costs a lookup.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "constrain/constraint.h"
#include "constrain/spec.h"

namespace shrike::constrain {

class ConstraintCache {
 public:
  // At most `capacity` constraints, each keeping at most mask_bytes of cached masks.
  explicit ConstraintCache(std::shared_ptr<const TokenVocab> vocab, size_t capacity = 16,
                           size_t mask_bytes = size_t(16) << 20);

  // The compiled constraint (compiled outside the lock on a miss; two threads missing on the same
  // spec both compile, and the first insert wins). Throws ConstraintError as compile() does.
  std::shared_ptr<const Constraint> get(const ConstraintSpec& spec);

  const std::shared_ptr<const TokenVocab>& vocab() const { return vocab_; }
  size_t size() const;
  int64_t hits() const;

  // The spec's identity: kind, then its content (choices, and a task's labels and slot names,
  // length-prefixed; the schema as written, in key order).
  static std::string key(const ConstraintSpec& spec);

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const Constraint> constraint;  // or
    std::string error;                             // what compile() threw
  };
  std::shared_ptr<const TokenVocab> vocab_;
  size_t capacity_;
  size_t mask_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  int64_t hits_ = 0;
};

}  // namespace shrike::constrain
