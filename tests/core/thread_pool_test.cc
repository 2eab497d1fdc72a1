#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

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

void spin_for(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

// set_helpers: with no helpers every slot runs on the calling thread (the workers sleep, none
// claims a slot) and each still runs once; with the helpers back, the workers take part again.
TEST(ThreadPool, SetHelpersSetsWorkersAside) {
  ThreadPool pool(3);
  pool.set_helpers(0);
  const auto caller = std::this_thread::get_id();
  for (int round = 0; round < 200; ++round) {
    std::vector<std::thread::id> ran(3);
    std::atomic<int> calls{0};
    pool.run([&](int i, int n) {
      ASSERT_EQ(n, 3);
      ran[size_t(i)] = std::this_thread::get_id();
      calls.fetch_add(1);
      spin_for(std::chrono::microseconds(100));  // time for an awake worker to claim a slot
    });
    ASSERT_EQ(calls.load(), 3);
    for (const auto& id : ran) ASSERT_EQ(id, caller) << "a set-aside worker ran a slot";
  }
  pool.set_helpers(2);
  bool helped = false;
  const auto t0 = std::chrono::steady_clock::now();
  while (!helped && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
    std::atomic<bool> other{false};
    pool.run([&](int, int) {
      if (std::this_thread::get_id() != caller) other.store(true);
      spin_for(std::chrono::microseconds(200));  // a woken worker claims a slot meanwhile
    });
    helped = other.load();
  }
  EXPECT_TRUE(helped) << "no worker took part after set_helpers(2)";
}

}  // namespace
}  // namespace shrike
