#include "core/thread_pool.h"

#include <algorithm>

#include "core/cpu_features.h"

namespace shrike {
namespace {
// About 50-100 us of spinning before a worker sleeps: long enough to bridge the gap between two
// kernels of one forward pass, short enough not to burn a core between requests.
constexpr int kSpinIterations = 4000;

// One iteration of a spin-wait: tells the core we are spinning (x86 PAUSE, Arm YIELD) so it
// can give the pipeline to a sibling hyper-thread and leave the loop without a misprediction
// storm. A builtin or one instruction, so no architecture header is needed here.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield" ::: "memory");
#else
  __asm__ __volatile__("" ::: "memory");
#endif
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  helpers_.store(n_threads_ - 1);
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  helpers_.store(n_threads_);  // wakes the sleeping workers, which then see stop_
  helpers_.notify_all();
  generation_.store(++jobs_, std::memory_order_release);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

// Slots are claimed, not assigned: the caller and the workers take slot numbers from ticket_
// until none is left, so a worker that has not started yet (its core busy with another process)
// delays nothing: the caller runs that slot itself. fn(i, n) keeps its meaning (slot i of n, each
// run exactly once, on one thread at a time); only which thread runs it varies.
bool ThreadPool::claim(uint64_t generation, int& slot) {
  uint64_t t = ticket_.load(std::memory_order_acquire);
  for (;;) {
    if ((t >> 32) != (generation & 0xffffffffu) || int(t & 0xffffffffu) >= n_threads_) return false;
    if (ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      slot = int(t & 0xffffffffu);
      return true;
    }
  }
}

void ThreadPool::run_slots(uint64_t generation) {
  int slot;
  while (claim(generation, slot)) {
    job_fn_(job_ctx_, slot, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run_erased(Erased fn, void* ctx) {
  if (n_threads_ == 1) {
    fn(ctx, 0, 1);
    return;
  }
  job_fn_ = fn;  // published by the release store of ticket_, read after a claim (acquire)
  job_ctx_ = ctx;
  pending_.store(n_threads_, std::memory_order_relaxed);
  const uint64_t g = ++jobs_;
  ticket_.store((g & 0xffffffffu) << 32, std::memory_order_release);
  generation_.store(g, std::memory_order_release);
  generation_.notify_all();
  run_slots(g);
  // Spin while the workers finish the slots they took (the common case: microseconds); yield
  // once it takes long, which happens when a worker lost its CPU in the middle of a slot.
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kSpinIterations) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::set_helpers(int helpers) {
  helpers_.store(std::clamp(helpers, 0, n_threads_ - 1), std::memory_order_release);
  helpers_.notify_all();
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Asleep while the pool runs without this worker (set_helpers); its slots are claimed by the
    // threads that take part, so nothing waits for it.
    for (int h; index > (h = helpers_.load(std::memory_order_acquire)) && !stop_.load();)
      helpers_.wait(h, std::memory_order_acquire);
    uint64_t g;
    int spins = 0;
    while ((g = generation_.load(std::memory_order_acquire)) == seen) {
      if (++spins < kSpinIterations) {
        cpu_relax();
      } else if (spins < 2 * kSpinIterations) {
        std::this_thread::yield();
      } else {
        generation_.wait(seen, std::memory_order_acquire);
      }
    }
    seen = g;
    if (stop_.load()) return;
    if (index > helpers_.load(std::memory_order_acquire)) continue;
    run_slots(g);  // nothing left to claim when the caller (or another worker) was faster
  }
}

int default_thread_count() {
  return cpu_features().physical_cores;
}

}  // namespace shrike
