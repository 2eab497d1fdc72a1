// The architecture-specific half of cpu_features(): one definition per architecture
// (cpu_features_x86.cc, cpu_features_aarch64.cc, cpu_features_generic.cc), the build picks one.
#pragma once

#include "core/cpu_features.h"

namespace shrike::detail {

// Sets the instruction-set fields of f for the running CPU (the core counts are set by the caller).
void detect_isa_features(CpuFeatures& f);

}  // namespace shrike::detail
