#include "engine/paged_kv.h"

#include <stdexcept>
#include <string>

namespace shrike::engine {

void PagedKvView::bind(const std::vector<kv::BlockId>& blocks) {
  blocks_ = &blocks;
  capacity_ = int64_t(blocks.size()) * storage_->block_size();
  const auto n_layers = size_t(storage_->n_layers());
  k_ptrs_.resize(n_layers);
  v_ptrs_.resize(n_layers);
  for (size_t l = 0; l < n_layers; ++l) {
    k_ptrs_[l].resize(blocks.size());
    v_ptrs_[l].resize(blocks.size());
    for (size_t i = 0; i < blocks.size(); ++i) {
      k_ptrs_[l][i] = storage_->keys(int64_t(l), blocks[i]);
      v_ptrs_[l][i] = storage_->values(int64_t(l), blocks[i]);
    }
  }
}

void PagedKvView::store(int64_t layer, int64_t pos, const float* k, const float* v) {
  if (pos < 0 || pos >= capacity_)
    throw std::out_of_range("KV position " + std::to_string(pos) + " outside the sequence's " +
                            std::to_string(capacity_) + " allocated positions");
  const int64_t bs = storage_->block_size();
  storage_->store(layer, (*blocks_)[size_t(pos / bs)], pos % bs, k, v);
}

kernels::KvRows PagedKvView::keys(int64_t layer) const {
  const int64_t bs = storage_->block_size(), hd = storage_->head_dim();
  return {k_ptrs_[size_t(layer)].data(), bs, hd, bs * hd};
}

kernels::KvRows PagedKvView::values(int64_t layer) const {
  const int64_t bs = storage_->block_size(), hd = storage_->head_dim();
  return {v_ptrs_[size_t(layer)].data(), bs, hd, bs * hd};
}

}  // namespace shrike::engine
