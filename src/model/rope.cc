#include "model/rope.h"

#include <cmath>

namespace shrike::model {

void rope_cos_sin(float* cs, int64_t pos, float theta, int64_t rope_dims,
                  std::span<const float> freq_factors, float pos_scale) {
  const float p = float(pos) * pos_scale;
  for (int64_t i = 0; i < rope_dims / 2; ++i) {
    float freq = 1.0f / std::pow(theta, float(2 * i) / float(rope_dims));
    if (!freq_factors.empty()) freq /= freq_factors[size_t(i)];
    const float angle = p * freq;
    cs[2 * i] = std::cos(angle);
    cs[2 * i + 1] = std::sin(angle);
  }
}

}  // namespace shrike::model
