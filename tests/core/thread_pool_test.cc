#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "core/thread_pool.h"

namespace shrike {
namespace {

TEST(ThreadPool, RunCallsEveryThreadOnceWithItsIndex) {
  for (int n : {1, 2, 3, 5}) {
    ThreadPool pool(n);
    for (int round = 0; round < 200; ++round) {
      std::vector<std::atomic<int>> calls(static_cast<size_t>(n));
      pool.run([&](int i, int nt) {
        ASSERT_EQ(nt, n);
        calls[size_t(i)].fetch_add(1);
      });
      for (auto& c : calls) ASSERT_EQ(c.load(), 1);
    }
  }
}

TEST(ThreadPool, ParallelForCoversTheRangeExactlyOnceInGrainUnits) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 7, 64, 1000, 1001}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, 16, [&](int64_t b, int64_t e) {
      EXPECT_EQ(b % 16, 0);
      for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, WorkersWakeAfterSleeping) {
  ThreadPool pool(2);
  std::atomic<int> sum{0};
  pool.run([&](int i, int) { sum += i + 1; });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // past the spin phase
  pool.run([&](int i, int) { sum += i + 1; });
  EXPECT_EQ(sum.load(), 6);
}

// More threads than cores: workers are often not running when a job starts, and their slots are
// then taken by whoever is (ThreadPool::claim). Every slot must still run exactly once per job,
// with its own index, and jobs must not bleed into each other.
TEST(ThreadPool, EverySlotRunsOnceWhenThreadsOutnumberCores) {
  ThreadPool pool(12);
  std::vector<std::atomic<int>> calls(12);
  std::atomic<int64_t> slot_sum{0};
  for (int job = 0; job < 3000; ++job) {
    pool.run([&](int i, int nt) {
      ASSERT_EQ(nt, 12);
      calls[size_t(i)].fetch_add(1, std::memory_order_relaxed);
      slot_sum.fetch_add(int64_t(job) * 100 + i, std::memory_order_relaxed);
    });
    for (auto& c : calls) ASSERT_EQ(c.exchange(0), 1) << "job " << job;
    ASSERT_EQ(slot_sum.exchange(0), int64_t(job) * 1200 + 66) << "job " << job;
  }
}

}  // namespace
}  // namespace shrike
