// The int8-mixed KV policy: every position is stored in int8, and a per-sequence side store
// (MixedPrecisionKv) keeps f16 copies of the positions that matter most, which attention reads
// instead of their int8 rows:
//   - attention sinks: the first `sinks` positions (they draw a large share of every query's
//     attention whatever their content);
//   - the recent window: the last `window` positions, whose fate is not decided yet, plus every
//     position written since the last decision (within one forward call, a prefill chunk reads
//     its own positions in f16: one call over a whole text reads it all in f16, so measure
//     int8-mixed on text token by token, as decoding runs);
//   - heavy hitters (H2O): positions keep a running sum of the attention they receive (softmax
//     weights over the layer's query heads and all queries so far) while they hold a copy. At
//     most heavy_fraction of the positions outside the sinks and the window keep theirs: when
//     positions leave the window they join the heavy hitters, and if that exceeds the budget
//     the lowest sums lose their copies (the int8 rows are already there), as H2O evicts. So
//     heavy hitters are revisited at every decision, and weight is tracked only for positions
//     holding a copy. An int8 position can never come back to f16 (its f16 values are gone), so
//     candidates come only from the window;
//   - fp16_layers: these layers are stored in f16 for every position.
// Decisions are taken when a forward call computes logits for the sequence (the end of a prompt,
// each decode step), from weight sums accumulated query by query in position order, so they do not
// depend on how a prompt was split into chunks or batched with others.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"
#include "kv/kv_cache.h"

namespace shrike::kv {

// The int8-mixed policy's state for one sequence (see the file comment): for every int8 layer,
// which positions have an f16 copy, the copies, and their attention weight sums. Memory: a 4-byte
// slot index per position and layer, and per copy its halves (and n_kv_heads float sums).
class MixedPrecisionKv {
 public:
  // Why a position has an f16 copy (Int8: it has none).
  enum class Kept : uint8_t { Int8, Sink, Recent, Heavy };

  // opt must be int8-mixed and valid for dims (std::invalid_argument otherwise).
  MixedPrecisionKv(const KvCacheOptions& opt, const KvDims& dims);

  // Positions [pos0, pos0 + n) are about to be stored: forgets positions from pos0 on and gives
  // every new position an f16 slot (zero weight) in every int8 layer (sinks: Sink, others:
  // Recent). Positions skipped between the last one held and pos0 are Int8.
  void begin(int64_t pos0, int64_t n);
  // The f16 copy of a position given to the last begin(). Thread-safe for distinct positions.
  void store(int64_t layer, int64_t pos, const float* k, const float* v);
  // Points int8 rows of `layer` at its f16 copies (an f16 layer's rows are left alone).
  void attach(int64_t layer, kernels::KvRows& k, kernels::KvRows& v) const;
  // The layer's weight sums (indexed by copy slot) when heavy hitters are kept (heavy_fraction >
  // 0) and it is an int8 layer; empty otherwise.
  WeightSums weight_sums(int64_t layer);
  // Decides the positions that left the window (see the file comment), then compacts the copies
  // when most slots are free (after a prompt, which held one per position).
  void settle();
  // Forgets everything and releases the memory (a preempted sequence).
  void clear();
  // Rollback (rejected speculative positions): forgets positions from n on, releasing their
  // copies, as if they had never been written. Decisions already taken for earlier positions
  // (copies demoted when the rejected positions pushed them out of the window) and the weight
  // the rejected queries added stay: an int8 row cannot come back to f16. n >= n_positions()
  // changes nothing.
  void truncate(int64_t n);

  const KvCacheOptions& options() const { return opt_; }
  int64_t n_positions() const { return n_; }
  bool tracks(int64_t layer) const { return layers_[size_t(layer)].tracked; }
  Kept kept(int64_t layer, int64_t pos) const;
  // Positions of an int8 layer holding an f16 copy (0 for an f16 layer).
  int64_t f16_positions(int64_t layer) const;
  // Bytes of the f16 copies in use, all layers (K and V).
  size_t f16_bytes() const;
  // Bytes the state holds: slot indices, and per allocated slot (free ones included, until
  // settle() compacts them) its halves and weight sums.
  size_t bytes() const;
  // What a memory budget must count, for these options and model: per position, the slot
  // indices of the int8 layers; per position holding copies, its halves and sums in those
  // layers.
  static size_t index_bytes_per_token(const KvCacheOptions& opt, const KvDims& dims);
  static size_t copy_bytes_per_token(const KvCacheOptions& opt, const KvDims& dims);
  // The attention weight a position holding a copy has received in `layer` (summed over query
  // heads), 0 for one without.
  double weight_sum(int64_t layer, int64_t pos) const;

 private:
  struct Layer {
    bool tracked = false;            // an int8 layer (not in fp16_layers)
    std::vector<int32_t> slot;       // per position: its f16 copy, or -1
    std::vector<uint16_t> k16, v16;  // per slot: [n_kv_heads][head_dim] halves
    std::vector<float> sums;         // [n_kv_heads][capacity]: weight received, per slot
    std::vector<int32_t> free;       // unused slots
    int64_t n_slots = 0, capacity = 0;
  };
  int32_t take_slot(Layer& l);
  void drop_copy(Layer& l, int64_t pos);
  void reserve_slots(Layer& l, int64_t capacity);
  void compact(Layer& l);
  bool sums_wanted() const { return opt_.heavy_fraction > 0; }

  KvCacheOptions opt_;
  int64_t n_kv_heads_, kv_dim_, head_dim_;
  std::vector<Layer> layers_;
  int64_t n_ = 0;        // positions held
  int64_t decided_ = 0;  // positions below this (and outside the sinks) are decided
};

}  // namespace shrike::kv
