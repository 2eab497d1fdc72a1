#include "core/cpu_features.h"

#include <cpuid.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace shrike {
namespace {

uint64_t read_xcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t(edx) << 32) | eax;
}

// Physical cores from /proc/cpuinfo ("physical id" + "core id" pairs); falls back to the number
// of logical CPUs when the file does not say.
int count_physical_cores(int logical) {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<int, int>> cores;
  std::string line;
  int phys = 0;
  while (std::getline(in, line)) {
    auto value = [&]() { return std::stoi(line.substr(line.find(':') + 1)); };
    if (line.rfind("physical id", 0) == 0) phys = value();
    if (line.rfind("core id", 0) == 0) cores.insert({phys, value()});
  }
  return cores.empty() ? logical : int(cores.size());
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & bit_OSXSAVE;
  const bool fma = c & bit_FMA, f16c = c & bit_F16C, avx = c & bit_AVX;
  const uint64_t xcr0 = osxsave ? read_xcr0() : 0;
  const bool os_ymm = (xcr0 & 0x6) == 0x6;
  const bool os_zmm = (xcr0 & 0xe6) == 0xe6;
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    f.avx2 = avx && os_ymm && fma && f16c && (b & bit_AVX2);
    f.avx512 = f.avx2 && os_zmm && (b & bit_AVX512F) && (b & bit_AVX512BW) && (b & bit_AVX512VL) &&
               (b & bit_AVX512DQ);
    f.avx512_vnni = f.avx512 && (c & bit_AVX512VNNI);
    unsigned a1, b1, c1, d1;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    f.avx512_bf16 = f.avx512 && (a1 & bit_AVX512BF16);
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  f.logical_cpus = n > 0 ? int(n) : 1;
  f.physical_cores = count_physical_cores(f.logical_cpus);
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

std::string cpu_features_string() {
  const auto& f = cpu_features();
  std::string s;
  if (f.avx2) s += "avx2 ";
  if (f.avx512) s += "avx512 ";
  if (f.avx512_vnni) s += "avx512_vnni ";
  if (f.avx512_bf16) s += "avx512_bf16 ";
  if (s.empty()) s = "scalar ";
  s += "(" + std::to_string(f.physical_cores) + " physical cores, " +
       std::to_string(f.logical_cpus) + " logical)";
  return s;
}

}  // namespace shrike
