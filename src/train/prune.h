// Structured pruning of a trained model: whole KV groups of attention heads (a KV head with the
// query heads that read it), FFN channels, whole layers and residual (hidden) channels, ranked by
// importance measured on calibration data. The same number is kept in every layer, so the result
// is an ordinary (smaller) Llama GGUF that any engine runs; distillation then recovers accuracy.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "train/transformer.h"

namespace shrike::train {

struct PruneOptions {
  double heads = 0;    // fraction of KV groups (with their query heads) to remove
  double ffn = 0;      // fraction of FFN channels to remove
  int64_t layers = 0;  // number of layers to remove
  double hidden = 0;   // fraction of residual-stream channels to remove
};

// Importance of every prunable unit, summed over the calibration batches.
struct Importance {
  // [layer][kv group]: sum over tokens of ||attention output of the group's heads||, each head's
  // output weighted by the norm of its columns of attn_output (what the head adds to the stream).
  std::vector<std::vector<double>> kv_groups;
  // [layer][channel]: sum over tokens of |silu(gate) * up| times the norm of the channel's
  // column of ffn_down.
  std::vector<std::vector<double>> ffn_channels;
  // [layer]: mean over tokens of 1 - cos(residual in, residual out): a block that barely turns
  // the stream matters little (ShortGPT's block influence).
  std::vector<double> layers;
  // [channel]: sum over tokens and layers of |normalised input * norm weight| at both norms.
  std::vector<double> hidden;
  int64_t tokens = 0;
};

// Runs the batches through the model (forward only) and accumulates the importances.
Importance measure_importance(Transformer<float>& model, const std::vector<TokenBatch>& batches,
                              ThreadPool& pool);

// The pruned model: the kept units of every tensor, in their original order. Throws
// std::invalid_argument when a fraction is outside [0, 1) or nothing would be left.
std::unique_ptr<Transformer<float>> prune_model(const Transformer<float>& model,
                                                const Importance& importance,
                                                const PruneOptions& opt);

// Indices of the `keep` largest scores, in increasing index order (ties: lower index first).
std::vector<int64_t> top_indices(const std::vector<double>& scores, int64_t keep);

}  // namespace shrike::train
