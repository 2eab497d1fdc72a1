// A sequence's view of the paged KV cache, in the shape the model's forward pass wants
// (model::KvCache): position p of the sequence lives in block blocks[p / block_size] of the
// shared KvStorage, at slot p % block_size.
#pragma once

#include <vector>

#include "kv/kv_storage.h"
#include "model/kv_cache.h"

namespace shrike::engine {

class PagedKvView final : public model::KvCache {
 public:
  explicit PagedKvView(kv::KvStorage& storage) : storage_(&storage) {}

  // Points the view at a block table. The table must stay unchanged while the view is used.
  void bind(const std::vector<kv::BlockId>& blocks);

  int64_t capacity() const override { return capacity_; }
  void store(int64_t layer, int64_t pos, const float* k, const float* v) override;
  kernels::KvRows keys(int64_t layer) const override;
  kernels::KvRows values(int64_t layer) const override;

 private:
  kv::KvStorage* storage_;
  const std::vector<kv::BlockId>* blocks_ = nullptr;
  int64_t capacity_ = 0;
  // Per layer, the address of each block's keys / values: the block table the attention kernel
  // walks (kernels::KvRows::blocks, or half_blocks for an f16 cache; the other pair stays empty).
  std::vector<std::vector<const float*>> k_ptrs_, v_ptrs_;
  std::vector<std::vector<const uint16_t*>> k_half_, v_half_;
};

}  // namespace shrike::engine
