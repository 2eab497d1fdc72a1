#include "constrain/automaton.h"

#include <algorithm>
#include <memory_resource>
#include <string>
#include <unordered_map>

#include "constrain/error.h"
#include "core/scratch_memory.h"

namespace shrike::constrain {
namespace {

using StateSet = std::pmr::vector<int32_t>;

struct SetHash {
  size_t operator()(const StateSet& v) const {
    uint64_t h = 1469598103934665603ull;
    for (int32_t x : v) h = (h ^ uint64_t(uint32_t(x))) * 1099511628211ull;
    return size_t(h);
  }
};

// The cost of a determinisation, counted in the units that dominate its time: NFA states and
// edges visited, and the sort and hash of every subset built (whether or not it turns out to be
// new). The states cap bounds the table; this bounds the time, so a pattern whose subsets are
// huge (many overlapping repetitions, like (\d?){164}{164}) fails in well under a second
// instead of running for many seconds below the state cap.
class WorkMeter {
 public:
  // 0.1-0.3 s of Release work (1-2 ns a unit) on this project's 2-core Xeon VM. The largest
  // schema the documented limits allow (1000 optional properties) takes 41 M units, a third.
  static constexpr uint64_t kMaxWork = uint64_t(1) << 27;

  void add(uint64_t units) {
    work_ += units;
    if (work_ > kMaxWork)
      throw ConstraintError("constraint too complex: determinising its automaton takes more than " +
                            std::to_string(kMaxWork) +
                            " steps (simplify the pattern or schema: fewer or smaller "
                            "nested repetitions)");
  }
  // Sorting and hashing n states: n log2 n + n.
  void add_sorted(size_t n) {
    uint64_t log2n = 1;
    while ((size_t(1) << log2n) < n) ++log2n;
    add(uint64_t(n) * (log2n + 1));
  }

 private:
  uint64_t work_ = 0;
};

// Sorted epsilon closure of `set` (modified in place).
void close(const Nfa& nfa, StateSet& set, std::pmr::vector<uint8_t>& seen, WorkMeter& meter) {
  StateSet stack(set.begin(), set.end(), set.get_allocator());
  for (int32_t s : set) seen[size_t(s)] = 1;
  size_t visited = 0;
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    const auto& eps = nfa.states()[size_t(s)].eps;
    visited += 1 + eps.size();
    for (int32_t t : eps)
      if (!seen[size_t(t)]) {
        seen[size_t(t)] = 1;
        set.push_back(t);
        stack.push_back(t);
      }
  }
  for (int32_t s : set) seen[size_t(s)] = 0;
  meter.add(visited);
  meter.add_sorted(set.size());
  std::sort(set.begin(), set.end());
}

}  // namespace

