#include "constrain/nfa.h"

#include <string>

#include "constrain/error.h"

namespace shrike::constrain {

int32_t Nfa::add_state() {
  if (int32_t(states_.size()) >= max_states_)
    throw ConstraintError("constraint too large: its automaton needs more than " +
                          std::to_string(max_states_) +
                          " NFA states (reduce repetition counts, maxLength or enum sizes)");
  states_.emplace_back();
  return int32_t(states_.size()) - 1;
}

Frag Nfa::empty() {
  const int32_t s = add_state();
  return {s, s};
}

Frag Nfa::literal(std::string_view bytes) {
  Frag f = empty();
  for (char c : bytes) {
    const int32_t next = add_state();
    add_edge(f.out, uint8_t(c), uint8_t(c), next);
    f.out = next;
  }
  return f;
}

Frag Nfa::seq(const ByteSeq& ranges) {
  Frag f = empty();
  for (const ByteRange& r : ranges) {
    const int32_t next = add_state();
    add_edge(f.out, r.lo, r.hi, next);
    f.out = next;
  }
  return f;
}

Frag Nfa::seqs(const std::vector<ByteSeq>& alternatives) {
  const int32_t in = add_state(), out = add_state();
  for (const ByteSeq& s : alternatives) {
    int32_t at = in;
    for (size_t i = 0; i < s.size(); ++i) {
      const int32_t next = i + 1 == s.size() ? out : add_state();
      add_edge(at, s[i].lo, s[i].hi, next);
      at = next;
    }
    if (s.empty()) add_eps(in, out);
  }
  return {in, out};
}

Frag Nfa::concat(Frag a, Frag b) {
  add_eps(a.out, b.in);
  return {a.in, b.out};
}

Frag Nfa::alt(const std::vector<Frag>& alternatives) {
  const int32_t in = add_state(), out = add_state();
  for (const Frag& f : alternatives) {
    add_eps(in, f.in);
    add_eps(f.out, out);
  }
  return {in, out};
}

Frag Nfa::optional(Frag a) {
  const int32_t in = add_state(), out = add_state();
  add_eps(in, a.in);
  add_eps(in, out);
  add_eps(a.out, out);
  return {in, out};
}

Frag Nfa::star(Frag a) {
  const int32_t in = add_state(), out = add_state();
  add_eps(in, a.in);
  add_eps(in, out);
  add_eps(a.out, a.in);
  add_eps(a.out, out);
  return {in, out};
}

Frag Nfa::plus(Frag a) {
  const int32_t out = add_state();
  add_eps(a.out, a.in);
  add_eps(a.out, out);
  return {a.in, out};
}

Frag Nfa::up_to(int64_t n, const std::function<Frag()>& copy) {
  const int32_t in = add_state(), exit = add_state();
  int32_t at = in;
  for (int64_t k = 0; k < n; ++k) {
    add_eps(at, exit);
    const Frag f = copy();
    add_eps(at, f.in);
    at = f.out;
  }
  add_eps(at, exit);
  return {in, exit};
}

}  // namespace shrike::constrain
