#include "constrain/constraint.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

#include "core/memory_release.h"

namespace shrike::constrain {

Constraint::Constraint(Automaton automaton, std::shared_ptr<const TokenVocab> vocab,
                       size_t cache_bytes)
    : automaton_(std::move(automaton)), vocab_(std::move(vocab)), cache_limit_(cache_bytes) {
  if (!vocab_) throw std::invalid_argument("constraint: no vocabulary");
  by_state_.resize(size_t(automaton_.n_states()) * 2);
  find_states_near_holes();
}

Constraint::~Constraint() {
  const size_t table = size_t(automaton_.n_states()) * size_t(automaton_.n_classes()) * 4;
  if (table + cached_bytes_ + by_state_.size() * sizeof(by_state_[0]) >= (size_t(1) << 20))
    request_memory_release();
}

namespace {

// One pass over the trie in preorder, the automaton state of each depth on a stack; a dead
// state skips the node's whole subtree. At the start, a leading ' ' node is transparent: its
// subtree is matched from the unchanged state (the detokeniser drops that space), and a token
// that is that space alone is allowed as a no-op: SentencePiece-style tokenizers begin every
// encoded answer with it (the dummy prefix), so a model trained on such answers emits it first,
// and refusing it would push the model off its own distribution.
template <class Step>
std::shared_ptr<TokenMask> walk_trie(const TokenVocab& v, int32_t state, bool at_start,
                                     bool accepting, Step step) {
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
    const int32_t s = transparent ? state : step(st[n.depth - 1], n.byte);
    if (s < 0) {
      i = size_t(n.skip);
      continue;
    }
    st[n.depth] = s;
    for (int32_t k = n.tok_begin; k < n.tok_end; ++k) m->allowed.set(toks[size_t(k)]);
    ++i;
  }
  if (v.eos() >= 0 && accepting) m->allowed.set(v.eos());
  m->count = m->allowed.count();
  if (m->count == 1) m->only = int32_t(m->allowed.first());
  return m;
}

}  // namespace

// The strings the automaton accepts from `state`, when they are few and short (a choice list
// and the like): false for a language too large (the caller has checked it is finite).
static bool finite_language(const Automaton& a, int32_t state, std::string& prefix,
                            std::vector<std::string>& out, int64_t& budget) {
  constexpr size_t kMaxStrings = 512, kMaxLength = 512;
  // Each visit scans 256 bytes: a few thousand visits at most, once per state (masks are cached).
  if (prefix.size() > kMaxLength || --budget < 0) return false;
  if (a.accepting(state)) {
    if (out.size() >= kMaxStrings) return false;
    out.push_back(prefix);
  }
  for (int b = 0; b < 256; ++b) {
    const int32_t t = a.step(state, uint8_t(b));
    if (t < 0) continue;
    prefix.push_back(char(b));
    const bool ok = finite_language(a, t, prefix, out, budget);
    prefix.pop_back();
    if (!ok) return false;
  }
  return true;
}

std::shared_ptr<const TokenMask> Constraint::compute(int32_t state, bool at_start) const {
  std::shared_ptr<TokenMask> m =
      holes_ ? walk_trie(*vocab_, state, at_start, accepting(state),
                         [this](int32_t s, uint8_t b) { return step(s, b); })
             : walk_trie(*vocab_, state, at_start, automaton_.accepting(state),
                         [this](int32_t s, uint8_t b) { return automaton_.step(s, b); });
  // Where several tokens could spell what comes next, the tokenizer's own tokens (see
  // TokenVocab::encode): over a small finite language each remaining string's first token;
  // otherwise, for text every continuation begins with, that text's first token.
  if (m->count > 1 && vocab_->has_encoder() &&
      !(holes_ == nullptr && canonical_only(*m, state, at_start)))
    canonical_forced_text(*m, state, at_start);
  return m;
}

std::vector<int32_t> Constraint::encoder_tokens(int32_t state, bool at_start,
                                                const std::string& text, int32_t& end) const {
  const TokenVocab& v = *vocab_;
  const std::vector<int32_t> tokens = v.encode(text);
  std::string spelled;
  end = state;
  for (int32_t t : tokens) {
    if (t < 0 || t >= v.size() || !v.usable(t)) return {};
    spelled += v.bytes(t);
    if ((end = next(end, at_start, t)) < 0) return {};
    at_start = false;
  }
  if (spelled != text) return {};
  return tokens;
}

