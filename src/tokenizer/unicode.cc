#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

#include "tokenizer/unicode_data.h"

namespace shrike::tokenizer::unicode {
namespace {

namespace ud = unicode_data;

// The White_Space property (Unicode PropList.txt; unchanged since Unicode 6.3). Generated tables
// are not needed for 25 code points, and Python's str.isspace differs from White_Space.
bool is_white_space(uint32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

uint8_t lookup(uint32_t cp) {
  const ud::Range* end = ud::kRanges + ud::kNumRanges;
  const ud::Range* r = std::upper_bound(ud::kRanges, end, cp,
                                        [](uint32_t c, const ud::Range& x) { return c < x.first; });
  uint8_t f = 0;
  if (r != ud::kRanges && cp <= r[-1].last) f = r[-1].flags;
  if (is_white_space(cp)) f |= kSpace;
  return f;
}

// Classes of the first 64K code points, built once: nearly all text stays in the BMP.
const std::array<uint8_t, 0x10000>& bmp_table() {
  static const auto table = [] {
    std::array<uint8_t, 0x10000> t{};
    for (uint32_t cp = 0; cp < 0x10000; ++cp) t[cp] = lookup(cp);
    return t;
  }();
  return table;
}

}  // namespace

uint8_t classes(uint32_t cp) {
  if (cp < 0x10000) return bmp_table()[cp];
  if (cp >= kInvalidBase) return 0;
  return lookup(cp);
}

size_t utf8_char_len(std::string_view s, size_t i) {
  const auto c = uint8_t(s[i]);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2, cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3, cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto b = uint8_t(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
      (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
    return 0;
  return n;
}

void decode_utf8(std::string_view s, std::vector<uint32_t>& cps, std::vector<uint32_t>& offsets) {
  cps.clear();
  offsets.clear();
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_char_len(s, i);
    offsets.push_back(uint32_t(i));
    if (n == 0) {
      cps.push_back(kInvalidBase + uint8_t(s[i]));
      ++i;
      continue;
    }
    const auto c = uint8_t(s[i]);
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (uint8_t(s[i + k]) & 0x3F);
    cps.push_back(cp);
    i += n;
  }
  offsets.push_back(uint32_t(s.size()));
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp >= kInvalidBase) {
    out.push_back(char(cp - kInvalidBase));
  } else if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

void append_bert_normalized(uint32_t cp, std::string& out) {
  if (cp >= 0xAC00 && cp <= 0xD7A3) {  // Hangul syllable: NFD is algorithmic (Unicode 3.12)
    const uint32_t s = cp - 0xAC00;
    append_utf8(0x1100 + s / 588, out);
    append_utf8(0x1161 + (s % 588) / 28, out);
    if (s % 28) append_utf8(0x11A7 + s % 28, out);
    return;
  }
  const ud::BertMap* end = ud::kBertMap + ud::kNumBertMap;
  const ud::BertMap* m = std::lower_bound(
      ud::kBertMap, end, cp, [](const ud::BertMap& x, uint32_t c) { return x.cp < c; });
  if (m != end && m->cp == cp)
    out.append(ud::kBertBlob + m->offset, m->len);
  else
    append_utf8(cp, out);
}

bool is_bert_cjk(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

const char* version() {
  return ud::kUnicodeVersion;
}

}  // namespace shrike::tokenizer::unicode
