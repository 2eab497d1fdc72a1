#include "model/kv_cache.h"

#include <algorithm>

namespace shrike::model {

ContiguousKvCache::ContiguousKvCache(int64_t n_layers, int64_t capacity, int64_t n_kv_heads,
                                     int64_t head_dim)
    : capacity_(capacity),
      n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      k_(size_t(n_layers) * size_t(capacity) * size_t(n_kv_heads * head_dim)),
      v_(size_t(n_layers) * size_t(capacity) * size_t(n_kv_heads * head_dim)) {
  for (int64_t l = 0; l < n_layers; ++l) {
    k_blocks_.push_back(k_.data() + layer_offset(l));
    v_blocks_.push_back(v_.data() + layer_offset(l));
  }
}

void ContiguousKvCache::store(int64_t layer, int64_t pos, const float* k, const float* v) {
  const size_t head_stride = size_t(capacity_) * size_t(head_dim_);
  float* kd = k_.data() + layer_offset(layer) + size_t(pos) * size_t(head_dim_);
  float* vd = v_.data() + layer_offset(layer) + size_t(pos) * size_t(head_dim_);
  for (int64_t h = 0; h < n_kv_heads_; ++h) {
    std::copy(k + h * head_dim_, k + (h + 1) * head_dim_, kd + size_t(h) * head_stride);
    std::copy(v + h * head_dim_, v + (h + 1) * head_dim_, vd + size_t(h) * head_stride);
  }
}

kernels::KvRows ContiguousKvCache::keys(int64_t layer) const {
  return {&k_blocks_[size_t(layer)], capacity_, head_dim_, capacity_ * head_dim_};
}

kernels::KvRows ContiguousKvCache::values(int64_t layer) const {
  return {&v_blocks_[size_t(layer)], capacity_, head_dim_, capacity_ * head_dim_};
}

}  // namespace shrike::model
