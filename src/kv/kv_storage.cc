#include "kv/kv_storage.h"

#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace shrike::kv {
namespace {

// Floats per tensor (keys or values), checked so that a huge configuration fails with a message
// instead of wrapping around.
size_t checked_floats(int64_t n_layers, int64_t n_blocks, int64_t block_size, int64_t n_kv_heads,
                      int64_t head_dim) {
  const auto describe = [&] {
    return std::to_string(n_layers) + " layers, " + std::to_string(n_blocks) + " blocks of " +
           std::to_string(block_size) + ", " + std::to_string(n_kv_heads) + " kv heads of " +
           std::to_string(head_dim);
  };
  if (n_layers < 1 || n_blocks < 1 || block_size < 1 || n_kv_heads < 1 || head_dim < 1) {
    throw std::invalid_argument("KvStorage: every dimension must be >= 1, got " + describe());
  }
  // Both tensors together must stay addressable in bytes.
  const size_t limit = std::numeric_limits<size_t>::max() / (2 * sizeof(float));
  size_t n = 1;
  for (const int64_t d : {n_layers, n_blocks, block_size, n_kv_heads, head_dim}) {
    if (n > limit / size_t(d)) throw std::invalid_argument("KvStorage: too large: " + describe());
    n *= size_t(d);
  }
  return n;
}

}  // namespace

KvStorage::KvStorage(int64_t n_layers, int64_t n_blocks, int64_t block_size, int64_t n_kv_heads,
                     int64_t head_dim)
    : n_layers_(n_layers),
      n_blocks_(n_blocks),
      block_size_(block_size),
      n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      k_(checked_floats(n_layers, n_blocks, block_size, n_kv_heads, head_dim)),
      v_(k_.size()) {
  // Zeroed so that nothing ever reads indeterminate memory (and so that the pages are committed
  // now, when the server starts, rather than in the middle of the first requests).
  std::memset(k_.data(), 0, k_.size() * sizeof(float));
  std::memset(v_.data(), 0, v_.size() * sizeof(float));
}

void KvStorage::store(int64_t layer, BlockId b, int64_t slot, const float* k, const float* v) {
  if (layer < 0 || layer >= n_layers_ || b < 0 || b >= n_blocks_ || slot < 0 ||
      slot >= block_size_) {
    throw std::out_of_range("KvStorage::store: layer " + std::to_string(layer) + ", block " +
                            std::to_string(b) + ", slot " + std::to_string(slot) + " out of range");
  }
  float* kd = keys(layer, b) + slot * head_dim_;
  float* vd = values(layer, b) + slot * head_dim_;
  const size_t row = size_t(head_dim_) * sizeof(float);
  const int64_t head_stride = block_size_ * head_dim_;
  for (int64_t h = 0; h < n_kv_heads_; ++h) {
    std::memcpy(kd + h * head_stride, k + h * head_dim_, row);
    std::memcpy(vd + h * head_stride, v + h * head_dim_, row);
  }
}

void KvStorage::copy_block(BlockId src, BlockId dst) {
  if (src < 0 || src >= n_blocks_ || dst < 0 || dst >= n_blocks_) {
    throw std::out_of_range("KvStorage::copy_block: block " + std::to_string(src) + " -> " +
                            std::to_string(dst) + " out of range [0, " + std::to_string(n_blocks_) +
                            ")");
  }
  if (src == dst) return;
  const size_t bytes = size_t(block_floats()) * sizeof(float);
  for (int64_t layer = 0; layer < n_layers_; ++layer) {
    std::memcpy(keys(layer, dst), keys(layer, src), bytes);
    std::memcpy(values(layer, dst), values(layer, src), bytes);
  }
}

}  // namespace shrike::kv
