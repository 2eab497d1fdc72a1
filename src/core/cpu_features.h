// What the processor we run on can do, read once with CPUID (and XGETBV for OS support).
#pragma once

#include <string>

namespace shrike {

struct CpuFeatures {
  bool avx2 = false;  // with FMA and F16C
  bool avx512 = false;  // F, BW, VL, DQ
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  int physical_cores = 1;
  int logical_cpus = 1;
};

// Detected once; cheap to call.
const CpuFeatures& cpu_features();
std::string cpu_features_string();

}  // namespace shrike