bool Constraint::canonical_only(TokenMask& m, int32_t state, bool at_start) const {
  // Over a small finite language (choices), a token is allowed only where it is the encoder's
  // first token for one of the strings that remain: a choice then costs the tokens its
  // tokenization has, not whatever split a model happens to sample ("talk to a human" in 4
  // tokens, never 11 that a max_tokens of 4 would cut). Each string's tokens must spell it and
  // stay alive, or nothing is restricted.
  std::call_once(finite_once_, [this] {
    // Peel states whose successors are all peeled, from the sinks up: what remains reaches a
    // cycle (an infinite language: a JSON string, a repetition).
    const Automaton& a = automaton_;
    const int32_t n = a.n_states();
    std::vector<std::vector<int32_t>> preds(static_cast<size_t>(n));
    std::vector<int32_t> out_degree(static_cast<size_t>(n), 0);
    for (int32_t s = 0; s < n; ++s) {
      std::vector<int32_t> succ;
      for (int b = 0; b < 256; ++b)
        if (const int32_t t = a.step(s, uint8_t(b)); t >= 0) succ.push_back(t);
      std::sort(succ.begin(), succ.end());
      succ.erase(std::unique(succ.begin(), succ.end()), succ.end());
      out_degree[size_t(s)] = int32_t(succ.size());
      for (int32_t t : succ) preds[size_t(t)].push_back(s);
    }
    finite_.assign(size_t(n), 0);
    std::vector<int32_t> ready;
    for (int32_t s = 0; s < n; ++s)
      if (out_degree[size_t(s)] == 0) ready.push_back(s);
    while (!ready.empty()) {
      const int32_t s = ready.back();
      ready.pop_back();
      finite_[size_t(s)] = 1;
      for (int32_t p : preds[size_t(s)])
        if (--out_degree[size_t(p)] == 0) ready.push_back(p);
    }
  });
  if (!finite_[size_t(state)]) return false;
  std::vector<std::string> rest;
  std::string prefix;
  int64_t budget = 4096;
  if (!finite_language(automaton_, state, prefix, rest, budget)) return false;
  const TokenVocab& v = *vocab_;
  const bool space = at_start && v.strip_leading_space();  // the dropped dummy-prefix space
  decode::TokenBitset allowed(v.size());
  for (const std::string& r : rest) {
    if (r.empty()) {  // the text may end here: EOS stays
      if (v.eos() >= 0) allowed.set(v.eos());
      continue;
    }
    int32_t end = kDead;
    const std::vector<int32_t> tokens = encoder_tokens(state, at_start, space ? " " + r : r, end);
    if (tokens.empty()) return false;
    allowed.set(tokens.front());
  }
  for (int64_t i = 0; i < allowed.size(); ++i)
    if (allowed.test(i) && !m.allowed.test(i)) return false;  // (cannot happen: a guard)
  m.allowed = std::move(allowed);
  m.count = m.allowed.count();
  m.only = m.count == 1 ? int32_t(m.allowed.first()) : -1;
  return true;
}

void Constraint::canonical_forced_text(TokenMask& m, int32_t state, bool at_start) const {
  const TokenVocab& v = *vocab_;
  if (at_start) return;  // (the first token: leave its spacing to the model)
  const std::string text = forced_bytes(state);
  if (text.empty()) return;
  int32_t s = kDead;
  const std::vector<int32_t> tokens = encoder_tokens(state, false, text, s);
  if (tokens.empty() || !m.allowed.test(tokens.front())) return;
  // A token allowed here that runs past the forced text (`":{"` when the text is `":{` and a key's
  // quote follows) is how the encoder writes the whole answer; forcing the text's own tokens
  // (`":` `{`) would hand the model a split it never saw in training. Such a position stays the
  // model's choice: a near-character task tokenizer lost 30 points of slot F1 to it.
  const std::vector<uint64_t>& words = m.allowed.words();
  for (size_t w = 0; w < words.size(); ++w)
    for (uint64_t bits = words[w]; bits; bits &= bits - 1) {
      const int64_t t = int64_t(w * 64) + std::countr_zero(bits);
      if (t < v.size() && v.bytes(int32_t(t)).size() > text.size()) return;
    }
  // The text's last token may be the start of a longer one that spans what follows (" a" of
  // " an agent"): it is forced only where the text ends the constraint.
  if (tokens.size() == 1) {
    if (!accepting(s)) return;
    for (int b = 0; b < 256; ++b)
      if (step(s, uint8_t(b)) >= 0) return;
  }
  m.allowed = decode::TokenBitset(v.size());
  m.allowed.set(tokens.front());
  m.count = 1;
  m.only = tokens.front();
}

std::shared_ptr<const TokenMask> Constraint::mask(int32_t state, bool at_start) const {
  if (state < 0 || state >= n_states())
    throw std::out_of_range("constraint: automaton state out of range");
  if (holes_) {
    if (state < holes_->automaton_.n_states() && !holes_->near_hole_[size_t(state)])
      return holes_->mask(state, at_start);  // shared and cached across requests
    const int32_t key = state * 2 + (at_start && vocab_->strip_leading_space());
    {
      std::lock_guard lock(mu_);
      if (const auto it = local_.find(key); it != local_.end()) return it->second;
    }
    std::shared_ptr<const TokenMask> m = compute(state, at_start);
    std::lock_guard lock(mu_);
    ++computed_;
    return local_.emplace(key, std::move(m)).first->second;
  }
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
  if (!holes_) return automaton_.walk(state, b);
  for (char c : b)
    if ((state = step(state, uint8_t(c))) < 0) break;
  return state;
}

