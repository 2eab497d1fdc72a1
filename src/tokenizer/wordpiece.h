// WordPiece (GGUF tokenizer.ggml.model = "bert"), as Hugging Face's BertNormalizer (clean text,
// spaces around CJK ideographs, accents stripped, lower-cased), BertPreTokenizer (split on
// whitespace and around each punctuation character) and WordPiece model (greedy longest match
// first, one [UNK] for a word that cannot be covered).
//
// GGUF stores BERT vocabularies in "phantom space" form (llama.cpp's converter): a word-initial
// piece "foo" as "▁foo", a continuation "##bar" as "bar", bracketed specials unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace shrike::tokenizer {

class WpmModel {
 public:
  explicit WpmModel(const Vocab& v);

  // Appends the ids of plain text (no added tokens in it).
  void encode(std::string_view text, std::vector<int32_t>& out) const;

 private:
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  const Vocab& vocab_;
  std::unordered_map<std::string, int32_t> start_;         // word-initial pieces, "▁" removed
  std::unordered_map<std::string, int32_t> continuation_;  // "##" pieces, "##" removed
};

}  // namespace shrike::tokenizer
