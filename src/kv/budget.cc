#include "kv/budget.h"

#include <algorithm>
#include <cmath>

#include "kv/kv_storage.h"
#include "kv/mixed_precision.h"

namespace shrike::kv {

int64_t blocks_within_budget(const KvCacheOptions& opt, const KvDims& dims, const KvBudget& b) {
  const int64_t blocks_per_seq = (b.context_length + b.block_size - 1) / b.block_size;
  size_t budget = b.bytes;
  size_t per_block = KvStorage::block_bytes_for(opt.layer_formats(dims.n_layers), b.block_size,
                                                dims.n_kv_heads, dims.head_dim);
  if (opt.mixed()) {
    const double copy =  // one position's copies (and weight sums) in every int8 layer
        double(MixedPrecisionKv::copy_bytes_per_token(opt, dims));
    const double fixed = copy * double(std::max<int64_t>(1, b.max_seqs) * (opt.sinks + opt.window) +
                                       b.max_batch_tokens);
    budget = size_t(std::max(0.0, double(budget) - fixed));
    per_block += size_t(std::ceil(opt.heavy_fraction * double(b.block_size) * copy));
    per_block += size_t(b.block_size) * MixedPrecisionKv::index_bytes_per_token(opt, dims);
  }
  const int64_t n_blocks = std::min<int64_t>(std::max<int64_t>(1, b.max_seqs) * blocks_per_seq,
                                             int64_t(budget / per_block));
  return std::max(n_blocks, blocks_per_seq);
}

}  // namespace shrike::kv
