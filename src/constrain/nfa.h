// A Thompson NFA over bytes, built fragment by fragment by the regex, choice and JSON schema
// compilers. Fragments have one entry and one exit state, so they compose like regex operators;
// a fragment's states may also be wired by hand (the JSON object builder shares one copy of each
// property between all the orders it may follow). Every state added is counted against a cap,
// so no input can make the graph (or its determinisation) grow without bound. Its states live in
// scratch memory of their own (core/scratch_memory.h), returned to the system with the Nfa.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <memory_resource>
#include <string_view>
#include <vector>

#include "core/scratch_memory.h"

namespace shrike::constrain {

struct ByteRange {
  uint8_t lo, hi;  // inclusive
};

// A sequence of byte ranges: one UTF-8 encoded character class piece, or a literal.
using ByteSeq = std::vector<ByteRange>;

struct Frag {
  int32_t in = 0, out = 0;
};

class Nfa {
 public:
  // Throws ConstraintError once more than max_states states are added.
  explicit Nfa(int32_t max_states = 1 << 20)
      : scratch_(std::make_unique<ScratchMemory>(ScratchMemory::Kind::Monotonic)),
        states_(scratch_->resource()),
        max_states_(max_states) {}

  struct Edge {
    uint8_t lo, hi;
    int32_t to;
  };
  // Allocator-aware (std::pmr), so the states vector hands its memory resource to each
  // state's own vectors.
  struct State {
    using allocator_type = std::pmr::polymorphic_allocator<>;
    explicit State(const allocator_type& a) : edges(a), eps(a) {}
    State(State&& other, const allocator_type& a)
        : edges(std::move(other.edges), a), eps(std::move(other.eps), a) {}
    std::pmr::vector<Edge> edges;
    std::pmr::vector<int32_t> eps;
  };

  int32_t add_state();
  void add_edge(int32_t from, uint8_t lo, uint8_t hi, int32_t to) {
    states_[size_t(from)].edges.push_back({lo, hi, to});
  }
  void add_eps(int32_t from, int32_t to) { states_[size_t(from)].eps.push_back(to); }

  // Fragment builders (Thompson's construction).
  Frag empty();
  Frag literal(std::string_view bytes);
  Frag seq(const ByteSeq& ranges);
  // Alternatives of byte sequences (a UTF-8 class): one state per distinct prefix is not
  // attempted; the DFA merges them.
  Frag seqs(const std::vector<ByteSeq>& alternatives);
  Frag concat(Frag a, Frag b);
  Frag alt(const std::vector<Frag>& alternatives);
  Frag optional(Frag a);
  Frag star(Frag a);
  Frag plus(Frag a);
  // Zero to n copies made by `copy`, as a chain with an exit after each: x{0,n}. The nested form
  // (x(x(x)?)?)? is the same language, but an epsilon closure there walks every enclosing
  // optional's exit, which makes determinisation quadratic in n; here each closure is the next
  // copy's entry and the exit.
  Frag up_to(int64_t n, const std::function<Frag()>& copy);

  int32_t size() const { return int32_t(states_.size()); }
  const std::pmr::vector<State>& states() const { return states_; }

 private:
  std::unique_ptr<ScratchMemory> scratch_;
  std::pmr::vector<State> states_;
  int32_t max_states_;
};

}  // namespace shrike::constrain
