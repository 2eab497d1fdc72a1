// The memory of the paged KV cache: for every layer, n_blocks blocks of keys and of values, f32
// or f16. Within a block the layout is head-major, [kv_head][block_size][head_dim], so that
// attention streams one head's positions contiguously (kernels::KvRows with row_stride = head_dim
// and head_stride = block_size * head_dim).
//
// f16 (IEEE half, rounded to nearest even from the f32 vectors the model computes) halves the
// bytes a decode step reads per cached token, which is what bounds attention over many long
// sequences; llama.cpp keeps its cache in f16 by default too.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/file_buffer.h"
#include "kv/block_pool.h"

namespace shrike::kv {

class KvStorage {
 public:
  // type is DType::F32 or DType::F16 (std::invalid_argument otherwise).
  KvStorage(int64_t n_layers, int64_t n_blocks, int64_t block_size, int64_t n_kv_heads,
            int64_t head_dim, DType type = DType::F32);

  int64_t n_layers() const { return n_layers_; }
  int64_t n_blocks() const { return n_blocks_; }
  int64_t block_size() const { return block_size_; }
  int64_t n_kv_heads() const { return n_kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  DType type() const { return type_; }
  bool is_f16() const { return type_ == DType::F16; }
  // Bytes of one element (4 or 2).
  size_t element_bytes() const { return is_f16() ? 2 : 4; }
  // Elements of one block of keys (or values) of one layer.
  int64_t block_elems() const { return block_size_ * n_kv_heads_ * head_dim_; }
  // Bytes of one block id across the whole cache: keys and values of every layer.
  size_t block_bytes() const {
    return 2 * size_t(n_layers_) * size_t(block_elems()) * element_bytes();
  }
  size_t bytes() const { return block_bytes() * size_t(n_blocks_); }
  size_t bytes_per_token() const {
    return size_t(2 * n_layers_ * n_kv_heads_ * head_dim_) * element_bytes();
  }

  // A block's keys / values of one layer. The f32 accessors need an f32 cache, the f16 ones an
  // f16 cache (std::logic_error otherwise).
  float* keys(int64_t layer, BlockId b) { return f32(k_) + offset(layer, b, DType::F32); }
  float* values(int64_t layer, BlockId b) { return f32(v_) + offset(layer, b, DType::F32); }
  const float* keys(int64_t layer, BlockId b) const {
    return f32(k_) + offset(layer, b, DType::F32);
  }
  const float* values(int64_t layer, BlockId b) const {
    return f32(v_) + offset(layer, b, DType::F32);
  }
  uint16_t* keys_f16(int64_t layer, BlockId b) { return f16(k_) + offset(layer, b, DType::F16); }
  uint16_t* values_f16(int64_t layer, BlockId b) { return f16(v_) + offset(layer, b, DType::F16); }
  const uint16_t* keys_f16(int64_t layer, BlockId b) const {
    return f16(k_) + offset(layer, b, DType::F16);
  }
  const uint16_t* values_f16(int64_t layer, BlockId b) const {
    return f16(v_) + offset(layer, b, DType::F16);
  }

  // Writes one position's keys and values ([n_kv_heads][head_dim] f32 each) at slot `slot` of
  // block b, converted to the cache's type.
  void store(int64_t layer, BlockId b, int64_t slot, const float* k, const float* v);
  // Copies every layer's keys and values of block src into dst (copy-on-write).
  void copy_block(BlockId src, BlockId dst);

 private:
  using Bytes = AlignedArray<unsigned char>;
  static float* f32(Bytes& m) { return reinterpret_cast<float*>(m.data()); }
  static const float* f32(const Bytes& m) { return reinterpret_cast<const float*>(m.data()); }
  static uint16_t* f16(Bytes& m) { return reinterpret_cast<uint16_t*>(m.data()); }
  static const uint16_t* f16(const Bytes& m) { return reinterpret_cast<const uint16_t*>(m.data()); }
  // Element offset of a layer's block, for a caller that expects elements of type `want`.
  size_t offset(int64_t layer, BlockId b, DType want) const {
    if (want != type_) wrong_type(want);
    return (size_t(layer) * size_t(n_blocks_) + size_t(b)) * size_t(block_elems());
  }
  [[noreturn]] void wrong_type(DType want) const;

  int64_t n_layers_, n_blocks_, block_size_, n_kv_heads_, head_dim_;
  DType type_;
  Bytes k_, v_;  // f32 or f16 elements
};

}  // namespace shrike::kv
