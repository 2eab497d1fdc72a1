// Architectures without SIMD kernels: nothing to detect, the kernels run their scalar reference.
#include "core/cpu_features_arch.h"

namespace shrike::detail {

void detect_isa_features(CpuFeatures&) {}

}  // namespace shrike::detail