Automaton Automaton::determinize(const Nfa& nfa, Frag frag, int32_t max_states) {
  // Every container below is scratch (core/scratch_memory.h), the result's table included until
  // it is pruned into its final size.
  ScratchMemory scratch(ScratchMemory::Kind::Pooled);
  std::pmr::memory_resource* mem = scratch.resource();
  Automaton a;
  std::pmr::vector<int32_t> raw_table(mem);
  std::pmr::vector<uint8_t> raw_accepting(mem);
  // Byte classes: a boundary wherever some edge's range starts or ends.
  std::array<bool, 257> boundary{};
  boundary[0] = true;
  for (const auto& st : nfa.states())
    for (const auto& e : st.edges) {
      boundary[e.lo] = true;
      boundary[size_t(e.hi) + 1] = true;
    }
  int32_t cls = -1;
  for (int b = 0; b < 256; ++b) {
    if (boundary[size_t(b)]) ++cls;
    a.class_of_[size_t(b)] = uint8_t(cls);
  }
  a.n_classes_ = size_t(cls + 1);

  std::pmr::vector<uint8_t> seen(size_t(nfa.size()), 0, mem);
  std::pmr::unordered_map<StateSet, int32_t, SetHash> ids(mem);         // closure -> state
  std::pmr::unordered_map<StateSet, int32_t, SetHash> kernel_ids(mem);  // kernel -> state
  std::pmr::vector<StateSet> sets(mem);
  StateSet start({frag.in}, mem);
  WorkMeter meter;
  close(nfa, start, seen, meter);
  ids.emplace(start, 0);
  sets.push_back(std::move(start));

  std::pmr::vector<StateSet> buckets(a.n_classes_, mem);
  for (size_t d = 0; d < sets.size(); ++d) {
    for (auto& b : buckets) b.clear();
    size_t moves = 0;
    for (int32_t s : sets[d])
      for (const auto& e : nfa.states()[size_t(s)].edges) {
        moves += 1 + a.class_of_[e.hi] - a.class_of_[e.lo];
        for (size_t c = a.class_of_[e.lo]; c <= a.class_of_[e.hi]; ++c) buckets[c].push_back(e.to);
      }
    meter.add(sets[d].size() + moves + a.n_classes_);
    raw_accepting.push_back(std::binary_search(sets[d].begin(), sets[d].end(), frag.out));
    for (size_t c = 0; c < a.n_classes_; ++c) {
      auto& b = buckets[c];
      if (b.empty()) {
        raw_table.push_back(kDead);
        continue;
      }
      meter.add_sorted(b.size());
      std::sort(b.begin(), b.end());
      b.erase(std::unique(b.begin(), b.end()), b.end());
      // A kernel (the states one byte class reaches) seen before has the same closure: skip it.
      // Most transitions lead back to known states, and the closure is the costly part.
      if (const auto known = kernel_ids.find(b); known != kernel_ids.end()) {
        raw_table.push_back(known->second);
        continue;
      }
      StateSet kernel(b, mem);
      close(nfa, b, seen, meter);
      auto [it, fresh] = ids.emplace(b, int32_t(sets.size()));
      if (fresh) {
        if (int32_t(sets.size()) >= max_states)
          throw ConstraintError("constraint too complex: its automaton needs more than " +
                                std::to_string(max_states) +
                                " DFA states (simplify the pattern or schema)");
        sets.push_back(b);
      }
      kernel_ids.emplace(std::move(kernel), it->second);
      raw_table.push_back(it->second);
    }
  }
  sets.clear();

  // Prune states that cannot reach acceptance: reverse reachability from accepting states.
  const size_t n = raw_accepting.size(), k = a.n_classes_;
  std::pmr::vector<StateSet> preds(n, mem);
  for (size_t s = 0; s < n; ++s)
    for (size_t c = 0; c < k; ++c)
      if (const int32_t t = raw_table[s * k + c]; t >= 0) preds[size_t(t)].push_back(int32_t(s));
  std::pmr::vector<uint8_t> live(n, 0, mem);
  StateSet stack(mem);
  for (size_t s = 0; s < n; ++s)
    if (raw_accepting[s]) {
      live[s] = 1;
      stack.push_back(int32_t(s));
    }
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    for (int32_t p : preds[size_t(s)])
      if (!live[size_t(p)]) {
        live[size_t(p)] = 1;
        stack.push_back(p);
      }
  }
  if (!live[0]) throw ConstraintError("constraint matches no text at all");
  std::pmr::vector<int32_t> renum(n, kDead, mem);
  int32_t next = 0;
  for (size_t s = 0; s < n; ++s)
    if (live[s]) renum[s] = next++;
  std::vector<int32_t> table(size_t(next) * k);
  std::vector<uint8_t> acc(static_cast<size_t>(next));
  for (size_t s = 0; s < n; ++s) {
    if (!live[s]) continue;
    acc[size_t(renum[s])] = raw_accepting[s];
    for (size_t c = 0; c < k; ++c) {
      const int32_t t = raw_table[s * k + c];
      table[size_t(renum[s]) * k + c] = t < 0 ? kDead : renum[size_t(t)];
    }
  }
  a.table_ = std::move(table);
  a.accepting_ = std::move(acc);
  return a;
}

Frag embed_intersection(Nfa& nfa, const Automaton& a, const Automaton& b, int32_t max_states) {
  ScratchMemory scratch(ScratchMemory::Kind::Pooled);
  std::pmr::unordered_map<uint64_t, int32_t> ids(scratch.resource());  // (a, b) -> NFA state
  struct Pair {
    int32_t a, b, state;  // the two automata's states and the NFA state standing for them
  };
  std::pmr::vector<Pair> pairs(scratch.resource());
  const int32_t out = nfa.add_state();
  auto id = [&](int32_t sa, int32_t sb) {
    const uint64_t key = (uint64_t(uint32_t(sa)) << 32) | uint32_t(sb);
    const auto [it, fresh] = ids.emplace(key, int32_t(0));
    if (fresh) {
      if (int32_t(pairs.size()) >= max_states)
        throw ConstraintError("constraint too complex: combining its keywords needs more than " +
                              std::to_string(max_states) + " states");
      it->second = nfa.add_state();
      pairs.push_back({sa, sb, it->second});
    }
    return it->second;
  };
  const int32_t in = id(a.start(), b.start());
  bool any_accepting = false;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto [sa, sb, from] = pairs[i];
    if (a.accepting(sa) && b.accepting(sb)) {
      nfa.add_eps(from, out);
      any_accepting = true;
    }
    // One edge per run of bytes leading to the same pair.
    int run_start = -1;
    int32_t run_to = -1;
    for (int byte = 0; byte <= 256; ++byte) {
      int32_t to = -1;
      if (byte < 256) {
        const int32_t ta = a.step(sa, uint8_t(byte)), tb = b.step(sb, uint8_t(byte));
        if (ta >= 0 && tb >= 0) to = id(ta, tb);
      }
      if (to == run_to && run_start >= 0 && byte < 256) continue;
      if (run_start >= 0 && run_to >= 0)
        nfa.add_edge(from, uint8_t(run_start), uint8_t(byte - 1), run_to);
      run_start = byte;
      run_to = to;
    }
  }
  if (!any_accepting) throw ConstraintError("no text satisfies all of its keywords together");
  return {in, out};
}

std::string Automaton::forced_bytes(int32_t state) const {
  return forced_bytes_from(*this, state);
}

}  // namespace shrike::constrain
