// Generated Unicode tables (unicode_data.cc, made by gen_unicode_data.py); read them through
// unicode.h.
#pragma once

#include <cstddef>
#include <cstdint>

namespace shrike::tokenizer::unicode_data {

enum Flag : uint8_t { kLetter = 1, kNumber = 2, kPunct = 4, kOther = 8, kMark = 16 };

// Code points first..last share the general-category flags `flags`; sorted, disjoint; code
// points in no range have no flag.
struct Range {
  uint32_t first, last;
  uint8_t flags;
};
// BERT normalisation of one code point (NFD, non-spacing marks dropped, lower-cased) where it is
// not the code point itself: `len` UTF-8 bytes at kBertBlob + offset. Sorted by cp.
struct BertMap {
  uint32_t cp;
  uint32_t offset;
  uint8_t len;
};

extern const char kUnicodeVersion[];
extern const Range kRanges[];
extern const size_t kNumRanges;
extern const BertMap kBertMap[];
extern const size_t kNumBertMap;
extern const char kBertBlob[];

}  // namespace shrike::tokenizer::unicode_data
