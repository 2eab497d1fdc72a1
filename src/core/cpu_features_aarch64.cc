// aarch64 feature detection: the hardware capability bits the Linux kernel passes in the
// auxiliary vector (the same bits /proc/cpuinfo's "Features" line prints). Userspace cannot read
// the ID registers portably; the kernel's view also accounts for what it enabled.
#include <sys/auxv.h>

#include "core/cpu_features_arch.h"

// The bit values of the arm64 kernel ABI (asm/hwcap.h), spelled out so that an older libc's
// headers still build.
namespace {
constexpr unsigned long kHwcapFp = 1ul << 0;
constexpr unsigned long kHwcapAsimd = 1ul << 1;
constexpr unsigned long kHwcapFphp = 1ul << 9;
constexpr unsigned long kHwcapAsimdhp = 1ul << 10;
constexpr unsigned long kHwcapAsimddp = 1ul << 20;
constexpr unsigned long kHwcap2I8mm = 1ul << 13;
constexpr unsigned long kHwcap2Bf16 = 1ul << 14;
}  // namespace

namespace shrike::detail {

void detect_isa_features(CpuFeatures& f) {
  const unsigned long hw = getauxval(AT_HWCAP);
  const unsigned long hw2 = getauxval(AT_HWCAP2);
  f.neon = (hw & kHwcapFp) && (hw & kHwcapAsimd);
  f.neon_dotprod = f.neon && (hw & kHwcapAsimddp);
  f.neon_fp16 = f.neon && (hw & kHwcapFphp) && (hw & kHwcapAsimdhp);
  f.neon_i8mm = f.neon && (hw2 & kHwcap2I8mm);
  f.neon_bf16 = f.neon && (hw2 & kHwcap2Bf16);
}

}  // namespace shrike::detail
