#include "kv/paged_kv.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace shrike::kv {

using kernels::KvFormat;

void PagedKvView::bind(const std::vector<BlockId>& blocks, MixedPrecisionKv* mixed,
                       int64_t capacity) {
  blocks_ = &blocks;
  mixed_ = mixed;
  const int64_t covered = int64_t(blocks.size()) * storage_->block_size();
  capacity_ = capacity < 0 ? covered : std::min(capacity, covered);
  const auto n_layers = size_t(storage_->n_layers());
  const KvStorage& st = *storage_;
  for (auto* t : {&k_ptrs_, &v_ptrs_, &k_scales_, &v_scales_}) t->resize(n_layers);
  for (auto* t : {&k_half_, &v_half_}) t->resize(n_layers);
  for (auto* t : {&k_int8_, &v_int8_}) t->resize(n_layers);
  for (size_t l = 0; l < n_layers; ++l) {
    const auto layer = int64_t(l);
    const auto fill = [&](auto& table, auto get) {
      table[l].resize(blocks.size());
      for (size_t i = 0; i < blocks.size(); ++i) table[l][i] = get(blocks[i]);
    };
    switch (st.format(layer)) {
      case KvFormat::F32:
        fill(k_ptrs_, [&](BlockId b) { return st.keys(layer, b); });
        fill(v_ptrs_, [&](BlockId b) { return st.values(layer, b); });
        break;
      case KvFormat::F16:
        fill(k_half_, [&](BlockId b) { return st.keys_f16(layer, b); });
        fill(v_half_, [&](BlockId b) { return st.values_f16(layer, b); });
        break;
      case KvFormat::Int8:
        fill(k_int8_, [&](BlockId b) { return st.keys_int8(layer, b); });
        fill(v_int8_, [&](BlockId b) { return st.values_int8(layer, b); });
        fill(k_scales_, [&](BlockId b) { return st.key_scales(layer, b); });
        fill(v_scales_, [&](BlockId b) { return st.value_scales(layer, b); });
        break;
    }
  }
}

void PagedKvView::begin_forward(int64_t pos0, int64_t n) {
  if (mixed_) mixed_->begin(pos0, n);
}

void PagedKvView::store(int64_t layer, int64_t pos, const float* k, const float* v) {
  if (pos < 0 || pos >= capacity_)
    throw std::out_of_range("KV position " + std::to_string(pos) + " outside the sequence's " +
                            std::to_string(capacity_) + " allocated positions");
  const int64_t bs = storage_->block_size();
  storage_->store(layer, (*blocks_)[size_t(pos / bs)], pos % bs, k, v);
  if (mixed_) mixed_->store(layer, pos, k, v);
}

kernels::KvRows PagedKvView::rows(int64_t layer, bool values) const {
  const int64_t bs = storage_->block_size(), hd = storage_->head_dim();
  const auto l = size_t(layer);
  kernels::KvRows r{nullptr, bs, hd, bs * hd};
  switch (storage_->format(layer)) {
    case KvFormat::F32:
      r.blocks = (values ? v_ptrs_ : k_ptrs_)[l].data();
      break;
    case KvFormat::F16:
      r.half_blocks = (values ? v_half_ : k_half_)[l].data();
      break;
    case KvFormat::Int8:
      r.int8_blocks = (values ? v_int8_ : k_int8_)[l].data();
      r.scale_blocks = (values ? v_scales_ : k_scales_)[l].data();
      r.scale_row_stride = 1;
      r.scale_head_stride = bs;  // [kv_head][slot] (KvStorage)
      break;
  }
  return r;
}

kernels::KvRows PagedKvView::view(int64_t layer, bool values) const {
  kernels::KvRows k = rows(layer, false), v = rows(layer, true);
  if (mixed_) mixed_->attach(layer, k, v);  // int8 rows name the sequence's f16 copies
  return values ? v : k;
}

WeightSums PagedKvView::attention_weight_sums(int64_t layer) {
  return mixed_ ? mixed_->weight_sums(layer) : WeightSums{};
}

void PagedKvView::end_forward(bool logits) {
  if (mixed_ && logits) mixed_->settle();
}

}  // namespace shrike::kv
