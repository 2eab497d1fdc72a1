// Where the forward pass keeps the keys and values of past positions.
//
// The model writes a position's keys and values through store() and attention reads them through a
// block table (kernels::KvRows), so a paged cache can replace the contiguous one without touching
// model code.
#pragma once

#include <cstdint>
#include <vector>

#include "core/file_buffer.h"
#include "kernels/ops.h"

namespace shrike::model {

class KvCache {
 public:
  virtual ~KvCache() = default;
  // Positions this cache can hold for the sequence.
  virtual int64_t capacity() const = 0;
  // Stores the keys and values of one position: k and v are [n_kv_heads][head_dim]; pos <
  // capacity().
  virtual void store(int64_t layer, int64_t pos, const float* k, const float* v) = 0;
  // Block-table views of a layer's rows for the attention kernel.
  virtual kernels::KvRows keys(int64_t layer) const = 0;
  virtual kernels::KvRows values(int64_t layer) const = 0;
};

// One sequence, f32, capacity reserved up front, head-major: [layer][kv_head][pos][head_dim] for
// keys and for values, so that attention streams each head's positions contiguously.
class ContiguousKvCache final : public KvCache {
 public:
  ContiguousKvCache(int64_t n_layers, int64_t capacity, int64_t n_kv_heads, int64_t head_dim);
  int64_t capacity() const override { return capacity_; }
  void store(int64_t layer, int64_t pos, const float* k, const float* v) override;
  kernels::KvRows keys(int64_t layer) const override;
  kernels::KvRows values(int64_t layer) const override;
  size_t bytes() const { return 2 * k_.size() * sizeof(float); }

 private:
  size_t layer_offset(int64_t layer) const {
    return size_t(layer) * size_t(n_kv_heads_) * size_t(capacity_) * size_t(head_dim_);
  }
  int64_t capacity_, n_kv_heads_, head_dim_;
  AlignedArray<float> k_, v_;
  std::vector<const float*> k_blocks_, v_blocks_;  // one "block" per layer: the whole layer
};

}  // namespace shrike::model
