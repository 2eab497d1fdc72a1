#include "engine/constrained.h"

namespace shrike::engine {

int32_t ConstrainedDecoding::only_token() const {
  const std::vector<int32_t> one = state_.forced_tokens(1);
  return one.empty() ? -1 : one[0];
}

std::vector<int32_t> ConstrainedDecoding::forced(int64_t max) const {
  if (!jump_forward_ || max <= 0) return {};
  return state_.forced_tokens(size_t(max));
}

}  // namespace shrike::engine
