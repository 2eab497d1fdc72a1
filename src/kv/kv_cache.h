// What the forward pass sees of a KV cache (KvCache), and the options that choose one.
//
// The model writes a position's keys and values through store() and attention reads them through a
// block table (kernels::KvRows), so the paged cache (PagedKvView) and the contiguous one
// (ContiguousKvCache, one block of its whole capacity) are the same code to the model.
//
// Cache types (KvType): f32, f16, int8 (kernels::quantize_int8_row: one f32 scale per position
// and kv head), and int8-mixed: int8 rows plus per-sequence f16 copies of the positions that
// matter most (MixedPrecisionKv, mixed_precision.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/ops.h"

namespace shrike::kv {

// The shape of what one position stores: n_kv_heads rows of head_dim per layer. The kv library
// takes plain dimensions, not a model configuration (model -> kv -> kernels).
struct KvDims {
  int64_t n_layers = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t kv_dim() const { return n_kv_heads * head_dim; }
};

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

}  // namespace shrike::kv
