// SentencePiece-style BPE (GGUF tokenizer.ggml.model = "llama", llama2.c tok*.bin), matching
// SentencePiece's BPE model and llama.cpp's llm_tokenizer_spm.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace shrike::tokenizer {

// The symbols SentencePiece BPE starts from and may merge into, shared by the encoder (spm.cc)
// and the vocabulary trimmer (vocab_trim.cc), which replays the encoder's merges and must split
// characters and pick mergeable pieces exactly as it does.
// Length of the UTF-8 character at s[i]; 1 for any byte that does not start a well-formed
// sequence, so invalid input degrades to single bytes (which then take the byte fallback).
inline size_t spm_utf8_len(std::string_view s, size_t i) {
  const auto c = uint8_t(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k)
    if ((uint8_t(s[i + k]) & 0xC0) != 0x80) return 1;
  return n;
}
// The pieces merges may produce (first id wins when two share a text).
inline bool spm_mergeable(TokenType t) {
  return t == TokenType::Normal || t == TokenType::UserDefined || t == TokenType::Unused;
}

class SpmModel {
 public:
  explicit SpmModel(const Vocab& v);

  // Appends the ids of plain text: the dummy-prefix space when `prefix` (and the text is
  // non-empty), spaces as "▁", UTF-8 characters merged pairwise by highest piece score (leftmost
  // on ties), leftover symbols as <0xXX> byte tokens (or unk without byte pieces).
  // O(n log n) in the text length.
  void encode(std::string_view text, bool prefix, std::vector<int32_t>& out) const;

  // Text of a piece: "▁" -> ' ', <0xXX> -> that byte, control -> "".
  std::string piece_text(int32_t id) const;

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // Working memory of encode_chunk, reused across the chunks of one encode call.
  struct Symbol {
    int32_t prev, next;
    uint32_t pos, len;  // bytes of the chunk; len 0 once merged into its left neighbour
  };
  struct Pair {
    float score;
    int32_t left, right;
    uint32_t len;
  };
  struct Scratch {
    std::vector<Symbol> sym;
    std::vector<Pair> heap;
  };
  void encode_chunk(std::string_view s, Scratch& w, std::vector<int32_t>& out) const;

  const Vocab& vocab_;
  // Pieces BPE may produce (normal, user-defined, unused); SentencePiece never merges into
  // control, unknown or byte pieces, so text like "<s>" or "<0x41>" stays plain text.
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> piece_to_id_;
  std::array<int32_t, 256> byte_id_;  // <0xXX> token per byte, -1 when absent
  bool has_byte_pieces_ = false;
  // True when no mergeable piece has "▁" after a non-"▁" character: then no merge can cross the
  // boundary before a "▁" that follows another character, and encode works word by word (small
  // heaps, cache-friendly) with the same result as on the whole text.
  bool split_words_ = false;
};

}  // namespace shrike::tokenizer
