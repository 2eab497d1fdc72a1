#include "tokenizer/bpe.h"

#include <algorithm>
#include <stdexcept>

#include "tokenizer/unicode.h"

namespace shrike::tokenizer {
namespace {

bool printable(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteTables {
  std::array<uint32_t, 256> to_cp;
  std::array<int16_t, 512> from_cp;  // all mapped code points are < 0x144
  ByteTables() {
    from_cp.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      to_cp[b] = printable(b) ? uint32_t(b) : uint32_t(256 + extra++);
      from_cp[to_cp[b]] = int16_t(b);
    }
  }
};
const ByteTables& tables() {
  static const ByteTables t;
  return t;
}

}  // namespace

bool split_merge(const std::string& m, std::string_view& a, std::string_view& b) {
  const size_t sp = m.find(' ', 1);
  if (sp == std::string::npos || sp + 1 >= m.size()) return false;
  a = std::string_view(m).substr(0, sp);
  b = std::string_view(m).substr(sp + 1);
  return true;
}

uint32_t byte_to_codepoint(uint8_t b) {
  return tables().to_cp[b];
}

int byte_from_codepoint(uint32_t cp) {
  return cp < 512 ? tables().from_cp[cp] : -1;
}

std::string BpeModel::piece_bytes(std::string_view piece) {
  std::vector<uint32_t> cps, offs;
  unicode::decode_utf8(piece, cps, offs);
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i) {
    const int b = byte_from_codepoint(cps[i]);
    if (b >= 0)
      out.push_back(char(b));
    else  // not from the mapping (a malformed piece): keep its text
      out.append(piece.substr(offs[i], offs[i + 1] - offs[i]));
  }
  return out;
}

std::string check_merges(const std::vector<std::string>& pieces,
                         const std::vector<std::string>& merges) {
  std::unordered_map<std::string_view, int32_t> ids;
  ids.reserve(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) ids.emplace(pieces[i], int32_t(i));
  std::string joined;
  for (size_t i = 0; i < merges.size(); ++i) {
    std::string_view a, b;
    const std::string where =
        "tokenizer.ggml.merges[" + std::to_string(i) + "] '" + merges[i] + "'";
    if (!split_merge(merges[i], a, b)) return where + " is not two pieces separated by a space";
    joined.assign(a).append(b);
    for (std::string_view part : {a, b, std::string_view(joined)})
      if (!ids.count(part))
        return where + " names '" + std::string(part) + "', which is not a token";
  }
  return "";
}

BpeModel::BpeModel(const Vocab& v)
    : vocab_(v), pre_([&] {
        PreType t;
        if (!pre_type_from_name(v.pre, t))
          throw std::invalid_argument("tokenizer: unknown pre-tokenizer '" + v.pre + "'");
        return t;
      }()) {
  PreType t;
  pre_type_from_name(v.pre, t);
  ignore_merges_ = t == PreType::Llama3;
  piece_to_id_.reserve(v.pieces.size());
  for (size_t i = 0; i < v.pieces.size(); ++i)
    if (v.types[i] == TokenType::Normal || v.types[i] == TokenType::Unused ||
        v.types[i] == TokenType::Byte)
      piece_to_id_.emplace(v.pieces[i], int32_t(i));  // duplicates: the first id wins
  auto id_of = [&](std::string_view p) {
    const auto it = piece_to_id_.find(std::string(p));
    return it == piece_to_id_.end() ? -1 : it->second;
  };
  std::string s;
  for (int b = 0; b < 256; ++b) {
    s.clear();
    unicode::append_utf8(byte_to_codepoint(uint8_t(b)), s);
    byte_id_[b] = id_of(s);
  }
  merges_.reserve(v.merges.size());
  for (size_t i = 0; i < v.merges.size(); ++i) {
    std::string_view a, b;
    if (!split_merge(v.merges[i], a, b))
      throw std::invalid_argument("tokenizer: malformed merge '" + v.merges[i] + "'");
    const int32_t ia = id_of(a), ib = id_of(b), ir = id_of(std::string(a) + std::string(b));
    if (ia < 0 || ib < 0 || ir < 0)
      throw std::invalid_argument("tokenizer: merge '" + v.merges[i] + "' names an unknown piece");
    merges_.emplace(key(ia, ib), Merge{int32_t(i), ir});  // repeated pair: the first rank wins
  }
}

void BpeModel::encode(std::string_view text, std::vector<int32_t>& out) const {
  thread_local std::vector<std::pair<uint32_t, uint32_t>> words;
  pre_.split(text, words);
  for (const auto& [a, b] : words) encode_word(text.substr(a, b - a), out);
}

// Symbols form a linked list over the word's bytes; a min-heap holds adjacent pairs that have a
// merge, by rank then position. A popped entry is stale when either side has changed since.
void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    std::string mapped;
    for (char c : word) unicode::append_utf8(byte_to_codepoint(uint8_t(c)), mapped);
    if (const auto it = piece_to_id_.find(mapped); it != piece_to_id_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  struct Sym {
    int32_t id, prev, next;
  };
  struct Cand {
    int32_t rank, left, left_id, right_id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  thread_local std::vector<Sym> sym;
  thread_local std::vector<Cand> heap;
  sym.clear();
  heap.clear();
  for (size_t i = 0; i < word.size(); ++i)
    sym.push_back({byte_id_[uint8_t(word[i])], int32_t(i) - 1, int32_t(i) + 1});
  if (sym.empty()) return;
  sym.back().next = -1;
  auto try_add = [&](int32_t l) {
    if (l < 0) return;
    const int32_t r = sym[l].next;
    if (r < 0 || sym[l].id < 0 || sym[r].id < 0) return;
    const auto it = merges_.find(key(sym[l].id, sym[r].id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, l, sym[l].id, sym[r].id});
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (int32_t i = 0; i + 1 < int32_t(sym.size()); ++i) try_add(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const Cand c = heap.back();
    heap.pop_back();
    Sym& l = sym[c.left];
    if (l.id != c.left_id || l.next < 0 || sym[l.next].id != c.right_id) continue;  // stale
    Sym& r = sym[l.next];
    l.id = merges_.at(key(c.left_id, c.right_id)).result;
    r.id = -2;  // dead
    l.next = r.next;
    if (l.next >= 0) sym[l.next].prev = c.left;
    try_add(l.prev);
    try_add(c.left);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    if (sym[i].id >= 0)
      out.push_back(sym[i].id);
    else if (vocab_.unk_id >= 0)
      out.push_back(vocab_.unk_id);  // a byte without a piece (not in real vocabularies)
  }
}

}  // namespace shrike::tokenizer
