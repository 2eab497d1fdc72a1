// The memory of the paged KV cache: for every layer, n_blocks blocks of keys and of values, in
// the layer's format: f32, f16, or int8 with one f32 scale per (position, kv head). Within a
// block the layout is head-major, [kv_head][block_size][head_dim], so that attention streams one
// head's positions contiguously (kernels::KvRows with row_stride = head_dim and head_stride =
// block_size * head_dim); an int8 block's scales follow its quants, [kv_head][block_size]
// (scale_row_stride = 1, scale_head_stride = block_size).
//
// f16 (IEEE half, rounded to nearest even from the f32 vectors the model computes) halves the
// bytes a decode step reads per cached token, which is what bounds attention over many long
// sequences; llama.cpp keeps its cache in f16 by default too. int8 (kernels::quantize_int8_row:
// per (position, kv head), scale = max|x| / 127) takes head_dim + 4 bytes per row instead of
// 2 * head_dim. Layers may differ in format (the int8-mixed policy keeps chosen layers in f16).
#pragma once

#include <cstdint>
#include <vector>

#include "core/file_buffer.h"
#include "kernels/ops.h"
#include "kv/block_pool.h"

namespace shrike::kv {

using kernels::KvFormat;

// "f32", "f16", "int8".
const char* kv_format_name(KvFormat f);
// Bytes of one kv head's row of one position: head_dim elements, plus the f32 scale of int8.
size_t kv_row_bytes(KvFormat f, int64_t head_dim);

class KvStorage {
 public:
  // Every layer in one format.
  KvStorage(int64_t n_layers, int64_t n_blocks, int64_t block_size, int64_t n_kv_heads,
            int64_t head_dim, KvFormat format = KvFormat::F32);
  // When the memory's pages are committed: Now zeroes everything at construction (no page fault
  // in the middle of a request); Lazily maps zero pages that become resident when a block is
  // first written, so that a cache under a shared budget (kv/shared_budget.h) takes from the
  // machine only the blocks it has used.
  enum class Commit { Now, Lazily };
  // One format per layer (layer_formats.size() == n_layers, std::invalid_argument otherwise).
  KvStorage(int64_t n_layers, int64_t n_blocks, int64_t block_size, int64_t n_kv_heads,
            int64_t head_dim, std::vector<KvFormat> layer_formats, Commit commit = Commit::Now);

