// The memory of the paged KV cache: for every layer, n_blocks blocks of keys and of values, f32.
// Within a block the layout is head-major, [kv_head][block_size][head_dim], so that attention
// streams one head's positions contiguously (kernels::KvRows with row_stride = head_dim and
// head_stride = block_size * head_dim).
#pragma once

#include <cstdint>

#include "core/file_buffer.h"
#include "kv/block_pool.h"

namespace shrike::kv {

class KvStorage {
 public:
  KvStorage(int64_t n_layers, int64_t n_blocks, int64_t block_size, int64_t n_kv_heads,
            int64_t head_dim);

  int64_t n_layers() const { return n_layers_; }
  int64_t n_blocks() const { return n_blocks_; }
  int64_t block_size() const { return block_size_; }
  int64_t n_kv_heads() const { return n_kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  // Floats of one block of keys (or values) of one layer.
  int64_t block_floats() const { return block_size_ * n_kv_heads_ * head_dim_; }
  size_t bytes() const { return 2 * k_.size() * sizeof(float); }
  size_t bytes_per_token() const {
    return size_t(2 * n_layers_ * n_kv_heads_ * head_dim_) * sizeof(float);
  }

  float* keys(int64_t layer, BlockId b) { return k_.data() + offset(layer, b); }
  float* values(int64_t layer, BlockId b) { return v_.data() + offset(layer, b); }
  const float* keys(int64_t layer, BlockId b) const { return k_.data() + offset(layer, b); }
  const float* values(int64_t layer, BlockId b) const { return v_.data() + offset(layer, b); }

  // Writes one position's keys and values ([n_kv_heads][head_dim] each) at slot `slot` of block b.
  void store(int64_t layer, BlockId b, int64_t slot, const float* k, const float* v);
  // Copies every layer's keys and values of block src into dst (copy-on-write).
  void copy_block(BlockId src, BlockId dst);

 private:
  size_t offset(int64_t layer, BlockId b) const {
    return (size_t(layer) * size_t(n_blocks_) + size_t(b)) * size_t(block_floats());
  }
  int64_t n_layers_, n_blocks_, block_size_, n_kv_heads_, head_dim_;
  AlignedArray<float> k_, v_;
};

}  // namespace shrike::kv
