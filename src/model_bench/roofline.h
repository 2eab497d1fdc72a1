// The memory-bandwidth roofline: how fast this machine can stream bytes from DRAM, which bounds
// batch-1 decoding (every weight is read once per token).
#pragma once

#include <cstddef>

#include "core/thread_pool.h"

namespace shrike::model_bench {

struct BandwidthResult {
  double gb_per_s = 0;  // median over repeats, 1 GB = 1e9 bytes
  size_t bytes = 0;     // buffer size streamed per repeat
  int repeats = 0;
};

// Streams a buffer much larger than the caches with SIMD loads on every thread of the pool and
// reports the median read bandwidth.
BandwidthResult measure_read_bandwidth(ThreadPool& pool, size_t bytes = size_t(1) << 30,
                                       int repeats = 7);

}  // namespace shrike::model_bench
