// Which kernel targets this CPU gets: every architecture with SIMD kernels reports them, and a
// run that names the targets it expects (SHRIKE_EXPECT_ISAS, as scripts/cross_aarch64.sh does for
// each emulated CPU) fails unless the detection finds exactly those, so the SIMD kernels the other
// tests compare against the scalar reference are the ones meant to run.
#include "kernels/isa.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>

#include "core/cpu_features.h"

namespace shrike::kernels {
namespace {

std::string supported_list() {
  std::string s;
  for (Isa isa : supported_isas()) s += (s.empty() ? "" : " ") + std::string(isa_name(isa));
  return s;
}

bool has(Isa isa) {
  const auto all = supported_isas();
  return std::find(all.begin(), all.end(), isa) != all.end();
}

TEST(Isa, ReportsTheTargetsOfThisArchitecture) {
  std::cout << "cpu: " << cpu_features_string() << "\nkernel targets: " << supported_list() << "\n";
  EXPECT_EQ(supported_isas().front(), Isa::Scalar);
#if defined(__aarch64__)
  // Advanced SIMD is mandatory on aarch64 Linux; SDOT only where the CPU reports asimddp.
  EXPECT_TRUE(has(Isa::Neon));
  EXPECT_EQ(has(Isa::NeonDot), cpu_features().neon_dotprod);
  EXPECT_FALSE(has(Isa::Avx2));
#elif defined(__x86_64__)
  EXPECT_FALSE(has(Isa::Neon));
  EXPECT_EQ(has(Isa::Avx2), cpu_features().avx2);  // false in a generic (scalar-only) build
#endif
  if (const char* want = std::getenv("SHRIKE_EXPECT_ISAS")) {
    EXPECT_EQ(supported_list(), want);
  }
}

TEST(Isa, RefusesATargetOfAnotherArchitecture) {
#if defined(__aarch64__)
  EXPECT_THROW(set_active_isa(Isa::Avx2), std::invalid_argument);
#else
  EXPECT_THROW(set_active_isa(Isa::NeonDot), std::invalid_argument);
#endif
}

}  // namespace
}  // namespace shrike::kernels
