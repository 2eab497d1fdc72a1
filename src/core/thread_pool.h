// A persistent pool of worker threads for data-parallel kernels.
//
// Decode runs ~100 small parallel operations per token, so dispatch has to cost about a
// microsecond: workers spin on an atomic generation counter for a while before sleeping (C++20
// atomic wait, a futex on Linux), and the caller takes part as thread 0 instead of waiting.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace shrike {

class ThreadPool {
 public:
  // n_threads counts the caller: ThreadPool(1) starts no worker at all.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // How many workers (besides the caller) take part in run() from now on, 0 .. size() - 1; the
  // others sleep, and their slots are run by the threads that take part. A pool shares its
  // machine with another thread doing latency-bound work (a light model's engine step) this way
  // instead of spinning against it. From any thread.
  void set_helpers(int helpers);

  // Calls fn(i, n_threads) once for every i in [0, n_threads), in parallel, and returns when all
  // calls have returned. Each i is run by one thread, usually i by the i-th (the caller takes
  // part), but a thread that is slow to start (its core busy elsewhere) has its i run by another:
  // use i to split work and index scratch, never to assume which thread or that all i run at
  // once (no barriers inside fn). fn must not call run() on the same pool.
  template <typename F>
  void run(F&& fn) {
    using Fn = std::remove_reference_t<F>;
    run_erased([](void* ctx, int i, int n) { (*static_cast<Fn*>(ctx))(i, n); }, &fn);
  }

  // Splits [0, n) into one contiguous range per thread, in units of `grain` (the last range
  // takes the remainder) and calls fn(begin, end) for each non-empty range.
  template <typename F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    run([&](int i, int nt) {
      const int64_t units = (n + grain - 1) / grain;
      const int64_t b = units * i / nt * grain;
      const int64_t e = std::min<int64_t>(n, units * (i + 1) / nt * grain);
      if (b < e) fn(b, e);
    });
  }

 private:
  using Erased = void (*)(void*, int, int);
  void run_erased(Erased fn, void* ctx);
  bool claim(uint64_t generation, int& slot);
  void run_slots(uint64_t generation);
  void worker(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  Erased job_fn_ = nullptr;
  void* job_ctx_ = nullptr;
  uint64_t jobs_ = 0;                                // run() calls so far (the caller's side only)
  alignas(64) std::atomic<uint64_t> generation_{0};  // the latest job: workers wait on it
  alignas(64) std::atomic<uint64_t> ticket_{0};      // job (low 32 bits) << 32 | next slot
  alignas(64) std::atomic<int> pending_{0};          // slots of the job not finished
  std::atomic<bool> stop_{false};
  std::atomic<int> helpers_{0};  // workers 1 .. helpers_ take part in run()
};

// Threads to use when the user does not say: the number of physical cores.
int default_thread_count();

}  // namespace shrike
