#include "model_bench/roofline.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/file_buffer.h"

namespace shrike::model_bench {
namespace {

#if defined(__x86_64__)
// Sums 64-bit lanes with AVX2 loads, four independent accumulators so the loop is bound by
// memory, not by add latency. Compiled for AVX2 only; called only when the CPU has it.
__attribute__((target("avx2"))) uint64_t read_avx2(const uint8_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 128 <= n; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
#endif

// The same with 16-byte vectors in GCC's generic vector type: SSE2 on x86-64, NEON on aarch64.
uint64_t read_vec128(const uint8_t* p, size_t n) {
  typedef uint64_t U2 __attribute__((vector_size(16)));
  auto load = [](const uint8_t* q) {  // one 16-byte load, without type-punning the buffer
    U2 v;
    __builtin_memcpy(&v, q, sizeof(v));
    return v;
  };
  U2 a0 = {0, 0}, a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 64 <= n; i += 64) {
    a0 += load(p + i);
    a1 += load(p + i + 16);
    a2 += load(p + i + 32);
    a3 += load(p + i + 48);
  }
  const U2 s = (a0 + a1) + (a2 + a3);
  return s[0] + s[1];
}

uint64_t read_block(const uint8_t* p, size_t n) {
#if defined(__x86_64__)
  if (cpu_features().avx2) return read_avx2(p, n);
#endif
  return read_vec128(p, n);
}

}  // namespace

size_t last_level_cache_bytes(const std::string& cache_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(cache_dir, ec)) return 0;
  int best_level = 0;
  size_t best = 0;
  for (const auto& entry : fs::directory_iterator(cache_dir, ec)) {
    if (entry.path().filename().string().rfind("index", 0) != 0) continue;
    std::ifstream level_in(entry.path() / "level"), size_in(entry.path() / "size"),
        type_in(entry.path() / "type");
    int level = 0;
    std::string size, type;
    if (!(level_in >> level) || !(size_in >> size)) continue;
    type_in >> type;
    if (type == "Instruction") continue;
    // "491520K", "32M", or plain bytes.
    size_t value = 0, i = 0;
    for (; i < size.size() && size[i] >= '0' && size[i] <= '9'; ++i)
      value = value * 10 + size_t(size[i] - '0');
    if (i == 0) continue;
    const char unit = i < size.size() ? size[i] : ' ';
    if (unit == 'K') value <<= 10;
    if (unit == 'M') value <<= 20;
    if (unit == 'G') value <<= 30;
    if (level > best_level || (level == best_level && value > best)) {
      best_level = level;
      best = value;
    }
  }
  return best;
}

size_t bandwidth_probe_bytes(size_t llc_bytes) {
  return std::max(size_t(512) << 20, 2 * llc_bytes);
}

BandwidthResult measure_read_bandwidth(ThreadPool& pool, size_t bytes, int repeats) {
  bytes = bytes / 4096 * 4096;
  AlignedBytes buf = aligned_alloc_bytes(bytes);
  std::memset(buf.get(), 1, bytes);  // touch every page so no fault is timed
  std::vector<uint64_t> sink(size_t(pool.size()) * 8);
  std::vector<double> rates;
  for (int r = 0; r < repeats + 1; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](int i, int nt) {
      const size_t pages = bytes / 4096;
      const size_t b = pages * size_t(i) / size_t(nt) * 4096;
      const size_t e = pages * size_t(i + 1) / size_t(nt) * 4096;
      const uint8_t* p = buf.get() + b;
      sink[size_t(i) * 8] += read_block(p, e - b);  // own cache line
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) rates.push_back(double(bytes) / s / 1e9);  // first pass warms up
  }
  std::sort(rates.begin(), rates.end());
  return {rates[rates.size() / 2], bytes, repeats};
}

}  // namespace shrike::model_bench
