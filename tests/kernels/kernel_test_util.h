// Helpers shared by the kernel tests (one header, so the unity build of kernels_test sees one
// definition).
#pragma once

#include <random>
#include <vector>

namespace shrike::kernels {

// n normal samples with standard deviation `scale`.
inline std::vector<float> randn(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& e : v) e = d(rng);
  return v;
}

}  // namespace shrike::kernels
