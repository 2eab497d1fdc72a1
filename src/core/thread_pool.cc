#include "core/thread_pool.h"

#include <immintrin.h>

#include <algorithm>

#include "core/cpu_features.h"

namespace shrike {
namespace {
// About 50-100 us of spinning before a worker sleeps: long enough to bridge the gap between two
// kernels of one forward pass, short enough not to burn a core between requests.
constexpr int kSpinIterations = 4000;
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_erased(Erased fn, void* ctx) {
  if (n_threads_ == 1) {
    fn(ctx, 0, 1);
    return;
  }
  job_fn_ = fn;
  job_ctx_ = ctx;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  fn(ctx, 0, n_threads_);
  // Spin while the workers finish (the common case: microseconds); yield once it takes long,
  // which happens when there are more threads than free cores and a worker lost its CPU.
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kSpinIterations) {
      _mm_pause();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g;
    int spins = 0;
    while ((g = generation_.load(std::memory_order_acquire)) == seen) {
      if (++spins < kSpinIterations) {
        _mm_pause();
      } else if (spins < 2 * kSpinIterations) {
        std::this_thread::yield();
      } else {
        generation_.wait(seen, std::memory_order_acquire);
      }
    }
    seen = g;
    if (stop_.load()) return;
    job_fn_(job_ctx_, index, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

int default_thread_count() { return cpu_features().physical_cores; }

}  // namespace shrike
