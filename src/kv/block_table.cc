#include "kv/block_table.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace shrike::kv {

bool BlockTable::ensure(BlockPool& pool, int64_t n_positions) {
  const int64_t need = (n_positions + pool.block_size() - 1) / pool.block_size();
  while (int64_t(blocks_.size()) < need) {
    const BlockId b = pool.allocate();
    if (b == kNoBlock) return false;
    blocks_.push_back(b);
  }
  return true;
}

int64_t BlockTable::attach_cached_prefix(BlockPool& pool, const int32_t* tokens, int64_t n_tokens) {
  if (!blocks_.empty())
    throw std::logic_error("BlockTable::attach_cached_prefix: the table is not empty");
  const int64_t bs = pool.block_size();
  const int64_t max_blocks = (n_tokens - 1) / bs;
  uint64_t hash = kRootHash;
  for (int64_t i = 0; i < max_blocks; ++i) {
    hash = BlockPool::chain_hash(hash, tokens + i * bs, bs);
    const BlockId b = pool.lookup(hash);
    if (b == kNoBlock) break;
    blocks_.push_back(b);
    hashes_.push_back(hash);
  }
  return int64_t(blocks_.size()) * bs;
}

void BlockTable::register_full_blocks(BlockPool& pool, const int32_t* tokens, int64_t n_computed) {
  const int64_t bs = pool.block_size();
  while (int64_t(hashes_.size() + 1) * bs <= n_computed) {
    const size_t i = hashes_.size();
    const uint64_t parent = i == 0 ? kRootHash : hashes_[i - 1];
    const uint64_t hash = BlockPool::chain_hash(parent, tokens + i * size_t(bs), bs);
    pool.register_hash(blocks_[i], hash);
    hashes_.push_back(hash);
  }
}

void BlockTable::release(BlockPool& pool) {
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) pool.release(*it);
  blocks_.clear();
  hashes_.clear();
}

Truncation BlockTable::truncate(BlockPool& pool, int64_t n_positions) {
  if (n_positions < 0)
    throw std::out_of_range("BlockTable::truncate: negative length " + std::to_string(n_positions));
  const int64_t bs = pool.block_size();
  Truncation t;
  t.kept = std::min(n_positions, capacity(pool));
  const auto keep_blocks = size_t((t.kept + bs - 1) / bs);
  while (blocks_.size() > keep_blocks) {
    pool.release(blocks_.back());
    blocks_.pop_back();
  }
  // Blocks wholly before the new end keep their content, hence their hashes.
  hashes_.resize(std::min(hashes_.size(), size_t(t.kept / bs)));
  if (t.kept % bs == 0) return t;
  // The last block is kept in part: its tail will be rewritten.
  const BlockId b = blocks_.back();
  const BlockId w = pool.make_writable(b);
  if (w == kNoBlock) {  // shared, and no block for a copy: keep whole blocks only
    pool.release(b);
    blocks_.pop_back();
    t.kept = int64_t(blocks_.size()) * bs;
    return t;
  }
  if (w != b) {
    blocks_.back() = w;
    t.copy_src = b;
    t.copy_dst = w;
  }
  return t;
}

}  // namespace shrike::kv
