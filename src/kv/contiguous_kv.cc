#include "kv/contiguous_kv.h"

#include <algorithm>
#include <stdexcept>

namespace shrike::kv {
namespace {

int64_t checked_capacity(int64_t capacity) {
  if (capacity < 0) throw std::invalid_argument("KV cache capacity must be >= 0");
  return capacity;
}

const KvCacheOptions& validated(const KvCacheOptions& opt, int64_t n_layers) {
  opt.validate(n_layers);
  return opt;
}

}  // namespace

ContiguousKvCache::ContiguousKvCache(int64_t n_layers, int64_t capacity, int64_t n_kv_heads,
                                     int64_t head_dim)
    : ContiguousKvCache(KvDims{n_layers, n_kv_heads, head_dim}, capacity, KvCacheOptions{}) {}

ContiguousKvCache::ContiguousKvCache(const KvDims& dims, int64_t capacity,
                                     const KvCacheOptions& opt)
    : opt_(validated(opt, dims.n_layers)),
      capacity_(checked_capacity(capacity)),
      // A storage needs a block of at least one position; an empty cache still has one.
      storage_(dims.n_layers, 1, std::max<int64_t>(1, capacity), dims.n_kv_heads, dims.head_dim,
               opt.layer_formats(dims.n_layers)),
      view_(storage_) {
  if (opt.mixed()) mixed_.emplace(opt, dims);
  view_.bind(table_, mixed_ ? &*mixed_ : nullptr, capacity_);
  for (int64_t l = 0; l < dims.n_layers; ++l)
    per_token_ += 2 * size_t(dims.n_kv_heads) * kv_row_bytes(storage_.format(l), dims.head_dim);
}

void ContiguousKvCache::begin_forward(int64_t pos0, int64_t n) {
  n_positions_ = pos0 + n;
  view_.begin_forward(pos0, n);
}

void ContiguousKvCache::truncate(int64_t n) {
  if (n < 0) throw std::out_of_range("ContiguousKvCache::truncate: negative length");
  if (n >= n_positions_) return;
  n_positions_ = n;
  if (mixed_) mixed_->truncate(n);
}

size_t ContiguousKvCache::bytes() const {
  return storage_.bytes() + (mixed_ ? mixed_->bytes() : 0);
}

size_t ContiguousKvCache::bytes_in_use() const {
  return size_t(n_positions_) * per_token_ + (mixed_ ? mixed_->bytes() : 0);
}

double ContiguousKvCache::bytes_per_token() const {
  return n_positions_ > 0 ? double(bytes_in_use()) / double(n_positions_) : 0.0;
}

}  // namespace shrike::kv
