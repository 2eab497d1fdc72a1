// The compute threads of several engines in one process (one engine per model a server holds):
// one ThreadPool, which runs one engine step at a time. Steps take turns in arrival order (a
// ticket lock), so a model under a burst holds the cores for at most one of its steps while
// another model's step waits; a plain mutex would let the busy engine take it again and again.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "core/thread_pool.h"

namespace shrike::engine {

class SharedCompute {
 public:
  // threads: as ThreadPool (the caller of each step counts as one); 0: default_thread_count().
  explicit SharedCompute(int threads);
  SharedCompute(const SharedCompute&) = delete;
  SharedCompute& operator=(const SharedCompute&) = delete;

  // Use only while holding a turn.
  ThreadPool& pool() { return pool_; }

  // The pool is this engine's until the Turn is destroyed.
  class Turn {
   public:
    explicit Turn(SharedCompute& c);
    // Only when nobody holds or waits for the pool: `taken` says whether it was.
    Turn(SharedCompute& c, bool& taken);
    ~Turn();
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;

   private:
    SharedCompute& c_;
    bool held_ = true;
  };

  // A step an engine computes on its own thread while another holds the pool (a light model
  // during a busy one's burst): the pool sets one of its workers aside meanwhile, so the light
  // step has a core rather than sharing one with a spinning worker.
  class Solo {
   public:
    explicit Solo(SharedCompute& c);
    ~Solo();
    Solo(const Solo&) = delete;
    Solo& operator=(const Solo&) = delete;

   private:
    SharedCompute& c_;
  };

  // Turns taken by a step that had to wait for another engine's step (contention, for tests
  // and the log).
  int64_t waited_turns() const;

 private:
  ThreadPool pool_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ticket_ = 0, serving_ = 0;
  int64_t waited_ = 0;
  int solos_ = 0;  // Solo steps running now
};

}  // namespace shrike::engine
