// Sets of Unicode code points and their UTF-8 encodings as byte-range sequences, so '.' and
// classes over non-ASCII characters become byte automata that accept exactly the valid UTF-8
// encodings of their members (never surrogates, never overlong forms).
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "constrain/nfa.h"

namespace shrike::constrain {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Sorted, disjoint, non-adjacent inclusive ranges.
class CodeSet {
 public:
  CodeSet() = default;
  static CodeSet of(uint32_t lo, uint32_t hi) {
    CodeSet s;
    s.add(lo, hi);
    return s;
  }
  void add(uint32_t lo, uint32_t hi) { ranges_.emplace_back(lo, hi), normalize(); }
  void add(const CodeSet& o) {
    ranges_.insert(ranges_.end(), o.ranges_.begin(), o.ranges_.end());
    normalize();
  }
  CodeSet complement() const;
  CodeSet intersect(const CodeSet& o) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }

 private:
  void normalize();
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;
};

// The UTF-8 encodings of the set's members as alternatives of byte-range sequences (the
// construction of Rust's utf8-ranges: split each range until every byte position is a range).
std::vector<ByteSeq> utf8_sequences(const CodeSet& set);

// Appends the UTF-8 encoding of cp.
void append_utf8(std::string& out, uint32_t cp);

// Decodes the code point at s[i], advancing i. Returns false for invalid UTF-8.
bool next_code_point(std::string_view s, size_t& i, uint32_t& cp);

}  // namespace shrike::constrain
