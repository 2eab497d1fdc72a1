// The memory-bandwidth roofline: how fast this machine can stream bytes from DRAM, which bounds
// batch-1 decoding (every weight is read once per token).
#pragma once

#include <cstddef>
#include <string>

#include "core/thread_pool.h"

namespace shrike::model_bench {

struct BandwidthResult {
  double gb_per_s = 0;  // median over repeats, 1 GB = 1e9 bytes
  size_t bytes = 0;     // buffer size streamed per repeat
  int repeats = 0;
};

// The size of the largest cache level of the first CPU (Linux sysfs, `cache/index*/level` and
// `size` under `cache_dir`), in bytes; 0 when it cannot be read. A model smaller than this
// decodes from cache, faster than memory, so its roofline fraction means nothing.
size_t last_level_cache_bytes(const std::string& cache_dir = "/sys/devices/system/cpu/cpu0/cache");

// A read-bandwidth probe size that defeats every cache: 512 MiB, or twice the last-level cache
// when that is larger (servers with several hundred MiB of L3 exist).
size_t bandwidth_probe_bytes(size_t llc_bytes);

// Streams a buffer much larger than the caches with SIMD loads on every thread of the pool and
// reports the median read bandwidth.
BandwidthResult measure_read_bandwidth(ThreadPool& pool, size_t bytes = size_t(1) << 30,
                                       int repeats = 7);

}  // namespace shrike::model_bench