  int64_t n_layers() const { return n_layers_; }
  int64_t n_blocks() const { return n_blocks_; }
  int64_t block_size() const { return block_size_; }
  int64_t n_kv_heads() const { return n_kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  KvFormat format(int64_t layer) const { return layers_[size_t(layer)].format; }
  // Elements of one block of keys (or values) of one layer.
  int64_t block_elems() const { return block_size_ * n_kv_heads_ * head_dim_; }
  // Bytes of one layer's block of keys (or values): elements, and for int8 the quants padded to
  // 4 bytes followed by the f32 scales.
  size_t layer_block_bytes(int64_t layer) const { return layers_[size_t(layer)].block_bytes; }
  // Bytes of one block id across the whole cache: keys and values of every layer.
  size_t block_bytes() const { return block_bytes_; }
  // What block_bytes() would be for these formats and dimensions (to size a pool before making
  // it); std::invalid_argument for dimensions < 1.
  static size_t block_bytes_for(const std::vector<KvFormat>& layer_formats, int64_t block_size,
                                int64_t n_kv_heads, int64_t head_dim);
  size_t bytes() const { return block_bytes_ * size_t(n_blocks_); }
  // Bytes one position takes across the cache (block_bytes / block_size).
  double bytes_per_token() const { return double(block_bytes_) / double(block_size_); }

  // A block's keys / values of one layer, for a layer of that format (std::logic_error
  // otherwise). Int8 scales: scale of kv head j at slot s is *_scales(...)[j * block_size + s].
  float* keys(int64_t layer, BlockId b) { return at<float>(k_, layer, b, KvFormat::F32); }
  float* values(int64_t layer, BlockId b) { return at<float>(v_, layer, b, KvFormat::F32); }
  const float* keys(int64_t layer, BlockId b) const {
    return at<float>(k_, layer, b, KvFormat::F32);
  }
  const float* values(int64_t layer, BlockId b) const {
    return at<float>(v_, layer, b, KvFormat::F32);
  }
  uint16_t* keys_f16(int64_t layer, BlockId b) { return at<uint16_t>(k_, layer, b, KvFormat::F16); }
  uint16_t* values_f16(int64_t layer, BlockId b) {
    return at<uint16_t>(v_, layer, b, KvFormat::F16);
  }
  const uint16_t* keys_f16(int64_t layer, BlockId b) const {
    return at<uint16_t>(k_, layer, b, KvFormat::F16);
  }
  const uint16_t* values_f16(int64_t layer, BlockId b) const {
    return at<uint16_t>(v_, layer, b, KvFormat::F16);
  }
  int8_t* keys_int8(int64_t layer, BlockId b) { return at<int8_t>(k_, layer, b, KvFormat::Int8); }
  int8_t* values_int8(int64_t layer, BlockId b) { return at<int8_t>(v_, layer, b, KvFormat::Int8); }
  const int8_t* keys_int8(int64_t layer, BlockId b) const {
    return at<int8_t>(k_, layer, b, KvFormat::Int8);
  }
  const int8_t* values_int8(int64_t layer, BlockId b) const {
    return at<int8_t>(v_, layer, b, KvFormat::Int8);
  }
  float* key_scales(int64_t layer, BlockId b) { return scales(k_, layer, b); }
  float* value_scales(int64_t layer, BlockId b) { return scales(v_, layer, b); }
  const float* key_scales(int64_t layer, BlockId b) const { return scales(k_, layer, b); }
  const float* value_scales(int64_t layer, BlockId b) const { return scales(v_, layer, b); }

  // Writes one position's keys and values ([n_kv_heads][head_dim] f32 each) at slot `slot` of
  // block b, converted to the layer's format.
  void store(int64_t layer, BlockId b, int64_t slot, const float* k, const float* v);
  // Copies every layer's keys and values of block src into dst (copy-on-write).
  void copy_block(BlockId src, BlockId dst);
  // Commit::Lazily: returns the memory of blocks [from, to) to the system (whole pages inside
  // the range; they read as zero again). Nothing with Commit::Now.
  void discard(BlockId from, BlockId to);

 private:
  // Aligned heap memory (Commit::Now) or an anonymous mapping (Commit::Lazily).
  class Bytes {
   public:
    Bytes() = default;
    Bytes(size_t n, Commit commit);
    ~Bytes();
    Bytes(Bytes&& o) noexcept;
    Bytes& operator=(Bytes&& o) noexcept;
    unsigned char* data() { return p_; }
    const unsigned char* data() const { return p_; }
    size_t size() const { return n_; }
    bool lazy() const { return mapped_ > 0; }

   private:
    unsigned char* p_ = nullptr;
    size_t n_ = 0, mapped_ = 0;  // mapped_ > 0: munmap, else free
  };
  struct Layer {
    KvFormat format = KvFormat::F32;
    size_t block_bytes = 0;  // bytes of one block of K (or V)
    size_t quant_bytes = 0;  // int8: bytes of the quants before the scales
    size_t offset = 0;       // byte offset of the layer's first block in k_ / v_
  };
  unsigned char* raw(Bytes& m, int64_t layer, BlockId b) const {
    return m.data() + layers_[size_t(layer)].offset +
           size_t(b) * layers_[size_t(layer)].block_bytes;
  }
  const unsigned char* raw(const Bytes& m, int64_t layer, BlockId b) const {
    return m.data() + layers_[size_t(layer)].offset +
           size_t(b) * layers_[size_t(layer)].block_bytes;
  }
  template <typename T>
  T* at(Bytes& m, int64_t layer, BlockId b, KvFormat want) const {
    check_format(layer, want);
    return reinterpret_cast<T*>(raw(m, layer, b));
  }
  template <typename T>
  const T* at(const Bytes& m, int64_t layer, BlockId b, KvFormat want) const {
    check_format(layer, want);
    return reinterpret_cast<const T*>(raw(m, layer, b));
  }
  float* scales(Bytes& m, int64_t layer, BlockId b) const {
    return reinterpret_cast<float*>(at<int8_t>(m, layer, b, KvFormat::Int8) +
                                    layers_[size_t(layer)].quant_bytes);
  }
  const float* scales(const Bytes& m, int64_t layer, BlockId b) const {
    return reinterpret_cast<const float*>(at<int8_t>(m, layer, b, KvFormat::Int8) +
                                          layers_[size_t(layer)].quant_bytes);
  }
  void check_format(int64_t layer, KvFormat want) const {
    if (layers_[size_t(layer)].format != want) wrong_format(layer, want);
  }
  [[noreturn]] void wrong_format(int64_t layer, KvFormat want) const;

  int64_t n_layers_, n_blocks_, block_size_, n_kv_heads_, head_dim_;
  std::vector<Layer> layers_;
  size_t block_bytes_ = 0;
  Bytes k_, v_;
};

}  // namespace shrike::kv
