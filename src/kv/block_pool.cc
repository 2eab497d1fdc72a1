#include "kv/block_pool.h"

#include <stdexcept>
#include <string>

#include "kv/shared_budget.h"

namespace shrike::kv {
namespace {

// splitmix64's finaliser: a bijection on 64 bits whose every output bit depends on every input
// bit, so chained hashes of different prefixes behave like independent random numbers.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

BlockPool::BlockPool(int64_t n_blocks, int64_t block_size) : block_size_(block_size) {
  if (n_blocks < 1 || block_size < 1 || n_blocks > INT32_MAX) {
    throw std::invalid_argument(
        "BlockPool: need 1 <= n_blocks <= 2^31-1 and block_size >= 1, got " +
        std::to_string(n_blocks) + " blocks of " + std::to_string(block_size));
  }
  const size_t n = size_t(n_blocks);
  refcount_.assign(n, 0);
  hash_.assign(n, 0);
  has_hash_.assign(n, 0);
  lru_pos_.resize(n);
  // A stack popped from the back: block 0 is handed out first, which keeps tests readable.
  free_.reserve(n);
  for (int64_t b = n_blocks - 1; b >= 0; --b) free_.push_back(BlockId(b));
  granted_ = n_blocks;
}

int64_t BlockPool::available_blocks() const {
  const int64_t untouched = total_blocks() - committed_;
  return int64_t(free_.size() + lru_.size()) - untouched + (granted_ - committed_);
}

int64_t BlockPool::blocks_in_use() const {
  return total_blocks() - int64_t(free_.size() + lru_.size());
}

void BlockPool::set_budget(std::shared_ptr<KvBudgetAccount> account) {
  if (committed_ > 0) throw std::logic_error("BlockPool::set_budget after the first allocation");
  return_growth();
  budget_ = std::move(account);
  granted_ = budget_ ? committed_ : total_blocks();
}

void BlockPool::reserve_growth() {
  if (!budget_) return;
  granted_ += budget_->reserve_blocks(total_blocks() - granted_);
}

void BlockPool::return_growth() {
  if (!budget_) return;
  budget_->release_blocks(granted_ - committed_);
  granted_ = committed_;
}

int64_t BlockPool::trim(int64_t keep) {
  if (!budget_) return committed_;
  int64_t to = committed_;
  while (to > keep && refcount_[size_t(to - 1)] == 0) --to;
  if (to == committed_) return committed_;
  for (BlockId b = BlockId(to); b < BlockId(committed_); ++b)
    if (has_hash_[size_t(b)]) {
      lru_.erase(lru_pos_[size_t(b)]);
      drop_hash(b);
    }
  // free_ again as the constructor leaves it: never-used blocks at the bottom, popped in id
  // order, then the used free ones in their order.
  std::vector<BlockId> used_free;
  for (BlockId b : free_)
    if (b < BlockId(to)) used_free.push_back(b);
  free_.clear();
  for (int64_t b = total_blocks() - 1; b >= to; --b) free_.push_back(BlockId(b));
  free_.insert(free_.end(), used_free.begin(), used_free.end());
  budget_->release_blocks(committed_ - to);
  granted_ -= committed_ - to;
  committed_ = to;
  return committed_;
}

BlockId BlockPool::allocate() {
  BlockId b = kNoBlock;
  // A never-used block (the top of free_ is one only when no used block is free) needs budget.
  const bool top_is_new = !free_.empty() && int64_t(free_.back()) >= committed_;
  if (!free_.empty() && (!top_is_new || committed_ < granted_)) {
    b = free_.back();
    free_.pop_back();
    if (top_is_new) ++committed_;
  } else if (!lru_.empty()) {
    b = lru_.front();
    lru_.pop_front();
    drop_hash(b);
    ++evictions_;
  } else {
    return kNoBlock;
  }
  refcount_[size_t(b)] = 1;
  return b;
}

void BlockPool::retain(BlockId b) {
  check(b);
  if (refcount_[size_t(b)] == 0) {
    throw std::logic_error("BlockPool::retain: block " + std::to_string(b) + " is not in use");
  }
  ++refcount_[size_t(b)];
}

void BlockPool::release(BlockId b) {
  check(b);
  int32_t& rc = refcount_[size_t(b)];
  if (rc == 0) {
    throw std::logic_error("BlockPool::release: block " + std::to_string(b) +
                           " is not in use (double free)");
  }
  if (--rc > 0) return;
  if (has_hash_[size_t(b)]) {
    lru_pos_[size_t(b)] = lru_.insert(lru_.end(), b);
  } else {
    free_.push_back(b);
  }
}

int32_t BlockPool::refcount(BlockId b) const {
  check(b);
  return refcount_[size_t(b)];
}

BlockId BlockPool::make_writable(BlockId b) {
  check(b);
  const int32_t rc = refcount_[size_t(b)];
  if (rc == 0) {
    throw std::logic_error("BlockPool::make_writable: block " + std::to_string(b) +
                           " is not in use");
  }
  if (rc == 1) {
    drop_hash(b);
    return b;
  }
  const BlockId copy = allocate();
  if (copy == kNoBlock) return kNoBlock;
  --refcount_[size_t(b)];  // still >= 1: the other holders keep it
  return copy;
}

uint64_t BlockPool::chain_hash(uint64_t parent, const int32_t* tokens, int64_t n) {
  // Each step is injective in the token for a fixed state (multiply-add, then a bijection), so
  // two prefixes collide only by a 2^-64 accident; the length is mixed in last so that blocks of
  // different sizes never share a hash.
  uint64_t h = mix64(parent ^ 0xD6E8FEB86659FD93ull);
  for (int64_t i = 0; i < n; ++i) {
    h = mix64(h * 0x9E3779B97F4A7C15ull + uint64_t(uint32_t(tokens[i])) + 1);
  }
  return mix64(h ^ uint64_t(n));
}

BlockId BlockPool::lookup(uint64_t hash) {
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return kNoBlock;
  const BlockId b = it->second;
  if (refcount_[size_t(b)] == 0) lru_.erase(lru_pos_[size_t(b)]);  // cached-free: revived
  ++refcount_[size_t(b)];
  return b;
}

void BlockPool::count_lookup(int64_t queried, int64_t hit) {
  if (queried < 0 || hit < 0 || hit > queried) {
    throw std::invalid_argument("BlockPool::count_lookup: need 0 <= hit <= queried, got hit " +
                                std::to_string(hit) + " of " + std::to_string(queried));
  }
  queried_ += queried;
  hit_ += hit;
}

void BlockPool::register_hash(BlockId b, uint64_t hash) {
  check(b);
  if (refcount_[size_t(b)] == 0) {
    throw std::logic_error("BlockPool::register_hash: block " + std::to_string(b) +
                           " is not in use");
  }
  if (by_hash_.count(hash)) return;  // the first block with this content stays the cached copy
  drop_hash(b);                      // a block holds one prefix; a new one replaces the old
  by_hash_.emplace(hash, b);
  hash_[size_t(b)] = hash;
  has_hash_[size_t(b)] = 1;
}

void BlockPool::clear_cache() {
  for (const BlockId b : lru_) {
    drop_hash(b);
    free_.push_back(b);
  }
  lru_.clear();
}

PoolStats BlockPool::stats() const {
  PoolStats s;
  s.blocks_total = total_blocks();
  s.blocks_in_use = blocks_in_use();
  s.blocks_cached = int64_t(lru_.size());
  s.prefix_queried_tokens = queried_;
  s.prefix_hit_tokens = hit_;
  s.evictions = evictions_;
  return s;
}

void BlockPool::check(BlockId b) const {
  if (b < 0 || int64_t(b) >= total_blocks()) {
    throw std::out_of_range("BlockPool: block id " + std::to_string(b) + " out of range [0, " +
                            std::to_string(total_blocks()) + ")");
  }
}

void BlockPool::drop_hash(BlockId b) {
  if (!has_hash_[size_t(b)]) return;
  const auto it = by_hash_.find(hash_[size_t(b)]);
  if (it != by_hash_.end() && it->second == b) by_hash_.erase(it);
  has_hash_[size_t(b)] = 0;
}

}  // namespace shrike::kv
