#include "engine/paged_kv.h"

#include <stdexcept>
#include <string>

namespace shrike::engine {

namespace {

template <typename T, typename Get>
void fill_tables(std::vector<std::vector<const T*>>& tables, const std::vector<kv::BlockId>& blocks,
                 size_t n_layers, Get get) {
  tables.resize(n_layers);
  for (size_t l = 0; l < n_layers; ++l) {
    tables[l].resize(blocks.size());
    for (size_t i = 0; i < blocks.size(); ++i) tables[l][i] = get(int64_t(l), blocks[i]);
  }
}

}  // namespace

void PagedKvView::bind(const std::vector<kv::BlockId>& blocks) {
  blocks_ = &blocks;
  capacity_ = int64_t(blocks.size()) * storage_->block_size();
  const auto n_layers = size_t(storage_->n_layers());
  const kv::KvStorage& st = *storage_;
  if (st.is_f16()) {
    fill_tables(k_half_, blocks, n_layers,
                [&](int64_t l, kv::BlockId b) { return st.keys_f16(l, b); });
    fill_tables(v_half_, blocks, n_layers,
                [&](int64_t l, kv::BlockId b) { return st.values_f16(l, b); });
  } else {
    fill_tables(k_ptrs_, blocks, n_layers, [&](int64_t l, kv::BlockId b) { return st.keys(l, b); });
    fill_tables(v_ptrs_, blocks, n_layers,
                [&](int64_t l, kv::BlockId b) { return st.values(l, b); });
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
  if (storage_->is_f16()) return {nullptr, bs, hd, bs * hd, k_half_[size_t(layer)].data()};
  return {k_ptrs_[size_t(layer)].data(), bs, hd, bs * hd};
}

kernels::KvRows PagedKvView::values(int64_t layer) const {
  const int64_t bs = storage_->block_size(), hd = storage_->head_dim();
  if (storage_->is_f16()) return {nullptr, bs, hd, bs * hd, v_half_[size_t(layer)].data()};
  return {v_ptrs_[size_t(layer)].data(), bs, hd, bs * hd};
}

}  // namespace shrike::engine
