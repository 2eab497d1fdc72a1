// What the processor we run on can do, read once: CPUID (and XGETBV for OS support) on x86-64,
// the kernel's hardware capability bits (getauxval(AT_HWCAP)) on aarch64. Fields of the other
// architecture stay false.
#pragma once

#include <string>

namespace shrike {

struct CpuFeatures {
  // x86-64
  bool avx2 = false;    // with FMA and F16C
  bool avx512 = false;  // F, BW, VL, DQ
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  // aarch64
  bool neon = false;          // Advanced SIMD (asimd): f32 FMA, f16 <-> f32 conversion
  bool neon_dotprod = false;  // SDOT / UDOT (asimddp, Armv8.2 DotProd)
  bool neon_fp16 = false;     // f16 arithmetic (fphp + asimdhp)
  bool neon_i8mm = false;     // USDOT / SMMLA (i8mm)
  bool neon_bf16 = false;     // BFDOT / BFMMLA (bf16)
  int physical_cores = 1;
  int logical_cpus = 1;
};

// Detected once; cheap to call.
const CpuFeatures& cpu_features();
std::string cpu_features_string();

}  // namespace shrike