int32_t Constraint::step(int32_t state, uint8_t byte) const {
  if (!holes_) return automaton_.step(state, byte);
  if (state < 0) return kDead;
  const Automaton& a = holes_->automaton_;
  const int32_t n_base = a.n_states(), n_fill = fill_.n_states();
  // Into a base state; a hole state is entered as its fill's start.
  auto enter = [&](int32_t t) {
    if (t < 0) return kDead;
    const int32_t hole = hole_index_[size_t(t)];
    return hole < 0 ? t : n_base + hole * n_fill + fill_.start();
  };
  if (state < n_base) return enter(a.step(state, byte));
  const int32_t hole = (state - n_base) / n_fill, f = (state - n_base) % n_fill;
  // Where the fill may end, the bytes after the hole take over (the fill never shares a first
  // byte with them: the caller's contract, e.g. JSON string content and its closing quote).
  if (fill_.accepting(f)) {
    const int32_t after = a.step(a.step(hole_states_[size_t(hole)], kHoleByte), byte);
    if (after >= 0) return enter(after);
  }
  const int32_t g = fill_.step(f, byte);
  return g < 0 ? kDead : n_base + hole * n_fill + g;
}

bool Constraint::accepting(int32_t state) const {
  if (!holes_) return automaton_.accepting(state);
  return state >= 0 && state < holes_->automaton_.n_states() && holes_->automaton_.accepting(state);
}

int32_t Constraint::n_states() const {
  if (!holes_) return automaton_.n_states();
  return holes_->automaton_.n_states() + int32_t(hole_states_.size()) * fill_.n_states();
}

std::string Constraint::forced_bytes(int32_t state) const {
  if (!holes_) return automaton_.forced_bytes(state);
  return forced_bytes_from(*this, state);  // over the spliced states
}

void Constraint::find_states_near_holes() {
  const Automaton& a = automaton_;
  const int32_t n = a.n_states();
  bool any = false;
  for (int32_t s = 0; s < n && !any; ++s) any = a.step(s, kHoleByte) >= 0;
  if (!any) return;
  // Distance in bytes from each state to the nearest hole state (reverse breadth-first search).
  std::vector<std::vector<int32_t>> preds(static_cast<size_t>(n));
  for (int32_t s = 0; s < n; ++s)
    for (int b = 0; b < 256; ++b)
      if (b != kHoleByte)
        if (const int32_t t = a.step(s, uint8_t(b)); t >= 0) preds[size_t(t)].push_back(s);
  std::vector<int32_t> dist(size_t(n), -1), queue;
  for (int32_t s = 0; s < n; ++s)
    if (a.step(s, kHoleByte) >= 0) dist[size_t(s)] = 0, queue.push_back(s);
  for (size_t q = 0; q < queue.size(); ++q)
    for (int32_t p : preds[size_t(queue[q])])
      if (dist[size_t(p)] < 0) dist[size_t(p)] = dist[size_t(queue[q])] + 1, queue.push_back(p);
  near_hole_.assign(size_t(n), 0);
  for (int32_t s = 0; s < n; ++s)
    near_hole_[size_t(s)] = dist[size_t(s)] >= 0 && dist[size_t(s)] <= vocab_->max_depth();
}

std::shared_ptr<const Constraint> Constraint::with_holes_filled(
    std::shared_ptr<const Constraint> holes, Automaton fill) {
  if (!holes || holes->holes_ || holes->near_hole_.empty())
    throw std::invalid_argument("constraint: with_holes_filled needs a constraint with holes");
  auto c = std::shared_ptr<Constraint>(new Constraint(holes->vocab_));
  const Automaton& a = holes->automaton_;
  c->hole_index_.assign(size_t(a.n_states()), -1);
  for (int32_t s = 0; s < a.n_states(); ++s) {
    if (a.step(s, kHoleByte) < 0) continue;
    for (int b = 0; b < 256; ++b)
      if (b != kHoleByte && a.step(s, uint8_t(b)) >= 0)
        throw std::invalid_argument("constraint: a hole state with another edge");
    c->hole_index_[size_t(s)] = int32_t(c->hole_states_.size());
    c->hole_states_.push_back(s);
  }
  c->fill_ = std::move(fill);
  c->holes_ = std::move(holes);
  return c;
}

Constraint::Constraint(std::shared_ptr<const TokenVocab> vocab)
    : vocab_(std::move(vocab)), cache_limit_(0) {}

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
