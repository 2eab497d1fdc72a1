// AVX-512 VNNI matmul kernels: matmul_simd.inc over Avx512<true> (vpdpbusd int8 dots).
#include "kernels/matmul_avx512_traits.h"

namespace shrike::kernels::detail {

IsaMatmul isa_matmul_avx512vnni() {
  return simd_matmul<Avx512<true>>();
}

}  // namespace shrike::kernels::detail
