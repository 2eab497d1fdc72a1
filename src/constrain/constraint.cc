#include "constrain/constraint.h"

#include <stdexcept>

namespace shrike::constrain {

Constraint::Constraint(Automaton automaton, std::shared_ptr<const TokenVocab> vocab,
                       size_t cache_bytes)
    : automaton_(std::move(automaton)), vocab_(std::move(vocab)), cache_limit_(cache_bytes) {
  if (!vocab_) throw std::invalid_argument("constraint: no vocabulary");
  by_state_.resize(size_t(automaton_.n_states()) * 2);
}

// One pass over the trie in preorder, the automaton state of each depth on a stack; a dead
// state skips the node's whole subtree. At the start, a leading ' ' node is transparent: its
// subtree is matched from the unchanged state (the detokeniser drops that space), and a token
// that is that space alone is allowed as a no-op: SentencePiece-style tokenizers begin every
// encoded answer with it (the dummy prefix), so a model trained on such answers emits it first,
// and refusing it would push the model off its own distribution.
std::shared_ptr<const TokenMask> Constraint::compute(int32_t state, bool at_start) const {
  const TokenVocab& v = *vocab_;
  auto m = std::make_shared<TokenMask>();
  m->allowed = decode::TokenBitset(v.size());
  const auto& nodes = v.nodes();
  const auto& toks = v.node_tokens();
  std::vector<int32_t> st(size_t(v.max_depth()) + 1);
  st[0] = state;
  const bool strip = at_start && v.strip_leading_space();
  for (size_t i = 1; i < nodes.size();) {
    const TokenVocab::Node& n = nodes[i];
    const bool transparent = strip && n.depth == 1 && n.byte == ' ';
    const int32_t s = transparent ? state : automaton_.step(st[n.depth - 1], n.byte);
    if (s < 0) {
      i = size_t(n.skip);
      continue;
    }
    st[n.depth] = s;
    for (int32_t k = n.tok_begin; k < n.tok_end; ++k) m->allowed.set(toks[size_t(k)]);
    ++i;
  }
  if (v.eos() >= 0 && automaton_.accepting(state)) m->allowed.set(v.eos());
  m->count = m->allowed.count();
  if (m->count == 1) m->only = int32_t(m->allowed.first());
  return m;
}

std::shared_ptr<const TokenMask> Constraint::mask(int32_t state, bool at_start) const {
  if (state < 0 || state >= automaton_.n_states())
    throw std::out_of_range("constraint: automaton state out of range");
  const size_t slot = size_t(state) * 2 + (at_start && vocab_->strip_leading_space());
  {
    std::lock_guard lock(mu_);
    if (by_state_[slot]) return by_state_[slot];
  }
  auto m = compute(state, at_start);
  uint64_t h = 1469598103934665603ull;
  for (uint64_t w : m->allowed.words()) h = (h ^ w) * 1099511628211ull;
  std::lock_guard lock(mu_);
  ++computed_;
  if (by_state_[slot]) return by_state_[slot];
  auto& same = by_hash_[h];
  for (const auto& other : same)
    if (other->allowed.words() == m->allowed.words()) return by_state_[slot] = other;
  const size_t bytes = m->allowed.words().size() * 8;
  if (cached_bytes_ + bytes > cache_limit_) return m;
  cached_bytes_ += bytes;
  same.push_back(m);
  return by_state_[slot] = m;
}

int32_t Constraint::next(int32_t state, bool at_start, int32_t token) const {
  const TokenVocab& v = *vocab_;
  if (state < 0 || token < 0 || token >= v.size()) return kDead;
  if (token == v.eos()) return automaton_.accepting(state) ? state : kDead;
  if (!v.usable(token)) return kDead;
  std::string_view b = v.bytes(token);
  if (at_start && v.strip_leading_space() && b[0] == ' ') {
    b.remove_prefix(1);
    if (b.empty()) return state;  // the dropped space alone: nothing is output
  }
  return automaton_.walk(state, b);
}

int64_t Constraint::masks_computed() const {
  std::lock_guard lock(mu_);
  return computed_;
}

size_t Constraint::distinct_masks() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [h, list] : by_hash_) n += list.size();
  return n;
}

ConstraintState::ConstraintState(std::shared_ptr<const Constraint> c)
    : c_(std::move(c)), state_(c_->automaton().start()), at_start_(true) {}

const decode::TokenBitset& ConstraintState::allowed_mask() {
  if (!mask_) mask_ = c_->mask(state_, at_start_);
  return mask_->allowed;
}

bool ConstraintState::advance(int32_t token) {
  if (ended_) return false;
  const int32_t next = c_->next(state_, at_start_, token);
  if (next < 0) return false;
  if (token == c_->vocab().eos()) ended_ = true;
  if (next != state_ || at_start_) mask_.reset();
  state_ = next;
  at_start_ = false;
  return true;
}

std::vector<int32_t> ConstraintState::forced_tokens(size_t max) const {
  std::vector<int32_t> out;
  if (ended_) return out;
  int32_t state = state_;
  bool start = at_start_;
  while (out.size() < max) {
    const auto m = c_->mask(state, start);
    if (m->count != 1 || m->only == c_->vocab().eos()) break;
    out.push_back(m->only);
    state = c_->next(state, start, m->only);
    start = false;
  }
  return out;
}

bool ConstraintState::is_complete() const {
  if (ended_) return true;
  if (!accepting()) return false;
  const auto m = c_->mask(state_, at_start_);
  return m->count == 0 || (m->count == 1 && m->only == c_->vocab().eos());
}

}  // namespace shrike::constrain
