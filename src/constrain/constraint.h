// A compiled constraint bound to a vocabulary (shared by every request that uses it) and the
// per-request cursor over it.
//
// The engine's use, per sequence and decode step:
//   const auto& mask = state.allowed_mask();        // cached per automaton state
//   sampler.sample(logits, n_vocab, prompt, output, &mask);
//   state.advance(token);                          // the sampled token
//   if (state.is_complete()) finish;               // only EOS could follow
// and, for jump-forward, before sampling: tokens = state.forced_tokens(); run them as one
// prefill chunk (each passed to advance()), then sample after them.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "constrain/automaton.h"
#include "constrain/token_vocab.h"
#include "decode/token_mask.h"

namespace shrike::constrain {

// The tokens allowed in one automaton state.
struct TokenMask {
  decode::TokenBitset allowed;
  int64_t count = 0;  // allowed.count()
  int32_t only = -1;  // the allowed token when count == 1
};

// The byte no UTF-8 text contains: an automaton uses it to mark a hole, where a per-request
// automaton is spliced in (Constraint::with_holes_filled).
inline constexpr uint8_t kHoleByte = 0xFF;

class Constraint {
 public:
  // Masks of distinct content are kept up to cache_bytes; past that they are computed per call
  // (correct, only slower), so one constraint cannot hold unbounded memory.
  Constraint(Automaton automaton, std::shared_ptr<const TokenVocab> vocab,
             size_t cache_bytes = size_t(64) << 20);
  // A constraint that held much memory (its table and masks) asks for it to be returned to the
  // system (core/memory_release.h).
  ~Constraint();
  Constraint(const Constraint&) = delete;
  Constraint& operator=(const Constraint&) = delete;

  // A per-request constraint: `holes` (shared, compiled once) with each kHoleByte edge replaced
  // by a copy of `fill` (built for this request, e.g. the substrings of its utterance). A hole
  // state (one with a kHoleByte edge) is entered as fill's start; where fill accepts, the bytes
  // holes allows after its kHoleByte edge continue. States of `holes` that no token reaches a
  // hole from keep the shared constraint's cached masks; the others, and the states inside the
  // fill, have their masks computed and cached for this request only (few, and cheap: the
  // walks are pruned by the fill's narrow language). Throws std::invalid_argument when `holes`
  // has no hole or a hole state has another edge too.
  static std::shared_ptr<const Constraint> with_holes_filled(
      std::shared_ptr<const Constraint> holes, Automaton fill);

  // The automaton of a plain constraint; of a filled one, the shared automaton with holes.
  const Automaton& automaton() const { return automaton_; }
  const TokenVocab& vocab() const { return *vocab_; }

  // The state after `byte` (kDead: refused), over this constraint's own states (a filled
  // constraint's include the fill's copies).
  int32_t step(int32_t state, uint8_t byte) const;
  bool accepting(int32_t state) const;
  int32_t n_states() const;
  // The bytes every continuation from `state` must begin with (see Automaton::forced_bytes).
  std::string forced_bytes(int32_t state) const;

  // The tokens allowed in `state`: usable tokens whose bytes keep the automaton alive, plus EOS
  // where the state accepts. at_start: the first output token, whose leading ' ' the
  // detokeniser drops (TokenVocab::strip_leading_space). With a vocabulary that has an encoder
  // (TokenVocab::from_tokenizer), only the tokenizer's own tokens where several could spell
  // what follows: over a small finite language (choices) the first token of each remaining
  // string's tokenization; for text every continuation begins with (a key, a choice's remainder)
  // that text's first token, its last one only where the text ends the constraint (" a" may
  // begin " an"). So a choice costs the tokens its tokenization has. Thread-safe.
  std::shared_ptr<const TokenMask> mask(int32_t state, bool at_start) const;
  // The state after `token`, or kDead when the mask would not allow it (EOS: the same state
  // when accepting).
  int32_t next(int32_t state, bool at_start, int32_t token) const;
  // Masks computed so far (the cold cost's count) and distinct masks cached.
  int64_t masks_computed() const;
  size_t distinct_masks() const;

 private:
  std::shared_ptr<const TokenMask> compute(int32_t state, bool at_start) const;
  // compute()'s restrictions to the encoder's tokens: over a small finite language (false when
  // the language from `state` is not one), and for forced text.
  bool canonical_only(TokenMask& m, int32_t state, bool at_start) const;
  void canonical_forced_text(TokenMask& m, int32_t state, bool at_start) const;
  // The encoder's tokens for `text` from (state, at_start) when they spell it exactly and the
  // automaton takes each in turn (end: the state after them); empty otherwise.
  std::vector<int32_t> encoder_tokens(int32_t state, bool at_start, const std::string& text,
                                      int32_t& end) const;
  // For a constraint with holes: which states some token may carry into a hole (a walk of at
  // most the vocabulary's longest token reaches a hole state).
  void find_states_near_holes();

  Automaton automaton_;
  std::vector<uint8_t> near_hole_;  // [state], empty when the automaton has no hole
  // A filled constraint: the shared one with holes, the fill, and the hole states in order
  // (hole i's fill states are numbered base_states + i * fill.n_states() + fill state).
  std::shared_ptr<const Constraint> holes_;
  Automaton fill_;
  std::vector<int32_t> hole_states_;
  std::vector<int32_t> hole_index_;  // [state of holes_] -> hole number or -1
  mutable std::unordered_map<int32_t, std::shared_ptr<const TokenMask>> local_;  // filled: masks
  explicit Constraint(std::shared_ptr<const TokenVocab> vocab);  // an empty filled constraint

  std::shared_ptr<const TokenVocab> vocab_;
  size_t cache_limit_;
  mutable std::mutex mu_;
  // [state]: its language is finite (no cycle reachable), for canonical_only; built on first use.
  mutable std::once_flag finite_once_;
  mutable std::vector<uint8_t> finite_;
  mutable std::vector<std::shared_ptr<const TokenMask>> by_state_;  // [state * 2 + at_start]
  mutable std::unordered_map<uint64_t, std::vector<std::shared_ptr<const TokenMask>>> by_hash_;
  mutable size_t cached_bytes_ = 0;
  mutable int64_t computed_ = 0;
};

class ConstraintState {
 public:
  explicit ConstraintState(std::shared_ptr<const Constraint> c);

  // The tokens allowed next.
  const decode::TokenBitset& allowed_mask();
  // Consumes a generated token. False (nothing changes) when the mask does not allow it. EOS
  // (allowed when accepting()) ends the constrained text.
  bool advance(int32_t token);
  // The tokens forced from here: while exactly one token is allowed (and it is not EOS), that
  // token. Does not advance; at most `max` tokens.
  std::vector<int32_t> forced_tokens(size_t max = 512) const;
  // The bytes every continuation must begin with (text-level jump-forward).
  std::string forced_text() const { return c_->forced_bytes(state_); }

  // The text so far is a complete match: EOS is allowed now.
  bool accepting() const { return c_->accepting(state_); }
  // Nothing but EOS may follow (or EOS has been consumed): the request can finish.
  bool is_complete() const;

  int32_t state() const { return state_; }
  const Constraint& constraint() const { return *c_; }

 private:
  std::shared_ptr<const Constraint> c_;
  int32_t state_;
  bool at_start_;
  bool ended_ = false;
  std::shared_ptr<const TokenMask> mask_;  // for (state_, at_start_), fetched on demand
};

}  // namespace shrike::constrain
