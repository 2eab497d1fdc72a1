// Where the forward pass keeps the keys and values of past positions.
//
// The model writes a position's keys and values through store() and attention reads them through a
// block table (kernels::KvRows), so a paged cache can replace the contiguous one without touching
// model code.
//
// Cache types (KvType): f32, f16, int8 (kernels::quantize_int8_row: one f32 scale per position
// and kv head), and int8-mixed: every position is stored in int8, and a per-sequence side store
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
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/file_buffer.h"
#include "kernels/ops.h"
#include "model/config.h"

namespace shrike::model {

enum class KvType { F32, F16, Int8, Int8Mixed };
// "f32", "f16", "int8", "int8-mixed".
const char* kv_type_name(KvType t);
std::optional<KvType> kv_type_from_name(std::string_view name);

struct KvCacheOptions {
  KvType type = KvType::F32;
  // int8-mixed only. Defaults: 4 sinks (StreamingLLM keeps 4); a window of 16 (on stories260K,
  // 16 recent positions in f16 cut the KL of an all-int8 cache 15-30x: most of its error is in
  // the keys of the latest positions); heavy hitters: 10% (H2O keeps 10-20%; on stories260K 10%
  // halves the KL left with the window alone, and costs 0.2 bytes per element over int8).
  int64_t sinks = 4;
  int64_t window = 16;
  double heavy_fraction = 0.1;
  std::vector<int64_t> fp16_layers{};  // int8-mixed: layers stored in f16 for every position

  // Throws std::invalid_argument naming the option: negative sinks or window, heavy_fraction
  // outside [0, 1], a layer outside [0, n_layers), or fp16_layers with a type other than
  // int8-mixed.
  void validate(int64_t n_layers) const;
  bool mixed() const { return type == KvType::Int8Mixed; }
  bool fp16_layer(int64_t layer) const;
  // The storage format of each layer.
  std::vector<kernels::KvFormat> layer_formats(int64_t n_layers) const;
  // "int8-mixed (sinks 4, window 16, heavy 10%, f16 layers 0,5)", "f16".
  std::string describe() const;
};

// Where attention adds its softmax weights for a layer (kernels::AttentionJob::weight_sums):
// [n_kv_heads][stride], position p at index[p] (negative: not summed; null index: at p). Null
// data: not wanted.
struct WeightSums {
  float* data = nullptr;
  int64_t stride = 0;
  const int32_t* index = nullptr;
};

class KvCache {
 public:
  virtual ~KvCache() = default;
  // Positions this cache can hold for the sequence.
  virtual int64_t capacity() const = 0;
  // Called once per forward call with tokens for this sequence, on one thread, before any store():
  // the call writes positions [pos0, pos0 + n). Positions from pos0 on are rewritten, so a cache
  // with per-position state forgets theirs here (store() then runs concurrently for different
  // positions and must not allocate).
  virtual void begin_forward(int64_t pos0, int64_t n) {}
  // Stores the keys and values of one position: k and v are [n_kv_heads][head_dim]; pos <
  // capacity().
  virtual void store(int64_t layer, int64_t pos, const float* k, const float* v) = 0;
  // Block-table views of a layer's rows for the attention kernel.
  virtual kernels::KvRows keys(int64_t layer) const = 0;
  virtual kernels::KvRows values(int64_t layer) const = 0;
  // Where attention should add this layer's softmax weights (kernels::AttentionJob::weight_sums).
  virtual WeightSums attention_weight_sums(int64_t layer) { return {}; }
  // After the last layer of a forward call, on one thread; `logits`: the call computed logits for
  // this sequence.
  virtual void end_forward(bool logits) {}
};

// The int8-mixed policy's state for one sequence (see the file comment): for every int8 layer,
// which positions have an f16 copy, the copies, and their attention weight sums. Memory: a 4-byte
// slot index per position and layer, and per copy its halves (and n_kv_heads float sums).
class MixedPrecisionKv {
 public:
  // Why a position has an f16 copy (Int8: it has none).
  enum class Kept : uint8_t { Int8, Sink, Recent, Heavy };

  // opt must be int8-mixed and valid for c (std::invalid_argument otherwise).
  MixedPrecisionKv(const KvCacheOptions& opt, const ModelConfig& c);

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
  static size_t index_bytes_per_token(const KvCacheOptions& opt, const ModelConfig& c);
  static size_t copy_bytes_per_token(const KvCacheOptions& opt, const ModelConfig& c);
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

// One sequence, capacity reserved up front, head-major: [layer][kv_head][pos][head_dim] for keys
// and for values, so that attention streams each head's positions contiguously. Int8 layers keep
// their scales after the quants, [kv_head][pos].
class ContiguousKvCache final : public KvCache {
 public:
  // f32, as the golden tests and training use it.
  ContiguousKvCache(int64_t n_layers, int64_t capacity, int64_t n_kv_heads, int64_t head_dim);
  // Any type; throws std::invalid_argument for invalid options (KvCacheOptions::validate) or a
  // negative capacity.
  ContiguousKvCache(const ModelConfig& c, int64_t capacity, const KvCacheOptions& opt);

  int64_t capacity() const override { return capacity_; }
  void begin_forward(int64_t pos0, int64_t n) override;
  void store(int64_t layer, int64_t pos, const float* k, const float* v) override;
  kernels::KvRows keys(int64_t layer) const override;
  kernels::KvRows values(int64_t layer) const override;
  WeightSums attention_weight_sums(int64_t layer) override;
  void end_forward(bool logits) override;

  const KvCacheOptions& options() const { return opt_; }
  // Positions written so far (the end of the last forward call).
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
  struct Layer {
    kernels::KvFormat format = kernels::KvFormat::F32;
    AlignedArray<unsigned char> k, v;
    size_t quant_bytes = 0;  // int8: bytes of the quants before the scales
    // The one "block" of the layer in each view (KvRows points at these).
    const float* kf = nullptr;
    const float* vf = nullptr;
    const uint16_t* kh = nullptr;
    const uint16_t* vh = nullptr;
    const int8_t* kq = nullptr;
    const int8_t* vq = nullptr;
    const float* ks = nullptr;
    const float* vs = nullptr;
  };
  void init(int64_t n_layers);
  kernels::KvRows rows(int64_t layer, bool values) const;

  KvCacheOptions opt_;
  int64_t capacity_, n_kv_heads_, head_dim_;
  std::vector<Layer> layers_;
  size_t per_token_ = 0;
  int64_t n_positions_ = 0;
  std::optional<MixedPrecisionKv> mixed_;
};

// Makes the cache one sequence's forward passes use (capacity: positions). Evaluation and task
// decoding take one so that a model can be measured under any cache type; empty means an f32
// ContiguousKvCache.
using KvCacheFactory =
    std::function<std::unique_ptr<KvCache>(const ModelConfig& config, int64_t capacity)>;

}  // namespace shrike::model
