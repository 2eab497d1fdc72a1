// One sequence's KV cache with its capacity reserved up front: a KvStorage of a single block as
// long as the capacity, seen through a PagedKvView of that one block. The layout is therefore the
// paged one, head-major, [layer][kv_head][pos][head_dim] for keys and for values, so attention
// streams each head's positions contiguously; int8 layers keep their scales after the quants,
// [kv_head][pos]. Used where one sequence runs alone (generate, bench, evaluation, training
// checks, the golden tests).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kv/kv_cache.h"
#include "kv/kv_storage.h"
#include "kv/mixed_precision.h"
#include "kv/paged_kv.h"

namespace shrike::kv {

class ContiguousKvCache final : public KvCache {
 public:
  // f32, as the golden tests and training use it.
  ContiguousKvCache(int64_t n_layers, int64_t capacity, int64_t n_kv_heads, int64_t head_dim);
  // Any type; throws std::invalid_argument for invalid options (KvCacheOptions::validate) or a
  // negative capacity.
  ContiguousKvCache(const KvDims& dims, int64_t capacity, const KvCacheOptions& opt);
  // The view points into this object.
  ContiguousKvCache(const ContiguousKvCache&) = delete;
  ContiguousKvCache& operator=(const ContiguousKvCache&) = delete;

  int64_t capacity() const override { return capacity_; }
  void begin_forward(int64_t pos0, int64_t n) override;
  void store(int64_t layer, int64_t pos, const float* k, const float* v) override {
    view_.store(layer, pos, k, v);
  }
  kernels::KvRows keys(int64_t layer) const override { return view_.keys(layer); }
  kernels::KvRows values(int64_t layer) const override { return view_.values(layer); }
  WeightSums attention_weight_sums(int64_t layer) override {
    return view_.attention_weight_sums(layer);
  }
  void end_forward(bool logits) override { view_.end_forward(logits); }

  // Rollback: forgets positions from n on (the next forward call continues at n). The rows stay
  // until rewritten; attention never reads past the positions a call asks for.
  void truncate(int64_t n);

  const KvCacheOptions& options() const { return opt_; }
  // Positions written so far (the end of the last forward call, or of a truncate()).
  int64_t n_positions() const { return n_positions_; }
  // Bytes allocated for the whole capacity (int8-mixed state: as held now).
  size_t bytes() const;
  // Bytes the positions written so far take: their rows (and scales), plus for int8-mixed the
  // policy's state (MixedPrecisionKv::bytes(): slot indices, f16 copies and their sums).
  size_t bytes_in_use() const;
  // Bytes of one position's rows and scales across layers (no f16 copies).
  size_t storage_bytes_per_token() const { return per_token_; }
  // bytes_in_use() / n_positions() (0 when empty): with int8-mixed, copies included.
  double bytes_per_token() const;
  // The int8-mixed state (null for other types).
  const MixedPrecisionKv* mixed() const { return mixed_ ? &*mixed_ : nullptr; }

 private:
  KvCacheOptions opt_;
  int64_t capacity_;
  KvStorage storage_;
  std::vector<BlockId> table_{0};  // the one block
  std::optional<MixedPrecisionKv> mixed_;
  PagedKvView view_;
  size_t per_token_ = 0;
  int64_t n_positions_ = 0;
};

}  // namespace shrike::kv
