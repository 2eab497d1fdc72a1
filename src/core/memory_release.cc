#include "core/memory_release.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "core/scratch_memory.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace shrike {
namespace {

using namespace std::chrono_literals;

// A trim walks every arena and holds each one's lock meanwhile, which stalls threads allocating
// there: under a stream of requests that churn memory, trimming every second nearly halved the
// throughput of distinct large constraints. So it waits for a quiet moment: no request for kQuiet.
constexpr auto kQuiet = 300ms;

class MemoryReleaser {
 public:
  MemoryReleaser() : thread_([this] { run(); }) {}

  void request() {
    const auto now = std::chrono::steady_clock::now();
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_request_ = now;
      wake = !pending_;
      pending_ = true;
    }
    if (wake) cv_.notify_all();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return pending_; });
      // Until kQuiet has passed since the latest request.
      while (std::chrono::steady_clock::now() < last_request_ + kQuiet)
        cv_.wait_until(lock, last_request_ + kQuiet);
      pending_ = false;
      lock.unlock();
      release_scratch_blocks();
#if defined(__GLIBC__)
      malloc_trim(0);
#endif
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool pending_ = false;
  std::chrono::steady_clock::time_point last_request_;
  std::thread thread_;  // last: started once the members it uses exist
};

// Never destroyed: objects destroyed at exit (a static cache's constraints) may still ask for a
// release after a function-local static would be gone. Its thread ends with the process.
MemoryReleaser& releaser() {
  static MemoryReleaser* r = new MemoryReleaser;
  return *r;
}

}  // namespace

void request_memory_release() {
  releaser().request();
}

int limit_malloc_arenas() {
#if defined(__GLIBC__)
  if (std::getenv("MALLOC_ARENA_MAX")) return 0;
  const int cap = std::max(4, 2 * int(std::thread::hardware_concurrency()));
  return mallopt(M_ARENA_MAX, cap) == 1 ? cap : 0;
#else
  return 0;
#endif
}

}  // namespace shrike
