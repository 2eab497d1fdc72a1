// aarch64 NEON matmul kernels: matmul_simd.inc over Neon<false> (widening multiplies for the int8
// dot products; armv8-a, no target flags).
#include "kernels/matmul_neon_traits.h"

namespace shrike::kernels::detail {

IsaMatmul isa_matmul_neon() {
  return simd_matmul<Neon<false>>();
}

}  // namespace shrike::kernels::detail
