// A sequence's view of the paged KV cache, in the shape the model's forward pass wants
// (KvCache): position p of the sequence lives in block blocks[p / block_size] of the
// shared KvStorage, at slot p % block_size. With the int8-mixed policy the view also carries the
// sequence's f16 copies and attention weight sums (MixedPrecisionKv), which the shared blocks do
// not hold. This is the only code that writes K/V rows (through KvStorage::store) and builds the
// attention kernel's block tables: ContiguousKvCache is this view over a storage of one block.
#pragma once

#include <vector>

#include "kv/kv_cache.h"
#include "kv/kv_storage.h"
#include "kv/mixed_precision.h"

namespace shrike::kv {

class PagedKvView final : public KvCache {
 public:
  explicit PagedKvView(KvStorage& storage) : storage_(&storage) {}

  // Points the view at a block table (and, for int8-mixed, at the sequence's policy state). Both
  // must stay unchanged (the table) and alive while the view is used. capacity: the positions
  // the view may write, at most (and by default) those the table covers.
  void bind(const std::vector<BlockId>& blocks, MixedPrecisionKv* mixed = nullptr,
            int64_t capacity = -1);

  int64_t capacity() const override { return capacity_; }
  void begin_forward(int64_t pos0, int64_t n) override;
  void store(int64_t layer, int64_t pos, const float* k, const float* v) override;
  kernels::KvRows keys(int64_t layer) const override { return view(layer, false); }
  kernels::KvRows values(int64_t layer) const override { return view(layer, true); }
  WeightSums attention_weight_sums(int64_t layer) override;
  void end_forward(bool logits) override;

 private:
  kernels::KvRows rows(int64_t layer, bool values) const;
  kernels::KvRows view(int64_t layer, bool values) const;

  KvStorage* storage_;
  const std::vector<BlockId>* blocks_ = nullptr;
  MixedPrecisionKv* mixed_ = nullptr;
  int64_t capacity_ = 0;
  // Per layer, the address of each block's keys / values in the layer's format: the block table
  // the attention kernel walks (kernels::KvRows::blocks, half_blocks or int8_blocks with
  // scale_blocks; the tables of the other formats stay empty).
  std::vector<std::vector<const float*>> k_ptrs_, v_ptrs_;
  std::vector<std::vector<const uint16_t*>> k_half_, v_half_;
  std::vector<std::vector<const int8_t*>> k_int8_, v_int8_;
  std::vector<std::vector<const float*>> k_scales_, v_scales_;
};

}  // namespace shrike::kv
