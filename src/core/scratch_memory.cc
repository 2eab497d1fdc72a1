#include "core/scratch_memory.h"

#include <sys/mman.h>

#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "core/memory_release.h"
#include "core/sanitizers.h"

namespace shrike {
namespace {

// Blocks of whole pages from the kernel. A freed block is kept for the next scratch (mapping and
// unmapping each time contends for the process's address-space lock across threads: 2.4x the
// time of 1,000 compiles on 8 threads) and unmapped by release_scratch_blocks once requests are
// quiet (core/memory_release.h).
class MappedBlocks final : public std::pmr::memory_resource {
 public:
  void release() {
    std::map<size_t, std::vector<void*>> blocks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      blocks.swap(free_);
      cached_ = 0;
    }
    for (const auto& [size, list] : blocks)
      for (void* p : list) munmap(p, size);
  }

 private:
  // Sizes rounded up to a power of two from 64 KiB, so blocks of one scratch fit the next.
  static size_t rounded(size_t bytes) {
    size_t size = size_t(64) << 10;
    while (size < bytes) size <<= 1;
    return size;
  }
  void* do_allocate(size_t bytes, size_t) override {
    const size_t size = rounded(bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = free_.find(size); it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= size;
        return p;
      }
    }
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return p;
  }
  void do_deallocate(void* p, size_t bytes, size_t) override {
    const size_t size = rounded(bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_ + size <= kMaxCached) {
        free_[size].push_back(p);
        cached_ += size;
        p = nullptr;
      }
    }
    if (p) munmap(p, size);
    request_memory_release();
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  static constexpr size_t kMaxCached = size_t(256) << 20;
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};

MappedBlocks& mapped_blocks() {
  static MappedBlocks* blocks = new MappedBlocks;  // never destroyed: used until exit
  return *blocks;
}

// The first block: small constraints (a choice list, a short regex) need no more.
[[maybe_unused]] constexpr size_t kFirstBlock = size_t(64) << 10;

}  // namespace

ScratchMemory::ScratchMemory(Kind kind) {
#if defined(SHRIKE_SANITIZED)
  (void)kind;
  resource_ = std::pmr::new_delete_resource();
#else
  monotonic_.emplace(kFirstBlock, &mapped_blocks());
  resource_ = &*monotonic_;
  if (kind == Kind::Pooled) {
    // Blocks up to 1 MiB are pooled and reused; larger ones come from the monotonic buffer.
    pooled_.emplace(std::pmr::pool_options{0, size_t(1) << 20}, &*monotonic_);
    resource_ = &*pooled_;
  }
#endif
}

void release_scratch_blocks() {
  mapped_blocks().release();
}

}  // namespace shrike
