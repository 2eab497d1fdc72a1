// Where the forward pass keeps the keys and values of past positions.
//
// The model writes rows through key_row()/value_row() and reads them through a block table
// (kernels::KvRows), so a paged cache can replace the contiguous one without touching model code.
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
  // Row of kv_dim floats for (layer, pos); pos < capacity().
  virtual float* key_row(int64_t layer, int64_t pos) = 0;
  virtual float* value_row(int64_t layer, int64_t pos) = 0;
  // Block-table views of a layer's rows for the attention kernel.
  virtual kernels::KvRows keys(int64_t layer) const = 0;
  virtual kernels::KvRows values(int64_t layer) const = 0;
};

// One sequence, f32, capacity reserved up front: [layer][pos][kv_dim] for keys and for values.
class ContiguousKvCache final : public KvCache {
 public:
  ContiguousKvCache(int64_t n_layers, int64_t capacity, int64_t kv_dim);
  int64_t capacity() const override { return capacity_; }
  float* key_row(int64_t layer, int64_t pos) override { return k_.data() + offset(layer, pos); }
  float* value_row(int64_t layer, int64_t pos) override { return v_.data() + offset(layer, pos); }
  kernels::KvRows keys(int64_t layer) const override;
  kernels::KvRows values(int64_t layer) const override;
  size_t bytes() const { return 2 * k_.size() * sizeof(float); }

 private:
  size_t offset(int64_t layer, int64_t pos) const {
    return (size_t(layer) * size_t(capacity_) + size_t(pos)) * size_t(kv_dim_);
  }
  int64_t capacity_, kv_dim_;
  AlignedArray<float> k_, v_;
  std::vector<const float*> k_blocks_, v_blocks_;  // one "block" per layer: the whole layer
};

}  // namespace shrike::model
