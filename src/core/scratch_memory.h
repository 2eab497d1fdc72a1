// Memory for a burst of short-lived allocations that all end together (compiling a constraint:
// NFA states and their edges, the subset construction's sets and maps), taken from mmap in
// growing blocks and unmapped at once when the ScratchMemory dies. None of it passes through
// malloc, whose arenas would keep each burst's peak resident: a server compiling 1,000 large
// distinct schemas on 8 threads kept ~1.2x its memory before them (docs/RESULTS.md, "Memory
// after large constraint requests").
// Monotonic: deallocations are no-ops, for work that allocates about what it holds (an NFA's
// states). Pooled: freed blocks are reused (per size), for work that allocates and frees much
// more than it holds at once (the subset construction).
//
// Under a sanitizer every allocation goes to operator new instead, so AddressSanitizer still
// checks each one's bounds.
#pragma once

#include <memory_resource>
#include <optional>

namespace shrike {

class ScratchMemory {
 public:
  enum class Kind { Monotonic, Pooled };
  explicit ScratchMemory(Kind kind);
  ScratchMemory(const ScratchMemory&) = delete;
  ScratchMemory& operator=(const ScratchMemory&) = delete;

  std::pmr::memory_resource* resource() { return resource_; }

 private:
  std::optional<std::pmr::monotonic_buffer_resource> monotonic_;  // on mapped pages
  std::optional<std::pmr::unsynchronized_pool_resource> pooled_;  // Pooled: on monotonic_
  std::pmr::memory_resource* resource_;
};

// Unmaps the blocks kept for reuse (core/memory_release.h calls it once requests are quiet).
void release_scratch_blocks();

}  // namespace shrike
