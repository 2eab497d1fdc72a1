// Block tables: growth, prefix reuse and registration, release, and rollback (truncate) with the
// pool's reference counts and prefix cache left consistent.
#include "kv/block_table.h"

#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>
#include <vector>

namespace shrike::kv {
namespace {

std::vector<int32_t> iota_tokens(int64_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), 100);
  return t;
}

// A table covering n positions of tokens 100.., its full blocks registered in the prefix cache.
BlockTable registered(BlockPool& pool, const std::vector<int32_t>& tokens, int64_t n) {
  BlockTable t;
  EXPECT_TRUE(t.ensure(pool, n));
  t.register_full_blocks(pool, tokens.data(), n);
  return t;
}

TEST(BlockTable, EnsureGrowsAndReleaseGivesEverythingBack) {
  BlockPool pool(4, 4);
  BlockTable t;
  EXPECT_TRUE(t.ensure(pool, 9));
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(t.capacity(pool), 12);
  EXPECT_FALSE(t.ensure(pool, 20));  // 5 blocks from a pool of 4: keeps what it got
  EXPECT_EQ(t.size(), 4u);
  t.release(pool);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST(BlockTable, FullBlocksAreRegisteredAndFoundByTheSamePrefix) {
  BlockPool pool(8, 4);
  const auto tokens = iota_tokens(10);
  BlockTable a = registered(pool, tokens, 10);
  EXPECT_EQ(a.hashes().size(), 2u);  // positions 0..7; the third block is partial
  BlockTable b;
  // Never the block holding the last token: 9 tokens find 2 blocks, 8 tokens only 1.
  EXPECT_EQ(b.attach_cached_prefix(pool, tokens.data(), 9), 8);
  EXPECT_EQ(b.blocks(), std::vector<BlockId>(a.blocks().begin(), a.blocks().begin() + 2));
  EXPECT_EQ(b.hashes(), a.hashes());
  EXPECT_EQ(pool.refcount(a.blocks()[0]), 2);
  EXPECT_THROW(b.attach_cached_prefix(pool, tokens.data(), 9), std::logic_error);
  BlockTable c;
  EXPECT_EQ(c.attach_cached_prefix(pool, tokens.data(), 8), 4);
  for (BlockTable* t : {&a, &b, &c}) t->release(pool);
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST(BlockTable, TruncateReleasesWholeBlocksPastTheEnd) {
  BlockPool pool(8, 4);
  const auto tokens = iota_tokens(14);
  BlockTable t = registered(pool, tokens, 14);
  ASSERT_EQ(t.hashes().size(), 3u);
  const Truncation r = t.truncate(pool, 8);  // a block boundary: nothing to make writable
  EXPECT_EQ(r.kept, 8);
  EXPECT_FALSE(r.needs_copy());
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.hashes().size(), 2u);
  EXPECT_EQ(pool.blocks_in_use(), 2);
  EXPECT_EQ(pool.stats().blocks_cached, 1);  // the full third block stays findable
  EXPECT_EQ(t.truncate(pool, 100).kept, 8);  // longer than the table: unchanged
  EXPECT_EQ(t.size(), 2u);
  EXPECT_THROW(t.truncate(pool, -1), std::out_of_range);
  t.release(pool);
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST(BlockTable, TruncateIntoASharedBlockHandsBackAPrivateCopy) {
  BlockPool pool(8, 4);
  const auto tokens = iota_tokens(12);
  BlockTable a = registered(pool, tokens, 12), b;
  ASSERT_EQ(b.attach_cached_prefix(pool, tokens.data(), 12), 8);
  const BlockId shared = a.blocks()[1];
  const Truncation r = b.truncate(pool, 6);  // positions 4, 5 of the shared block are kept
  EXPECT_EQ(r.kept, 6);
  ASSERT_TRUE(r.needs_copy());
  EXPECT_EQ(r.copy_src, shared);
  EXPECT_EQ(b.blocks()[1], r.copy_dst);
  EXPECT_NE(r.copy_dst, shared);
  EXPECT_EQ(b.blocks()[0], a.blocks()[0]);  // the whole block before stays shared
  EXPECT_EQ(b.hashes().size(), 1u);
  EXPECT_EQ(pool.refcount(shared), 1);  // only a holds it now, and it is still cached
  BlockTable c;
  EXPECT_EQ(c.attach_cached_prefix(pool, tokens.data(), 12), 8);
  for (BlockTable* t : {&a, &b, &c}) t->release(pool);
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST(BlockTable, TruncateIntoAnExclusiveCachedBlockDropsItsHash) {
  BlockPool pool(8, 4);
  const auto tokens = iota_tokens(9);
  BlockTable a = registered(pool, tokens, 9);
  const BlockId second = a.blocks()[1];
  const Truncation r = a.truncate(pool, 5);
  EXPECT_FALSE(r.needs_copy());  // written in place: nobody else reads it
  EXPECT_EQ(a.blocks()[1], second);
  EXPECT_EQ(a.hashes().size(), 1u);
  // Its old prefix is no longer findable: the block's tail is about to change.
  BlockTable b;
  EXPECT_EQ(b.attach_cached_prefix(pool, tokens.data(), 9), 4);
  a.release(pool);
  b.release(pool);
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST(BlockTable, TruncateWithoutRoomForTheCopyKeepsWholeBlocks) {
  BlockPool pool(3, 4);
  const auto tokens = iota_tokens(9);
  BlockTable a = registered(pool, tokens, 9), b;
  ASSERT_EQ(b.attach_cached_prefix(pool, tokens.data(), 9), 8);
  ASSERT_EQ(pool.available_blocks(), 0);
  const Truncation r = b.truncate(pool, 6);
  EXPECT_EQ(r.kept, 4);  // positions 4, 5 must be recomputed
  EXPECT_FALSE(r.needs_copy());
  EXPECT_EQ(b.size(), 1u);
  EXPECT_EQ(pool.refcount(a.blocks()[1]), 1);
  a.release(pool);
  b.release(pool);
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

}  // namespace
}  // namespace shrike::kv
