// AVX-512 matmul kernels: matmul_simd.inc over Avx512<false> (vpmaddubsw + vpmaddwd int8 dots).
#include "kernels/matmul_avx512_traits.h"

namespace shrike::kernels::detail {

IsaMatmul isa_matmul_avx512() {
  return simd_matmul<Avx512<false>>();
}

}  // namespace shrike::kernels::detail
