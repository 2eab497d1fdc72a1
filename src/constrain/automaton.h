// A deterministic byte automaton: what every constraint (regex, choices, JSON schema, JSON
// object) compiles to. States are dense ids 0..n_states()-1; kDead is the state no input leaves.
// Every live state can still reach an accepting state (states that cannot are pruned to kDead at
// construction), so "not dead" means "some continuation completes the match": a token mask built
// on step() can never lead generation into a corner.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "constrain/nfa.h"

namespace shrike::constrain {

inline constexpr int32_t kDead = -1;

class Automaton {
 public:
  // Subset construction from `nfa` (entry frag.in, accepting frag.out), eagerly, with every byte
  // mapped to its equivalence class first (bytes no edge tells apart share a column). Throws
  // ConstraintError past max_states DFA states, or when the language is empty.
  static Automaton determinize(const Nfa& nfa, Frag frag, int32_t max_states = 100000);

  int32_t start() const { return 0; }
  int32_t step(int32_t state, uint8_t byte) const {
    return state < 0 ? kDead : table_[size_t(state) * n_classes_ + class_of_[byte]];
  }
  // The state after all of `bytes`, or kDead.
  int32_t walk(int32_t state, std::string_view bytes) const {
    for (char c : bytes) {
      state = step(state, uint8_t(c));
      if (state < 0) break;
    }
    return state;
  }
  bool accepting(int32_t state) const { return state >= 0 && accepting_[size_t(state)]; }
  bool matches(std::string_view bytes) const { return accepting(walk(start(), bytes)); }

  // The bytes every continuation from `state` must begin with: followed while the state is not
  // accepting and exactly one byte keeps it alive. For jump-forward at the text level (the
  // engine may tokenise them and run them as one prefill chunk).
  std::string forced_bytes(int32_t state) const;

  int32_t n_states() const { return int32_t(accepting_.size()); }
  int32_t n_classes() const { return int32_t(n_classes_); }

 private:
  std::array<uint8_t, 256> class_of_{};
  size_t n_classes_ = 0;
  std::vector<int32_t> table_;  // [state][class] -> state or kDead
  std::vector<uint8_t> accepting_;
};

// The intersection of two automata's languages, added to `nfa` as a fragment (one NFA state per
// reachable pair of states, so a later determinisation keeps its size). For the keywords that
// must all hold of one value: a pattern and a length, a format and a pattern, bounds and
// multipleOf. Throws ConstraintError past max_states pairs, or when no text is in both.
Frag embed_intersection(Nfa& nfa, const Automaton& a, const Automaton& b,
                        int32_t max_states = 100000);

// The bytes forced from `state`: while exactly one byte leads on and the state does not accept.
// For any automaton-like A (step, accepting, n_states): Automaton, and Constraint's spliced
// states. A cycle of forced bytes never accepts and so was pruned; the bound is a guard only.
template <class A>
std::string forced_bytes_from(const A& a, int32_t state) {
  std::string out;
  while (state >= 0 && !a.accepting(state) && out.size() < size_t(a.n_states())) {
    int32_t only = -1, next = kDead;
    for (int b = 0; b < 256; ++b) {
      const int32_t t = a.step(state, uint8_t(b));
      if (t < 0) continue;
      if (only >= 0) return out;
      only = b;
      next = t;
    }
    if (only < 0) break;
    out.push_back(char(only));
    state = next;
  }
  return out;
}

}  // namespace shrike::constrain
