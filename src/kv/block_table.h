// One sequence's block table: which pool block holds each run of block_size positions
// (position p lives in blocks()[p / block_size], slot p % block_size), and the prefix-cache hashes
// of its leading full blocks. The table does the pool bookkeeping a sequence needs: growing,
// reusing cached blocks of a known prefix, registering blocks as they fill, releasing, and
// rolling back to a shorter length (rejected speculative positions).
//
// Hashes chain over the whole prefix (BlockPool::chain_hash): h_i = chain_hash(h_{i-1}, tokens of
// block i), h_{-1} = kRootHash, so the hash of block i names every token before its end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kv/block_pool.h"

namespace shrike::kv {

// What truncate() did. When the block holding the new end was shared (or cached under a hash),
// the table now holds a private copy `dst` of it, and the caller must copy the block's memory
// (KvStorage::copy_block(src, dst)) before anything writes into it.
struct Truncation {
  int64_t kept = 0;  // positions the table still covers
  BlockId copy_src = kNoBlock, copy_dst = kNoBlock;
  bool needs_copy() const { return copy_dst != kNoBlock; }
};

class BlockTable {
 public:
  const std::vector<BlockId>& blocks() const { return blocks_; }
  // Chain hashes of blocks()[0 .. hashes().size()), all full and registered in the pool.
  const std::vector<uint64_t>& hashes() const { return hashes_; }
  size_t size() const { return blocks_.size(); }
  bool empty() const { return blocks_.empty(); }

  // Positions the table can hold.
  int64_t capacity(const BlockPool& pool) const { return int64_t(size()) * pool.block_size(); }
  // Grows the table to cover positions [0, n_positions); false if the pool ran out (the blocks
  // obtained so far stay in the table).
  bool ensure(BlockPool& pool, int64_t n_positions);
  // Prefix-cache lookup for an empty table: takes the cached full blocks of tokens[0..n_tokens),
  // never the block holding the last token (its logits must be computed). Returns the positions
  // they cover.
  int64_t attach_cached_prefix(BlockPool& pool, const int32_t* tokens, int64_t n_tokens);
  // Registers the blocks that are full once the first n_computed positions of tokens are in the
  // cache.
  void register_full_blocks(BlockPool& pool, const int32_t* tokens, int64_t n_computed);
  // Gives every block back, last block first: eviction takes the least recently released, so a
  // cached prefix loses its tail before its head (a chain without its first block is useless).
  // Blocks keep their hashes in the pool, so a recomputation of the same tokens can find them.
  void release(BlockPool& pool);
  // Rollback to the first n_positions positions: whole blocks past the new end go back to the
  // pool (last first, as release()); hashes of blocks no longer full are dropped; the block
  // holding the new end, when partly kept, is made writable (BlockPool::make_writable: a shared
  // block is replaced by a copy, see Truncation; a cached one loses its hash) so that later
  // writes cannot corrupt what another sequence or the prefix cache holds. If that copy finds
  // no free block, the partial block is released too and the table keeps only whole blocks
  // (Truncation::kept says how many positions remain).
  Truncation truncate(BlockPool& pool, int64_t n_positions);

 private:
  std::vector<BlockId> blocks_;
  std::vector<uint64_t> hashes_;
};

}  // namespace shrike::kv
