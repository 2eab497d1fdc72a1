#include "constrain/automaton.h"

#include <algorithm>
#include <unordered_map>

#include "constrain/error.h"

namespace shrike::constrain {
namespace {

struct SetHash {
  size_t operator()(const std::vector<int32_t>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (int32_t x : v) h = (h ^ uint64_t(uint32_t(x))) * 1099511628211ull;
    return size_t(h);
  }
};

// Sorted epsilon closure of `set` (modified in place).
void close(const Nfa& nfa, std::vector<int32_t>& set, std::vector<uint8_t>& seen) {
  std::vector<int32_t> stack(set.begin(), set.end());
  for (int32_t s : set) seen[size_t(s)] = 1;
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    for (int32_t t : nfa.states()[size_t(s)].eps)
      if (!seen[size_t(t)]) {
        seen[size_t(t)] = 1;
        set.push_back(t);
        stack.push_back(t);
      }
  }
  for (int32_t s : set) seen[size_t(s)] = 0;
  std::sort(set.begin(), set.end());
}

}  // namespace

Automaton Automaton::determinize(const Nfa& nfa, Frag frag, int32_t max_states) {
  Automaton a;
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

  std::vector<uint8_t> seen(size_t(nfa.size()), 0);
  std::unordered_map<std::vector<int32_t>, int32_t, SetHash> ids;
  std::vector<std::vector<int32_t>> sets;
  std::vector<int32_t> start{frag.in};
  close(nfa, start, seen);
  ids.emplace(start, 0);
  sets.push_back(std::move(start));

  std::vector<std::vector<int32_t>> buckets(a.n_classes_);
  // The states cap bounds the table; this bounds the time: the NFA states of all subsets, so a
  // pattern whose subsets are huge (many overlapping repetitions) fails fast instead of running
  // for minutes below the state cap.
  constexpr size_t kMaxWork = size_t(1) << 25;
  size_t work = 0;
  for (size_t d = 0; d < sets.size(); ++d) {
    work += sets[d].size();
    if (work > kMaxWork)
      throw ConstraintError("constraint too complex: determinising its automaton takes more than " +
                            std::to_string(kMaxWork) + " steps (simplify the pattern or schema)");
    for (auto& b : buckets) b.clear();
    for (int32_t s : sets[d])
      for (const auto& e : nfa.states()[size_t(s)].edges)
        for (size_t c = a.class_of_[e.lo]; c <= a.class_of_[e.hi]; ++c) buckets[c].push_back(e.to);
    a.accepting_.push_back(std::binary_search(sets[d].begin(), sets[d].end(), frag.out));
    for (size_t c = 0; c < a.n_classes_; ++c) {
      auto& b = buckets[c];
      if (b.empty()) {
        a.table_.push_back(kDead);
        continue;
      }
      std::sort(b.begin(), b.end());
      b.erase(std::unique(b.begin(), b.end()), b.end());
      close(nfa, b, seen);
      auto [it, fresh] = ids.emplace(b, int32_t(sets.size()));
      if (fresh) {
        if (int32_t(sets.size()) >= max_states)
          throw ConstraintError("constraint too complex: its automaton needs more than " +
                                std::to_string(max_states) +
                                " DFA states (simplify the pattern or schema)");
        sets.push_back(b);
      }
      a.table_.push_back(it->second);
    }
  }
  sets.clear();

  // Prune states that cannot reach acceptance: reverse reachability from accepting states.
  const size_t n = a.accepting_.size(), k = a.n_classes_;
  std::vector<std::vector<int32_t>> preds(n);
  for (size_t s = 0; s < n; ++s)
    for (size_t c = 0; c < k; ++c)
      if (const int32_t t = a.table_[s * k + c]; t >= 0) preds[size_t(t)].push_back(int32_t(s));
  std::vector<uint8_t> live(n, 0);
  std::vector<int32_t> stack;
  for (size_t s = 0; s < n; ++s)
    if (a.accepting_[s]) {
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
  std::vector<int32_t> renum(n, kDead);
  int32_t next = 0;
  for (size_t s = 0; s < n; ++s)
    if (live[s]) renum[s] = next++;
  std::vector<int32_t> table(size_t(next) * k);
  std::vector<uint8_t> acc(static_cast<size_t>(next));
  for (size_t s = 0; s < n; ++s) {
    if (!live[s]) continue;
    acc[size_t(renum[s])] = a.accepting_[s];
    for (size_t c = 0; c < k; ++c) {
      const int32_t t = a.table_[s * k + c];
      table[size_t(renum[s]) * k + c] = t < 0 ? kDead : renum[size_t(t)];
    }
  }
  a.table_ = std::move(table);
  a.accepting_ = std::move(acc);
  return a;
}

std::string Automaton::forced_bytes(int32_t state) const {
  return forced_bytes_from(*this, state);
}

}  // namespace shrike::constrain
