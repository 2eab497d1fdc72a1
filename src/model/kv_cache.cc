#include "model/kv_cache.h"

namespace shrike::model {

ContiguousKvCache::ContiguousKvCache(int64_t n_layers, int64_t capacity, int64_t kv_dim)
    : capacity_(capacity),
      kv_dim_(kv_dim),
      k_(size_t(n_layers) * size_t(capacity) * size_t(kv_dim)),
      v_(size_t(n_layers) * size_t(capacity) * size_t(kv_dim)) {
  for (int64_t l = 0; l < n_layers; ++l) {
    k_blocks_.push_back(k_.data() + offset(l, 0));
    v_blocks_.push_back(v_.data() + offset(l, 0));
  }
}

kernels::KvRows ContiguousKvCache::keys(int64_t layer) const {
  return {&k_blocks_[size_t(layer)], capacity_, kv_dim_};
}

kernels::KvRows ContiguousKvCache::values(int64_t layer) const {
  return {&v_blocks_[size_t(layer)], capacity_, kv_dim_};
}

}  // namespace shrike::model
