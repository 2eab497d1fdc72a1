// How many KV blocks a serving engine can afford: enough for max_seqs sequences of the full
// context, capped by a byte budget, and never fewer than one sequence of the full context needs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kv/kv_cache.h"

namespace shrike::kv {

struct KvBudget {
  size_t bytes = 0;              // for the blocks and, with int8-mixed, the policy's state
  int64_t block_size = 16;       // positions per block
  int64_t context_length = 0;    // positions per sequence
  int64_t max_seqs = 1;          // sequences running at once
  int64_t max_batch_tokens = 0;  // tokens computed per step
};

// With int8-mixed the policy's state counts against the bytes too, at its bound: f16 copies (with
// their weight sums) of the sinks and window of every running sequence, of a prefill step's
// positions (in f16 until their sequence's logits call decides) and of heavy_fraction of every
// block's positions, plus a slot index per position.
int64_t blocks_within_budget(const KvCacheOptions& opt, const KvDims& dims, const KvBudget& b);

}  // namespace shrike::kv
