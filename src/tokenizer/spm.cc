#include "tokenizer/spm.h"

#include <algorithm>

namespace shrike::tokenizer {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581

// Does the piece hold "▁" after some other character (e.g. "a▁")?
bool marker_after_text(std::string_view p) {
  size_t i = 0;
  while (p.substr(i, 3) == kSpaceMarker) i += 3;
  return p.find(kSpaceMarker, i) != std::string_view::npos;
}

}  // namespace

SpmModel::SpmModel(const Vocab& v) : vocab_(v) {
  byte_id_.fill(-1);
  split_words_ = true;
  for (size_t id = 0; id < vocab_.pieces.size(); ++id) {
    const std::string& p = vocab_.pieces[id];
    const TokenType t = vocab_.types[id];
    if (spm_mergeable(t)) {
      piece_to_id_.emplace(p, int32_t(id));  // duplicates: the first id wins
      if (marker_after_text(p)) split_words_ = false;
    }
    if (t == TokenType::Byte && p.size() == 6 && p.compare(0, 3, "<0x") == 0) {
      const int b = std::stoi(p.substr(3, 2), nullptr, 16);
      if (byte_id_[b] < 0) byte_id_[b] = int32_t(id);
      has_byte_pieces_ = true;
    }
  }
}

std::string SpmModel::piece_text(int32_t id) const {
  const std::string& p = vocab_.pieces[id];
  const TokenType t = vocab_.types[id];
  if (t == TokenType::Control) return "";
  if (t == TokenType::Byte && p.size() == 6 && p.compare(0, 3, "<0x") == 0)
    return std::string(1, char(std::stoi(p.substr(3, 2), nullptr, 16)));
  std::string d;
  for (size_t i = 0; i < p.size();) {
    if (std::string_view(p).substr(i, 3) == kSpaceMarker) {
      d.push_back(' ');
      i += 3;
    } else {
      d.push_back(p[i++]);
    }
  }
  return d;
}

void SpmModel::encode(std::string_view text, bool prefix, std::vector<int32_t>& out) const {
  if (text.empty()) return;

  // SentencePiece normalisation for these models: dummy prefix, then every ' ' -> "▁".
  std::string s;
  s.reserve(text.size() + text.size() / 2 + 3);
  if (prefix) s.append(kSpaceMarker);
  for (char c : text) {
    if (c == ' ')
      s.append(kSpaceMarker);
    else
      s.push_back(c);
  }
  out.reserve(out.size() + text.size() / 3);

  Scratch w;
  if (!split_words_) {
    encode_chunk(s, w, out);
    return;
  }
  // Cut before each "▁" that follows another character ("a▁b" -> "a", "▁b"; "▁▁b" stays whole).
  size_t start = 0;
  for (size_t i = 3; i + 3 <= s.size(); ++i) {
    if (std::string_view(s).substr(i, 3) == kSpaceMarker &&
        std::string_view(s).substr(i - 3, 3) != kSpaceMarker && i > start) {
      encode_chunk(std::string_view(s).substr(start, i - start), w, out);
      start = i;
    }
  }
  encode_chunk(std::string_view(s).substr(start), w, out);
}

// BPE over one chunk, as SentencePiece's bpe_model.cc / llama.cpp's llm_tokenizer_spm: symbols
// form a linked list over the text; a max-heap holds candidate adjacent pairs whose concatenation
// is a piece, best score first and leftmost on ties. Entries made stale by an earlier merge are
// recognised by their length no longer matching and skipped.
void SpmModel::encode_chunk(std::string_view s, Scratch& w, std::vector<int32_t>& out) const {
  auto worse = [](const Pair& a, const Pair& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::vector<Symbol>& sym = w.sym;
  std::vector<Pair>& heap = w.heap;
  sym.clear();
  heap.clear();
  for (size_t i = 0; i < s.size();) {
    const size_t n = spm_utf8_len(s, i);
    const auto idx = int32_t(sym.size());
    sym.push_back({idx - 1, idx + 1, uint32_t(i), uint32_t(n)});
    i += n;
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t len = sym[l].len + sym[r].len;
    const auto it = piece_to_id_.find(s.substr(sym[l].pos, len));
    if (it == piece_to_id_.end()) return;
    heap.push_back({vocab_.scores[it->second], l, r, len});
    std::push_heap(heap.begin(), heap.end(), worse);
  };
  for (int32_t i = 1; i < int32_t(sym.size()); ++i) try_add(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    const Pair p = heap.back();
    heap.pop_back();
    Symbol& l = sym[p.left];
    Symbol& r = sym[p.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != p.len) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = p.left;
    try_add(l.prev, p.left);
    try_add(p.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    const std::string_view text = s.substr(sym[i].pos, sym[i].len);
    if (const auto it = piece_to_id_.find(text); it != piece_to_id_.end()) {
      out.push_back(it->second);
    } else if (has_byte_pieces_) {
      // Byte fallback, one token per byte (a byte with no piece of its own becomes unk).
      for (char c : text) {
        const int32_t id = byte_id_[uint8_t(c)];
        if (id >= 0 || vocab_.unk_id >= 0) out.push_back(id >= 0 ? id : vocab_.unk_id);
      }
    } else if (vocab_.unk_id >= 0) {
      out.push_back(vocab_.unk_id);  // SentencePiece without byte fallback: one unk per symbol
    }
  }
}

}  // namespace shrike::tokenizer
