#include "engine/constrained.h"

#include <algorithm>

namespace shrike::engine {

int32_t ConstrainedDecoding::only_token() const {
  const std::vector<int32_t> one = state_.forced_tokens(1);
  return one.empty() ? -1 : one[0];
}

std::vector<int32_t> ConstrainedDecoding::forced(int64_t max) const {
  if (!jump_forward_ || max <= 0) return {};
  return state_.forced_tokens(size_t(max));
}

std::vector<int32_t> ConstrainedDecoding::draft(std::span<const int32_t> proposal,
                                                int64_t max) const {
  std::vector<int32_t> out;
  ConstrainedDecoding walk = *this;
  size_t next = 0;  // the proposal's token for the next position
  while (int64_t(out.size()) < max && !walk.complete()) {
    const int32_t only = walk.only_token();
    int32_t token = only;
    if (only >= 0) {
      // Forced: the proposal stays in step only if it proposed that very token.
      next = next < proposal.size() && proposal[next] == only ? next + 1 : proposal.size();
    } else {
      if (next >= proposal.size()) break;
      token = proposal[next++];
    }
    if (!walk.advance(token)) break;  // refused: the draft ends before it
    out.push_back(token);
  }
  return out;
}

size_t ConstrainedDecoding::mask_rows(std::span<const int32_t> draft, float* rows, int64_t n_vocab,
                                      std::vector<char>* forced) const {
  ConstrainedDecoding walk = *this;
  forced->assign(draft.size() + 1, 0);
  for (size_t i = 0;; ++i) {
    (*forced)[i] = walk.only_token() >= 0;
    decode::apply_token_mask(rows + int64_t(i) * n_vocab, n_vocab, *walk.mask());
    if (i == draft.size() || !walk.advance(draft[i])) return i;
  }
}

}  // namespace shrike::engine
