// Instruction-set targets of the kernels and the run-time choice between them.
#pragma once

#include <string_view>
#include <vector>

namespace shrike::kernels {

// Ordered from least to most capable within each architecture (a CPU supports Scalar and
// targets of its own architecture only).
enum class Isa {
  Scalar,      // portable C++, the reference every SIMD kernel is tested against
  Avx2,        // x86-64: AVX2 + FMA + F16C
  Avx512,      // x86-64: AVX-512 F/BW/VL/DQ
  Avx512Vnni,  // x86-64: AVX-512 + VNNI int8 dot products
  Neon,        // aarch64: Advanced SIMD (armv8-a)
  NeonDot,     // aarch64: Advanced SIMD + SDOT int8 dot products (Armv8.2 DotProd)
};
constexpr int kIsaCount = 6;

std::string_view isa_name(Isa isa);
// Every ISA this CPU can run, Scalar first.
std::vector<Isa> supported_isas();
// The ISA kernels use unless told otherwise: the best supported one, or the one named by the
// environment variable SHRIKE_ISA (scalar|avx2|avx512|avx512_vnni|neon|neon_dot) when the CPU
// supports it.
Isa active_isa();
// Overrides active_isa() for the whole process (tests and A/B benchmarks). Must be supported.
void set_active_isa(Isa isa);

}  // namespace shrike::kernels
