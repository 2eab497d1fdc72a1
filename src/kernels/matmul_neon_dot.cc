// aarch64 NEON matmul kernels with SDOT: matmul_simd.inc over Neon<true>. Compiled with
// +dotprod; entered only when the CPU reports asimddp.
#include "kernels/matmul_neon_traits.h"

namespace shrike::kernels::detail {

IsaMatmul isa_matmul_neon_dot() {
  return simd_matmul<Neon<true>>();
}

}  // namespace shrike::kernels::detail
