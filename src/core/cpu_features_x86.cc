// x86-64 feature detection: CPUID leaves 1 and 7, and XGETBV for the registers the OS saves.
#include <cpuid.h>

#include <cstdint>

#include "core/cpu_features_arch.h"

namespace shrike::detail {
namespace {

uint64_t read_xcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t(edx) << 32) | eax;
}

}  // namespace

void detect_isa_features(CpuFeatures& f) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return;
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
}

}  // namespace shrike::detail
