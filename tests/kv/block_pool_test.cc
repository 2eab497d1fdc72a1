#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <stdexcept>
#include <unordered_set>
#include <vector>

namespace shrike::kv {
namespace {

uint64_t hash_of(std::vector<int32_t> tokens, uint64_t parent = kRootHash) {
  return BlockPool::chain_hash(parent, tokens.data(), int64_t(tokens.size()));
}

TEST(BlockPool, RejectsEmptyPoolsAndBadIds) {
  EXPECT_THROW(BlockPool(0, 16), std::invalid_argument);
  EXPECT_THROW(BlockPool(4, 0), std::invalid_argument);
  BlockPool pool(4, 16);
  EXPECT_THROW(pool.refcount(-1), std::out_of_range);
  EXPECT_THROW(pool.refcount(4), std::out_of_range);
  EXPECT_THROW(pool.release(7), std::out_of_range);
  EXPECT_THROW(pool.retain(-3), std::out_of_range);
  EXPECT_THROW(pool.count_lookup(4, 5), std::invalid_argument);
}

TEST(BlockPool, AllocatesEveryBlockOnceThenNothing) {
  BlockPool pool(5, 16);
  EXPECT_EQ(pool.total_blocks(), 5);
  EXPECT_EQ(pool.block_size(), 16);
  std::set<BlockId> got;
  for (int i = 0; i < 5; ++i) {
    const BlockId b = pool.allocate();
    ASSERT_NE(b, kNoBlock);
    EXPECT_EQ(pool.refcount(b), 1);
    got.insert(b);
    EXPECT_EQ(pool.available_blocks(), 4 - i);
    EXPECT_EQ(pool.blocks_in_use(), i + 1);
  }
  EXPECT_EQ(got.size(), 5u);
  EXPECT_EQ(*got.begin(), 0);
  EXPECT_EQ(*got.rbegin(), 4);
  EXPECT_EQ(pool.allocate(), kNoBlock);
  for (const BlockId b : got) pool.release(b);
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST(BlockPool, ReleasedBlocksAreReused) {
  BlockPool pool(2, 4);
  const BlockId a = pool.allocate();
  const BlockId b = pool.allocate();
  ASSERT_EQ(pool.allocate(), kNoBlock);
  pool.release(a);
  EXPECT_EQ(pool.available_blocks(), 1);
  EXPECT_EQ(pool.allocate(), a);
  EXPECT_EQ(pool.refcount(a), 1);
  pool.release(a);
  pool.release(b);
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST(BlockPool, RefcountsAndDoubleFree) {
  BlockPool pool(3, 4);
  const BlockId b = pool.allocate();
  pool.retain(b);
  pool.retain(b);
  EXPECT_EQ(pool.refcount(b), 3);
  pool.release(b);
  pool.release(b);
  EXPECT_EQ(pool.refcount(b), 1);
  EXPECT_EQ(pool.blocks_in_use(), 1);
  pool.release(b);
  EXPECT_EQ(pool.refcount(b), 0);
  EXPECT_EQ(pool.blocks_in_use(), 0);
  EXPECT_THROW(pool.release(b), std::logic_error);
  EXPECT_THROW(pool.retain(b), std::logic_error);
  // The failed calls changed nothing.
  EXPECT_EQ(pool.available_blocks(), 3);
  EXPECT_THROW(pool.release(2), std::logic_error);  // never allocated
}

TEST(BlockPool, MakeWritableCopiesASharedBlock) {
  BlockPool pool(3, 4);
  const BlockId b = pool.allocate();
  pool.retain(b);  // two holders
  const BlockId w = pool.make_writable(b);
  ASSERT_NE(w, kNoBlock);
  EXPECT_NE(w, b);
  EXPECT_EQ(pool.refcount(b), 1);
  EXPECT_EQ(pool.refcount(w), 1);
  EXPECT_EQ(pool.blocks_in_use(), 2);
  pool.release(b);
  pool.release(w);
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST(BlockPool, MakeWritableOfAnExclusiveHashedBlockDropsTheHash) {
  BlockPool pool(3, 4);
  const BlockId b = pool.allocate();
  const uint64_t h = hash_of({1, 2, 3, 4});
  pool.register_hash(b, h);
  EXPECT_EQ(pool.make_writable(b), b);
  EXPECT_EQ(pool.refcount(b), 1);
  pool.release(b);
  // No longer findable, and free rather than cached.
  EXPECT_EQ(pool.lookup(h), kNoBlock);
  EXPECT_EQ(pool.stats().blocks_cached, 0);
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST(BlockPool, MakeWritableWithoutRoomLeavesTheBlockAlone) {
  BlockPool pool(1, 4);
  const BlockId b = pool.allocate();
  pool.retain(b);
  EXPECT_EQ(pool.make_writable(b), kNoBlock);
  EXPECT_EQ(pool.refcount(b), 2);
  pool.release(b);
  pool.release(b);
  EXPECT_THROW(pool.make_writable(b), std::logic_error);
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST(BlockPool, ReleasedHashedBlockStaysCachedUntilLookedUp) {
  BlockPool pool(4, 4);
  const BlockId b = pool.allocate();
  const uint64_t h = hash_of({5, 6, 7, 8});
  pool.register_hash(b, h);
  EXPECT_EQ(pool.lookup(h), b);  // an in-use block is shared
  EXPECT_EQ(pool.refcount(b), 2);
  pool.release(b);
  pool.release(b);
  EXPECT_EQ(pool.refcount(b), 0);
  EXPECT_EQ(pool.blocks_in_use(), 0);
  EXPECT_EQ(pool.available_blocks(), 4);  // cached blocks count as available
  EXPECT_EQ(pool.stats().blocks_cached, 1);

  EXPECT_EQ(pool.lookup(h), b);  // revived
  EXPECT_EQ(pool.refcount(b), 1);
  EXPECT_EQ(pool.stats().blocks_cached, 0);
  EXPECT_EQ(pool.available_blocks(), 3);
  EXPECT_EQ(pool.lookup(hash_of({5, 6, 7, 9})), kNoBlock);
  pool.release(b);
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST(BlockPool, PlainFreeBlocksGoFirstThenLeastRecentlyReleasedCachedOnes) {
  BlockPool pool(4, 2);
  std::vector<BlockId> b(4);
  std::vector<uint64_t> h(4);
  for (int i = 0; i < 4; ++i) {
    b[size_t(i)] = pool.allocate();
    h[size_t(i)] = hash_of({i, i + 100});
  }
  // Three cached, released in the order 2, 0, 1; block 3 is released without a hash.
  for (int i : {0, 1, 2}) pool.register_hash(b[size_t(i)], h[size_t(i)]);
  pool.release(b[2]);
  pool.release(b[0]);
  pool.release(b[1]);
  pool.release(b[3]);
  EXPECT_EQ(pool.available_blocks(), 4);
  EXPECT_EQ(pool.stats().blocks_cached, 3);

  EXPECT_EQ(pool.allocate(), b[3]);  // the plain free block, no eviction
  EXPECT_EQ(pool.stats().evictions, 0);
  EXPECT_EQ(pool.allocate(), b[2]);  // least recently released
  EXPECT_EQ(pool.stats().evictions, 1);
  EXPECT_EQ(pool.lookup(h[2]), kNoBlock);  // its hash is forgotten
  EXPECT_EQ(pool.lookup(h[1]), b[1]);      // still cached, now in use again
  EXPECT_EQ(pool.allocate(), b[0]);
  EXPECT_EQ(pool.allocate(), kNoBlock);
  EXPECT_EQ(pool.stats().evictions, 2);
  // An evicted block comes out with no hash: releasing it makes it plain free.
  pool.release(b[0]);
  EXPECT_EQ(pool.stats().blocks_cached, 0);
  for (const BlockId x : {b[1], b[2], b[3]}) pool.release(x);
  EXPECT_EQ(pool.stats().blocks_cached, 1);  // b[1] kept its hash
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST(BlockPool, RevivedBlockIsReleasedToTheBackOfTheQueue) {
  BlockPool pool(2, 2);
  const BlockId a = pool.allocate();
  const BlockId b = pool.allocate();
  pool.register_hash(a, 11);
  pool.register_hash(b, 22);
  pool.release(a);
  pool.release(b);
  ASSERT_EQ(pool.lookup(11), a);  // a was least recent; using it again makes it most recent
  pool.release(a);
  EXPECT_EQ(pool.allocate(), b);
  EXPECT_EQ(pool.lookup(11), a);
  pool.release(a);
  pool.release(b);
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST(BlockPool, DuplicateHashKeepsTheFirstBlock) {
  BlockPool pool(3, 2);
  const BlockId a = pool.allocate();
  const BlockId b = pool.allocate();
  pool.register_hash(a, 42);
  pool.register_hash(b, 42);
  pool.release(b);  // no hash: plain free
  EXPECT_EQ(pool.stats().blocks_cached, 0);
  EXPECT_EQ(pool.lookup(42), a);
  EXPECT_EQ(pool.refcount(a), 2);
  pool.release(a);
  pool.release(a);
  EXPECT_EQ(pool.stats().blocks_cached, 1);
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST(BlockPool, RegisterRequiresABlockInUse) {
  BlockPool pool(2, 2);
  EXPECT_THROW(pool.register_hash(0, 1), std::logic_error);
  EXPECT_THROW(pool.register_hash(9, 1), std::out_of_range);
}

TEST(BlockPool, StatsCountLookupsAndBlocks) {
  BlockPool pool(4, 16);
  pool.count_lookup(100, 32);
  pool.count_lookup(50, 0);
  const BlockId a = pool.allocate();
  const BlockId b = pool.allocate();
  pool.register_hash(a, 1);
  pool.release(a);
  const PoolStats s = pool.stats();
  EXPECT_EQ(s.blocks_total, 4);
  EXPECT_EQ(s.blocks_in_use, 1);
  EXPECT_EQ(s.blocks_cached, 1);
  EXPECT_EQ(s.prefix_queried_tokens, 150);
  EXPECT_EQ(s.prefix_hit_tokens, 32);
  EXPECT_EQ(s.evictions, 0);
  pool.release(b);
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST(BlockPool, ClearCacheForgetsCachedBlocksButNotOnesInUse) {
  BlockPool pool(3, 2);
  const BlockId a = pool.allocate();
  const BlockId b = pool.allocate();
  pool.register_hash(a, 1);
  pool.register_hash(b, 2);
  pool.release(a);
  pool.clear_cache();
  EXPECT_EQ(pool.stats().blocks_cached, 0);
  EXPECT_EQ(pool.available_blocks(), 2);
  EXPECT_EQ(pool.lookup(1), kNoBlock);
  EXPECT_EQ(pool.lookup(2), b);
  pool.release(b);
  pool.release(b);
  EXPECT_EQ(pool.stats().blocks_cached, 1);
  // The cleared block is plain free now: it and the never-used one go before the cached one.
  const BlockId x = pool.allocate();
  const BlockId y = pool.allocate();
  EXPECT_EQ(std::set<BlockId>({x, y}), std::set<BlockId>({a, 2}));
  EXPECT_EQ(pool.stats().evictions, 0);
  EXPECT_EQ(pool.lookup(2), b);
  pool.release(x);
  pool.release(y);
  pool.release(b);
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST(BlockPool, ChainHashDependsOnParentTokensOrderAndLength) {
  const uint64_t h = hash_of({1, 2, 3, 4});
  EXPECT_EQ(h, hash_of({1, 2, 3, 4}));
  EXPECT_NE(h, hash_of({1, 2, 4, 3}));
  EXPECT_NE(h, hash_of({1, 2, 3, 5}));
  EXPECT_NE(h, hash_of({1, 2, 3}));
  EXPECT_NE(h, hash_of({1, 2, 3, 4, 0}));
  EXPECT_NE(h, hash_of({1, 2, 3, 4}, h));
  EXPECT_NE(hash_of({0}), hash_of({-1}));
  EXPECT_NE(hash_of({}), hash_of({}, 1));
}

TEST(BlockPool, ChainHashesOfManyPrefixesDoNotCollide) {
  // Every single-token change of a long sequence, at every block of a 64-block chain, gives new
  // hashes; 65k near-identical prefixes is where a weak mix would collide.
  constexpr int64_t kBlock = 16, kBlocks = 64;
  std::vector<int32_t> tokens(size_t(kBlock * kBlocks));
  std::iota(tokens.begin(), tokens.end(), 0);
  std::unordered_set<uint64_t> seen;
  size_t n_hashes = 0;
  for (int32_t delta : {0, 1, 1 << 16, -1}) {
    for (int64_t changed = 0; changed < int64_t(tokens.size());
         changed += delta == 0 ? 1 << 30 : 7) {
      std::vector<int32_t> t = tokens;
      t[size_t(changed)] += delta;
      uint64_t h = kRootHash;
      for (int64_t i = 0; i < kBlocks; ++i) {
        h = BlockPool::chain_hash(h, t.data() + i * kBlock, kBlock);
        // Blocks before the changed one repeat the unchanged chain; count each hash once.
        if (delta == 0 || i >= changed / kBlock) {
          seen.insert(h);
          ++n_hashes;
        }
      }
    }
  }
  EXPECT_GT(n_hashes, 10000u);
  EXPECT_EQ(seen.size(), n_hashes);
  // Low bits spread too (hash tables index by them).
  std::set<uint64_t> low;
  for (const uint64_t h : seen) low.insert(h & 0xFFF);
  EXPECT_GT(low.size(), 3500u);
}

TEST(BlockPool, ChainHashesOfAllSmallBlocksDiffer) {
  // Every block of two tokens below 300, under two parents: a linear mix (h * k + t) would make
  // many of these collide.
  std::unordered_set<uint64_t> seen;
  for (const uint64_t parent : {kRootHash, uint64_t(1)}) {
    for (int32_t a = 0; a < 300; ++a) {
      for (int32_t b = 0; b < 300; ++b) {
        const int32_t t[2] = {a, b};
        seen.insert(BlockPool::chain_hash(parent, t, 2));
      }
    }
  }
  EXPECT_EQ(seen.size(), 2u * 300 * 300);
}

}  // namespace
}  // namespace shrike::kv
