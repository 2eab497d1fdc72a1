// The paged KV cache's bookkeeping: a pool of fixed-size blocks (block_size token positions each),
// reference counts so that sequences can share blocks, and a prefix cache that remembers which
// block holds the keys/values of which token prefix.
//
// This file knows nothing about floats: the key/value memory itself lives in KvStorage
// (kv_storage.h), indexed by the same block ids.
//
// Prefix cache: a *full* block is identified by a hash chained over the whole prefix up to and
// including it: h_i = chain_hash(h_{i-1}, tokens of block i), h_{-1} = kRootHash. Two sequences
// whose first k blocks hold the same tokens therefore have the same k hashes, and the second can
// reuse the first's blocks instead of recomputing them. A block whose reference count drops to 0
// but that carries a hash is not freed at once: it stays findable ("cached free") and is evicted,
// least recently released first, only when allocate() finds no plain free block.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

namespace shrike::kv {

using BlockId = int32_t;
constexpr BlockId kNoBlock = -1;
constexpr uint64_t kRootHash = 0x9E3779B97F4A7C15ull;

struct PoolStats {
  int64_t blocks_total = 0;
  int64_t blocks_in_use = 0;          // reference count > 0
  int64_t blocks_cached = 0;          // reference count 0, still findable by hash
  int64_t prefix_queried_tokens = 0;  // tokens looked up in the prefix cache
  int64_t prefix_hit_tokens = 0;      // of those, tokens found
  int64_t evictions = 0;              // cached blocks reclaimed for a new allocation
};

class KvBudgetAccount;

class BlockPool {
 public:
  // Throws std::invalid_argument unless n_blocks >= 1 and block_size >= 1.
  BlockPool(int64_t n_blocks, int64_t block_size);

  int64_t block_size() const { return block_size_; }
  int64_t total_blocks() const { return int64_t(refcount_.size()); }
  // Blocks allocate() can still hand out: plain free ones plus evictable cached ones (with a
  // shared budget: of the never-used ones, only those reserved by reserve_growth()).
  int64_t available_blocks() const;
  int64_t blocks_in_use() const;

  // A shared KV memory budget (kv/shared_budget.h). Blocks are then handed out in id order and a
  // block never used before (id >= committed_blocks()) needs budget: the pool uses only what
  // reserve_growth() obtained, and return_growth() gives the unused part back. Without a budget
  // every block is available. Set before the first allocate().
  void set_budget(std::shared_ptr<KvBudgetAccount> account);
  // Reserves budget for every never-used block (as much as the budget grants): call before
  // planning with available_blocks(), which then stays exact until return_growth().
  void reserve_growth();
  void return_growth();
  // Blocks used at least once: their memory is committed.
  int64_t committed_blocks() const { return committed_; }
  // Gives committed blocks beyond the first `keep` back to the budget when none of them is in use
  // (cached ones lose their prefix), so that their memory can go to another cache (the caller
  // discards it: KvStorage::discard). Returns the new committed_blocks(); without a budget, or
  // with a block beyond `keep` in use, it stops above that block.
  int64_t trim(int64_t keep);

  // A block with reference count 1 and no hash; takes a plain free block first, else evicts the
  // least recently released cached block (dropping its hash). kNoBlock when none is available.
  BlockId allocate();
  // Reference count + 1 (the block must be in use).
  void retain(BlockId b);
  // Reference count - 1; at 0 the block becomes cached (if it has a hash) or plain free.
  // Throws std::logic_error when the block is not in use (double free).
  void release(BlockId b);
  int32_t refcount(BlockId b) const;

  // Copy-on-write: a block the caller may write into. If b is shared (refcount > 1), allocates a
  // new block, drops one reference to b and returns the new id (the caller copies the data,
  // KvStorage::copy_block); if b is exclusively held and has a hash, the hash is dropped (its
  // content is about to change) and b is returned. kNoBlock when a copy is needed but no block
  // is available (b is then untouched).
  BlockId make_writable(BlockId b);

  // Prefix cache.
  static uint64_t chain_hash(uint64_t parent, const int32_t* tokens, int64_t n);
  // The block registered under hash, retained (a cached-free block comes back into use);
  // kNoBlock if none. Does not touch the statistics (see count_lookup).
  BlockId lookup(uint64_t hash);
  // Records that a lookup of `queried` tokens found `hit` of them (prefix-cache hit rate).
  void count_lookup(int64_t queried, int64_t hit);
  // Marks a full, in-use block as holding the prefix with this hash. If another block already
  // holds that hash, nothing changes (the first one stays the cached copy).
  void register_hash(BlockId b, uint64_t hash);
  // Forgets every cached-free block (their memory becomes plain free).
  void clear_cache();

  PoolStats stats() const;

 private:
  void check(BlockId b) const;
  void drop_hash(BlockId b);

  int64_t block_size_;
  std::vector<int32_t> refcount_;
  std::vector<uint64_t> hash_;  // per block; meaningful when has_hash_
  std::vector<uint8_t> has_hash_;
  std::vector<BlockId> free_;  // plain free blocks (stack)
  std::list<BlockId> lru_;     // cached-free blocks, least recently released first
  std::vector<std::list<BlockId>::iterator> lru_pos_;  // valid while the block is in lru_
  std::unordered_map<uint64_t, BlockId> by_hash_;
  int64_t queried_ = 0, hit_ = 0, evictions_ = 0;
  // Blocks [0, committed_) have been used; untouched ones are always at the bottom of free_ (they
  // are never pushed back), so allocate() reuses a used block before it touches a new one.
  int64_t committed_ = 0;
  int64_t granted_ = 0;  // committed_ plus reserved-but-untouched blocks; total without a budget
  std::shared_ptr<KvBudgetAccount> budget_;
};

}  // namespace shrike::kv
