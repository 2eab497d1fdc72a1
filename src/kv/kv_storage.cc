#include "kv/kv_storage.h"

#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace shrike::kv {
namespace {

size_t checked_element_bytes(DType type) {
  if (type != DType::F32 && type != DType::F16)
    throw std::invalid_argument("KvStorage: the cache holds f32 or f16, not " +
                                std::string(dtype_name(type)));
  return type == DType::F16 ? 2 : 4;
}

// Bytes per tensor (keys or values), checked so that a huge configuration fails with a message
// instead of wrapping around.
size_t checked_bytes(int64_t n_layers, int64_t n_blocks, int64_t block_size, int64_t n_kv_heads,
                     int64_t head_dim, DType type) {
  const size_t elem = checked_element_bytes(type);
  const auto describe = [&] {
    return std::to_string(n_layers) + " layers, " + std::to_string(n_blocks) + " blocks of " +
           std::to_string(block_size) + ", " + std::to_string(n_kv_heads) + " kv heads of " +
           std::to_string(head_dim);
  };
  if (n_layers < 1 || n_blocks < 1 || block_size < 1 || n_kv_heads < 1 || head_dim < 1) {
    throw std::invalid_argument("KvStorage: every dimension must be >= 1, got " + describe());
  }
  // Both tensors together must stay addressable in bytes.
  const size_t limit = std::numeric_limits<size_t>::max() / (2 * elem);
  size_t n = 1;
  for (const int64_t d : {n_layers, n_blocks, block_size, n_kv_heads, head_dim}) {
    if (n > limit / size_t(d)) throw std::invalid_argument("KvStorage: too large: " + describe());
    n *= size_t(d);
  }
  return n * elem;
}

// One head's row, converted to the cache's element type.
void put_row(float* dst, const float* src, int64_t n) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}
void put_row(uint16_t* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

// Scatters one position's [n_kv_heads][head_dim] row into head-major blocks.
template <typename T>
void scatter(T* kd, T* vd, const float* k, const float* v, int64_t n_heads, int64_t head_dim,
             int64_t head_stride) {
  for (int64_t h = 0; h < n_heads; ++h) {
    put_row(kd + h * head_stride, k + h * head_dim, head_dim);
    put_row(vd + h * head_stride, v + h * head_dim, head_dim);
  }
}

}  // namespace

KvStorage::KvStorage(int64_t n_layers, int64_t n_blocks, int64_t block_size, int64_t n_kv_heads,
                     int64_t head_dim, DType type)
    : n_layers_(n_layers),
      n_blocks_(n_blocks),
      block_size_(block_size),
      n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      type_(type),
      k_(checked_bytes(n_layers, n_blocks, block_size, n_kv_heads, head_dim, type)),
      v_(k_.size()) {
  // Zeroed so that nothing ever reads indeterminate memory (and so that the pages are committed
  // now, when the server starts, rather than in the middle of the first requests). Zero bits are
  // 0.0 in both types.
  std::memset(k_.data(), 0, k_.size());
  std::memset(v_.data(), 0, v_.size());
}

void KvStorage::wrong_type(DType want) const {
  throw std::logic_error("KvStorage: " + std::string(dtype_name(want)) + " access to an " +
                         std::string(dtype_name(type_)) + " cache");
}

void KvStorage::store(int64_t layer, BlockId b, int64_t slot, const float* k, const float* v) {
  if (layer < 0 || layer >= n_layers_ || b < 0 || b >= n_blocks_ || slot < 0 ||
      slot >= block_size_) {
    throw std::out_of_range("KvStorage::store: layer " + std::to_string(layer) + ", block " +
                            std::to_string(b) + ", slot " + std::to_string(slot) + " out of range");
  }
  const int64_t head_stride = block_size_ * head_dim_;
  if (is_f16()) {
    scatter(keys_f16(layer, b) + slot * head_dim_, values_f16(layer, b) + slot * head_dim_, k, v,
            n_kv_heads_, head_dim_, head_stride);
  } else {
    scatter(keys(layer, b) + slot * head_dim_, values(layer, b) + slot * head_dim_, k, v,
            n_kv_heads_, head_dim_, head_stride);
  }
}

void KvStorage::copy_block(BlockId src, BlockId dst) {
  if (src < 0 || src >= n_blocks_ || dst < 0 || dst >= n_blocks_) {
    throw std::out_of_range("KvStorage::copy_block: block " + std::to_string(src) + " -> " +
                            std::to_string(dst) + " out of range [0, " + std::to_string(n_blocks_) +
                            ")");
  }
  if (src == dst) return;
  // Raw bytes: the copy is exact in either element type.
  const size_t bytes = size_t(block_elems()) * element_bytes();
  const auto at = [&](Bytes& m, int64_t layer, BlockId blk) {
    return m.data() + (size_t(layer) * size_t(n_blocks_) + size_t(blk)) * bytes;
  };
  for (int64_t layer = 0; layer < n_layers_; ++layer) {
    std::memcpy(at(k_, layer, dst), at(k_, layer, src), bytes);
    std::memcpy(at(v_, layer, dst), at(v_, layer, src), bytes);
  }
}

}  // namespace shrike::kv
