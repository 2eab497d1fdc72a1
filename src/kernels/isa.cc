#include "kernels/isa.h"

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "core/cpu_features.h"

namespace shrike::kernels {
namespace {

// Which kernel units this build compiled (see src/kernels/CMakeLists.txt).
#if SHRIKE_KERNELS_X86
constexpr bool kX86 = true;
#else
constexpr bool kX86 = false;
#endif
#if SHRIKE_KERNELS_NEON
constexpr bool kNeon = true;
#else
constexpr bool kNeon = false;
#endif

bool supported(Isa isa) {
  const auto& f = cpu_features();
  switch (isa) {
    case Isa::Scalar:
      return true;
    case Isa::Avx2:
      return kX86 && f.avx2;
    case Isa::Avx512:
      return kX86 && f.avx512;
    case Isa::Avx512Vnni:
      return kX86 && f.avx512_vnni;
    case Isa::Neon:
      return kNeon && f.neon;
    case Isa::NeonDot:
      return kNeon && f.neon_dotprod;
  }
  return false;
}

Isa initial_isa() {
  const auto all = supported_isas();
  if (const char* env = std::getenv("SHRIKE_ISA")) {
    for (Isa isa : all)
      if (isa_name(isa) == env) return isa;
  }
  return all.back();
}

std::atomic<Isa>& active() {
  static std::atomic<Isa> isa{initial_isa()};
  return isa;
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return "scalar";
    case Isa::Avx2:
      return "avx2";
    case Isa::Avx512:
      return "avx512";
    case Isa::Avx512Vnni:
      return "avx512_vnni";
    case Isa::Neon:
      return "neon";
    case Isa::NeonDot:
      return "neon_dot";
  }
  return "unknown";
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Avx512Vnni, Isa::Neon, Isa::NeonDot})
    if (supported(isa)) out.push_back(isa);
  return out;
}

Isa active_isa() {
  return active().load(std::memory_order_relaxed);
}

void set_active_isa(Isa isa) {
  if (!supported(isa))
    throw std::invalid_argument("ISA not supported here: " + std::string(isa_name(isa)));
  active().store(isa);
}

}  // namespace shrike::kernels
