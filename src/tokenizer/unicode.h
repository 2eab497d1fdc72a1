// Unicode helpers for the tokenizers: UTF-8 <-> code points (lossless for invalid bytes),
// character classes from the generated tables, White_Space, and BERT's normalisation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shrike::tokenizer::unicode {

// Class bits of one code point: general category groups (from unicode_data.cc) plus White_Space.
enum Cls : uint8_t {
  kLetter = 1,  // \p{L}
  kNumber = 2,  // \p{N}
  kPunct = 4,   // \p{P}
  kOther = 8,   // \p{C} (controls, format, unassigned, private use, surrogates)
  kMark = 16,   // \p{M}
  kSpace = 32,  // White_Space property (what \s means in the reference regex engines)
};

// Code points above this stand for one byte of invalid UTF-8 (kInvalidBase + byte): they belong to
// no class, so they behave like a symbol, and the byte survives unchanged.
constexpr uint32_t kInvalidBase = 0x110000;

uint8_t classes(uint32_t cp);

// Length of the well-formed UTF-8 character at s[i] (overlongs, surrogates and > U+10FFFF are not
// well formed), or 0 when s[i] does not start one.
size_t utf8_char_len(std::string_view s, size_t i);

// Decodes s; each invalid byte becomes kInvalidBase + byte. offsets gets the byte offset of each
// code point plus a final s.size().
void decode_utf8(std::string_view s, std::vector<uint32_t>& cps, std::vector<uint32_t>& offsets);

void append_utf8(uint32_t cp, std::string& out);  // kInvalidBase + b appends the raw byte b

// BERT's basic normalisation of one code point, appended to out: NFD, non-spacing marks dropped,
// lower-cased (HF BertNormalizer with lowercase and strip_accents).
void append_bert_normalized(uint32_t cp, std::string& out);

// The CJK Unified Ideograph blocks BERT's tokenizer puts spaces around (its _is_chinese_char).
bool is_bert_cjk(uint32_t cp);

const char* version();  // Unicode version of the generated tables

}  // namespace shrike::tokenizer::unicode
