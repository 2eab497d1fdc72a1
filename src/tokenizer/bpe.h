// Byte-level BPE (GGUF tokenizer.ggml.model = "gpt2"): GPT-2's byte-to-unicode mapping, a
// pre-tokeniser per model family, then merges by rank within each word, as Hugging Face's BPE
// model does (lowest rank first, leftmost on ties).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pretokenize.h"
#include "tokenizer/vocab.h"

namespace shrike::tokenizer {

// GPT-2's reversible byte <-> code point mapping: printable Latin-1 bytes map to themselves, the
// other 68 bytes to U+0100.. in order, so every byte string is a string of visible characters.
uint32_t byte_to_codepoint(uint8_t b);
int byte_from_codepoint(uint32_t cp);  // -1 for a code point outside the mapping

class BpeModel {
 public:
  // Throws std::invalid_argument for an unknown tokenizer.ggml.pre or a merge whose parts or
  // result are not pieces (vocab_from_gguf reports these as FileError first).
  explicit BpeModel(const Vocab& v);

  // Appends the ids of plain text (no added tokens in it).
  void encode(std::string_view text, std::vector<int32_t>& out) const;

  // Text of a normal piece: its characters mapped back to bytes.
  static std::string piece_bytes(std::string_view piece);

 private:
  struct Merge {
    int32_t rank, result;
  };
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  static uint64_t key(int32_t a, int32_t b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }

  const Vocab& vocab_;
  PreTokenizer pre_;
  bool ignore_merges_ = false;  // Llama-3: a word that is a piece is taken whole
  std::unordered_map<std::string, int32_t> piece_to_id_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank, merged id
  std::array<int32_t, 256> byte_id_;            // piece of each single byte, -1 when absent
};

// "left right": splits a merge at the first space after the first character (a merge part is
// never empty; llama.cpp splits the same way). False when there is no such space.
bool split_merge(const std::string& m, std::string_view& a, std::string_view& b);

// Parses merges against pieces; returns "" or a message naming the first bad entry.
std::string check_merges(const std::vector<std::string>& pieces,
                         const std::vector<std::string>& merges);

}  // namespace shrike::tokenizer
