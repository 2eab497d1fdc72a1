// A small backtracking regex matcher over code points, for the pre-tokeniser patterns of
// byte-level BPE vocabularies. std::regex has no \p{..} classes and is slow; the patterns need
// only this subset, with Perl/Oniguruma leftmost-first semantics (what Hugging Face tokenizers,
// which made the reference ids, uses):
//   literals (UTF-8), \r \n \t \s \S \p{L} \p{N} \p{P}, escaped punctuation, [...] classes with
//   ranges, negation and the escapes above, (?:...), (?!...), |, ? * + {m} {m,n}, and $ (end of
//   the input). No captures.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace shrike::tokenizer {

class Regex {
 public:
  // Throws std::invalid_argument on syntax it does not support.
  explicit Regex(std::string_view pattern);

  // Length of the match starting exactly at cps[pos] (-1 for none), within cps[0, end). cls[i]
  // holds unicode::classes(cps[i]).
  int64_t match_at(const uint32_t* cps, const uint8_t* cls, size_t pos, size_t end) const;

 private:
  struct Class {
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    uint8_t cls_any = 0;  // matches when the code point has any of these class bits
    bool negated = false;
    bool matches(uint32_t cp, uint8_t c) const;
  };
  enum Op : uint8_t { kClass, kSplit, kJmp, kMatch, kEnd, kNegLook };
  struct Inst {
    Op op;
    int32_t x = 0, y = 0;  // kClass: class index; kSplit: preferred x, then y; kJmp/kNegLook: x
  };
  struct Parser;
  using Stack = std::vector<std::pair<int32_t, size_t>>;
  bool run(int32_t pc, size_t sp, const uint32_t* cps, const uint8_t* cls, size_t end,
           size_t& match_end, Stack& stack) const;

  std::vector<Inst> prog_;
  std::vector<Class> classes_;
};

}  // namespace shrike::tokenizer
