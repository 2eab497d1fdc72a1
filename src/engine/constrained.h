// A sequence's constraint cursor in the engine (src/constrain does the automata and masks): the
// mask each sampling uses, the token to take without sampling where only one is allowed, the
// tokens jump-forward appends as known tokens, and when the constrained text is complete.
//
// Forced tokens are never drawn from the sampler, with or without jump-forward: a position where
// the automaton allows exactly one token takes it directly (log probability 0, the constrained
// distribution's). So the sampler's random stream is consumed only at positions with a real
// choice, and jump-forward gives the same output as stepping through the forced positions one
// model call each, for sampled requests as well as greedy ones.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "constrain/constraint.h"
#include "decode/token_mask.h"

namespace shrike::engine {

class ConstrainedDecoding {
 public:
  // jump_forward: forced() returns the forced run; otherwise it is always empty and each forced
  // token costs one model call (taken by only_token() then).
  ConstrainedDecoding(std::shared_ptr<const constrain::Constraint> c, bool jump_forward)
      : state_(std::move(c)), jump_forward_(jump_forward) {}

  // The tokens the sampler may choose from now.
  const decode::TokenBitset* mask() { return &state_.allowed_mask(); }
  // The one token allowed now (never EOS), to take without sampling; -1 when there is a choice.
  int32_t only_token() const;
  // Consumes a token; false when the constraint does not allow it (the request must fail).
  bool advance(int32_t token) { return state_.advance(token); }
  // Nothing but EOS may follow: the request ends (FinishReason::Stop) without another step.
  bool complete() const { return state_.is_complete(); }
  // Jump-forward: the tokens forced from here, at most `max` (none when jump-forward is off).
  // They are not consumed: the caller advance()s each as it appends it.
  std::vector<int32_t> forced(int64_t max) const;

  // Speculative decoding. draft(): what the constraint lets a sequence draft from here, at most
  // `max` tokens, from a proposer's continuation: a position where the constraint allows one
  // token takes it (certain once the drafts before it are accepted; a proposal that disagrees
  // there is not used further), any other position the proposal's next token while the
  // constraint allows it; the draft ends at the first token the constraint refuses, when the
  // proposal runs out at a real choice, or when the constrained text is complete. The cursor is
  // not moved (a copy walks the draft).
  std::vector<int32_t> draft(std::span<const int32_t> proposal, int64_t max) const;
  // Verification of a draft: applies to each of the 1 + draft.size() logit rows the mask of its
  // position (row i: after draft[0, i)), so each row is sampled as sample() with the mask would,
  // and sets forced[i] where the position's token is taken without a draw (only_token()).
  // Returns how many drafts the constraint allows (rows past those are left as they were).
  size_t mask_rows(std::span<const int32_t> draft, float* rows, int64_t n_vocab,
                   std::vector<char>* forced) const;

 private:
  constrain::ConstraintState state_;
  bool jump_forward_;
};

}  // namespace shrike::engine
