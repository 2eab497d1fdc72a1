// One KV memory budget shared by several block pools (kv/shared_budget.h): minimums are
// guaranteed, the claimed total never passes the budget (also with pools growing and shrinking
// on several threads), a pool uses only what it reserved and reuses used blocks first, and a
// lazily committed KvStorage takes memory only for the blocks written.
#include "kv/shared_budget.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_storage.h"

namespace shrike::kv {
namespace {

TEST(KvMemoryLedger, MinimumsAreGuaranteedAndTheTotalHolds) {
  KvMemoryLedger ledger(1000);
  const int a = ledger.add_member("a", 300), b = ledger.add_member("b", 200);
  EXPECT_EQ(ledger.claimed_bytes(), 500u);
  // a may take its own 300 plus the unclaimed 500, in units of 100.
  EXPECT_EQ(ledger.headroom(a), 800u);
  EXPECT_EQ(ledger.reserve(a, 10000, 100), 800u);
  EXPECT_EQ(ledger.claimed_bytes(), 1000u);
  // b's minimum stays b's.
  EXPECT_EQ(ledger.headroom(b), 200u);
  EXPECT_EQ(ledger.reserve(b, 250, 100), 200u);
  EXPECT_EQ(ledger.reserve(b, 100, 100), 0u);
  EXPECT_EQ(ledger.reserve(a, 100, 100), 0u);
  // A third member's minimum is a promise the budget can no longer keep.
  EXPECT_THROW(ledger.add_member("c", 100), std::invalid_argument);
  ledger.release(a, 500);  // a is back at its minimum
  EXPECT_EQ(ledger.claimed_bytes(), 500u);
  const int c = ledger.add_member("c", 300);
  EXPECT_EQ(ledger.claimed_bytes(), 800u);
  EXPECT_EQ(ledger.reserve(a, 100, 100), 100u);
  EXPECT_EQ(ledger.reserve(c, 1000, 100), 400u);  // its own 300 and the last unclaimed 100
  EXPECT_EQ(ledger.claimed_bytes(), 1000u);
  EXPECT_THROW(ledger.release(b, 300), std::logic_error);  // more than b holds
  ledger.remove_member(a);
  EXPECT_EQ(ledger.claimed_bytes(), 600u);
  EXPECT_EQ(ledger.peak_claimed_bytes(), 1000u);
  EXPECT_THROW(KvMemoryLedger(0), std::invalid_argument);
}

TEST(BlockPoolBudget, UsesOnlyReservedBlocksAndReusesUsedOnesFirst) {
  auto ledger = std::make_shared<KvMemoryLedger>(10 * 64);
  auto account = std::make_shared<KvBudgetAccount>(ledger, "p", 2 * 64, 64);
  auto other = std::make_shared<KvBudgetAccount>(ledger, "q", 3 * 64, 64);
  BlockPool pool(100, 16);
  pool.set_budget(account);
  // Nothing reserved: nothing available.
  EXPECT_EQ(pool.available_blocks(), 0);
  EXPECT_EQ(pool.allocate(), kNoBlock);
  pool.reserve_growth();  // its 2 + the unclaimed 5 (q keeps its 3)
  EXPECT_EQ(pool.available_blocks(), 7);
  std::vector<BlockId> got;
  for (int i = 0; i < 7; ++i) got.push_back(pool.allocate());
  EXPECT_EQ(got, (std::vector<BlockId>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(pool.allocate(), kNoBlock);
  EXPECT_EQ(pool.committed_blocks(), 7);
  pool.return_growth();
  EXPECT_EQ(ledger->claimed_bytes(), 10u * 64);
  EXPECT_EQ(other->reserve_blocks(5), 3);  // q's minimum is still there
  // Freed blocks come back before any new one, and need no budget.
  pool.release(got[3]);
  pool.release(got[5]);
  EXPECT_EQ(pool.available_blocks(), 2);
  EXPECT_EQ(pool.allocate(), got[5]);
  EXPECT_EQ(pool.allocate(), got[3]);
  EXPECT_EQ(pool.committed_blocks(), 7);
  // Reserved but unused blocks go back.
  for (BlockId b : got) pool.release(b);
  other->release_blocks(3);
  pool.reserve_growth();
  EXPECT_EQ(pool.available_blocks(), 7);  // all of q's minimum stays q's
  pool.return_growth();
  EXPECT_EQ(ledger->claimed_bytes(), 7u * 64 + 3 * 64);
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

// An idle pool gives back what it committed beyond what it keeps; cached blocks there lose their
// prefix, blocks in use stop the trim above them, and ids are handed out in order again.
TEST(BlockPoolBudget, TrimGivesCommittedBlocksBack) {
  auto ledger = std::make_shared<KvMemoryLedger>(10 * 64);
  auto account = std::make_shared<KvBudgetAccount>(ledger, "p", 2 * 64, 64);
  BlockPool pool(100, 16);
  pool.set_budget(account);
  pool.reserve_growth();
  std::vector<BlockId> got;
  for (int i = 0; i < 6; ++i) got.push_back(pool.allocate());
  pool.return_growth();
  pool.register_hash(got[4], 42);
  for (BlockId b : {0, 1, 2, 3, 4}) pool.release(b);  // block 5 stays in use
  EXPECT_EQ(pool.trim(2), 6);                         // nothing above 5 is free
  EXPECT_EQ(ledger->committed_bytes(), 6u * 64);
  pool.release(5);
  EXPECT_EQ(pool.trim(2), 2);
  EXPECT_EQ(ledger->committed_bytes(), 2u * 64);
  EXPECT_EQ(pool.lookup(42), kNoBlock);  // its prefix went with it
  EXPECT_EQ(pool.stats().blocks_cached, 0);
  pool.reserve_growth();
  EXPECT_EQ(pool.available_blocks(), 10);
  std::vector<BlockId> again;
  for (int i = 0; i < 4; ++i) again.push_back(pool.allocate());
  EXPECT_EQ(again, (std::vector<BlockId>{1, 0, 2, 3}));  // used ones first, then new in order
  pool.return_growth();
}

// Four pools on four threads, each allocating and freeing at random with a reservation per
// "step": the claimed total never passes the budget, and every pool can always reach its minimum.
TEST(BlockPoolBudget, ConcurrentPoolsNeverPassTheBudget) {
  constexpr size_t kBlock = 1024, kBudget = 200 * kBlock;
  auto ledger = std::make_shared<KvMemoryLedger>(kBudget);
  std::atomic<int> below_minimum{0};
  // Every member joins first: a minimum is promised only out of what nobody has claimed yet.
  std::vector<std::shared_ptr<KvBudgetAccount>> accounts;
  for (int t = 0; t < 4; ++t)
    accounts.push_back(
        std::make_shared<KvBudgetAccount>(ledger, "p" + std::to_string(t), 20 * kBlock, kBlock));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::shared_ptr<KvBudgetAccount> account = std::move(accounts[size_t(t)]);
      BlockPool pool(400, 16);
      pool.set_budget(account);
      std::mt19937 rng{unsigned(t)};
      std::vector<BlockId> held;
      for (int step = 0; step < 3000; ++step) {
        pool.reserve_growth();
        // Whatever else happens, a pool holding fewer than its minimum can always grow.
        if (int64_t(held.size()) < 20 && pool.available_blocks() < 1) below_minimum.fetch_add(1);
        const int want = int(rng() % 8);
        for (int i = 0; i < want; ++i) {
          const BlockId b = pool.allocate();
          if (b == kNoBlock) break;
          held.push_back(b);
        }
        pool.return_growth();
        const int drop = int(rng() % 9);
        for (int i = 0; i < drop && !held.empty(); ++i) {
          pool.release(held.back());
          held.pop_back();
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_LE(ledger->peak_claimed_bytes(), kBudget);
  EXPECT_GT(ledger->peak_claimed_bytes(), kBudget / 2);  // the test did press on the budget
  EXPECT_EQ(below_minimum.load(), 0);
  EXPECT_EQ(ledger->claimed_bytes(), 0u);  // every account is gone
}

// Resident pages (mincore) of a range.
size_t resident_bytes(const void* p, size_t n) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = uintptr_t(p) / page * page;
  const size_t pages = (uintptr_t(p) + n - begin + page - 1) / page;
  std::vector<unsigned char> v(pages);
  if (mincore(reinterpret_cast<void*>(begin), pages * page, v.data()) != 0) return SIZE_MAX;
  size_t r = 0;
  for (unsigned char c : v) r += (c & 1) ? page : 0;
  return r;
}

TEST(KvStorageCommit, LazyStorageIsZeroAndResidentOnlyWhereWritten) {
  // 1 layer, 4096 blocks of 16 positions x 2 heads x 64 dims f32: 8 KiB per block of K.
  KvStorage s(1, 4096, 16, 2, 64, {KvFormat::F32}, KvStorage::Commit::Lazily);
  const size_t block = s.layer_block_bytes(0);
  const size_t all = block * 4096;
  EXPECT_LT(resident_bytes(s.keys(0, 0), all), 16 * block);
  for (int i = 0; i < 16 * 2 * 64; i += 97) EXPECT_EQ(s.keys(0, 100)[i], 0.0f);  // reads as zero
  std::vector<float> k(2 * 64, 1.5f), v(2 * 64, -2.0f);
  for (BlockId b = 0; b < 10; ++b) s.store(0, b, 3, k.data(), v.data());
  const size_t resident = resident_bytes(s.keys(0, 0), all);
  EXPECT_GE(resident, 10 * block / 2);  // the written rows' pages at least
  EXPECT_LE(resident, 10 * block + 2 * size_t(sysconf(_SC_PAGESIZE)) + 16 * block);
  EXPECT_EQ(s.keys(0, 9)[3 * 64], 1.5f);
  // Discarded blocks read as zero again and leave memory.
  s.discard(0, 4096);
  EXPECT_LT(resident_bytes(s.keys(0, 0), all), 2 * size_t(sysconf(_SC_PAGESIZE)) + block);
  EXPECT_EQ(s.keys(0, 9)[3 * 64], 0.0f);
  // Commit::Now is resident from the start.
  KvStorage now(1, 256, 16, 2, 64, std::vector<KvFormat>{KvFormat::F32}, KvStorage::Commit::Now);
  EXPECT_GE(resident_bytes(now.keys(0, 0), block * 256), block * 256 / 2);
}

}  // namespace
}  // namespace shrike::kv
