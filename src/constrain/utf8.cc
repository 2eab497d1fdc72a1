#include "constrain/utf8.h"

#include <algorithm>
#include <string>

#include "tokenizer/unicode.h"

namespace shrike::constrain {

void CodeSet::normalize() {
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (const auto& r : ranges_) {
    if (!out.empty() && r.first <= out.back().second + 1)
      out.back().second = std::max(out.back().second, r.second);
    else
      out.push_back(r);
  }
  ranges_ = std::move(out);
}

CodeSet CodeSet::complement() const {
  CodeSet c;
  uint32_t next = 0;
  for (const auto& [lo, hi] : ranges_) {
    if (lo > next) c.ranges_.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) c.ranges_.emplace_back(next, kMaxCodePoint);
  return c;
}

CodeSet CodeSet::intersect(const CodeSet& o) const {
  CodeSet c;
  for (const auto& a : ranges_)
    for (const auto& b : o.ranges_) {
      const uint32_t lo = std::max(a.first, b.first), hi = std::min(a.second, b.second);
      if (lo <= hi) c.ranges_.emplace_back(lo, hi);
    }
  c.normalize();
  return c;
}

void append_utf8(std::string& out, uint32_t cp) {
  tokenizer::unicode::append_utf8(
      cp, out);  // the tokenizer's encoder; code points here are < kInvalidBase
}

bool next_code_point(std::string_view s, size_t& i, uint32_t& cp) {
  const auto b0 = uint8_t(s[i]);
  size_t len;
  uint32_t min;
  if (b0 < 0x80) {
    cp = b0;
    ++i;
    return true;
  } else if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return false;
  }
  if (i + len > s.size()) return false;
  for (size_t k = 1; k < len; ++k) {
    const auto b = uint8_t(s[i + k]);
    if ((b & 0xC0) != 0x80) return false;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
  i += len;
  return true;
}

namespace {

void split(uint32_t lo, uint32_t hi, std::vector<ByteSeq>& out) {
  if (lo > hi) return;
  // Surrogates have no UTF-8 encoding.
  if (lo <= 0xDFFF && hi >= 0xD800) {
    if (lo < 0xD800) split(lo, 0xD7FF, out);
    if (hi > 0xDFFF) split(0xE000, hi, out);
    return;
  }
  // One encoded length per piece.
  for (uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu})
    if (lo <= edge && hi > edge) {
      split(lo, edge, out);
      split(edge + 1, hi, out);
      return;
    }
  if (hi < 0x80) {
    out.push_back({{uint8_t(lo), uint8_t(hi)}});
    return;
  }
  // Split until the trailing 6-bit groups span full ranges, so each byte is an interval.
  for (int i = 1; i < 4; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(a, lo);
  append_utf8(b, hi);
  ByteSeq s;
  for (size_t k = 0; k < a.size(); ++k) s.push_back({uint8_t(a[k]), uint8_t(b[k])});
  out.push_back(std::move(s));
}

}  // namespace

std::vector<ByteSeq> utf8_sequences(const CodeSet& set) {
  std::vector<ByteSeq> out;
  for (const auto& [lo, hi] : set.ranges()) split(lo, std::min(hi, kMaxCodePoint), out);
  return out;
}

}  // namespace shrike::constrain
