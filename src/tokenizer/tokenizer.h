// One tokenizer interface over the vocabulary kinds GGUF files carry: SentencePiece-style BPE
// ("llama"), byte-level BPE ("gpt2") and WordPiece ("bert"). Added tokens are split out of the
// text first (user-defined ones always, control ones only when asked), as llama.cpp and Hugging
// Face tokenizers do; the model of the vocabulary's kind encodes the text between them.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace shrike::tokenizer {

class SpmModel;
class BpeModel;
class WpmModel;

class Tokenizer {
 public:
  // Throws std::invalid_argument when the vocabulary is empty, its arrays differ in length, a
  // special id is out of range, or (byte-level BPE) merges or pre-tokenizer are invalid.
  explicit Tokenizer(Vocab v);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // Text -> ids: optional BOS, then the text. User-defined tokens written in the text become
  // their ids; control tokens ("<|endoftext|>", "[CLS]", ...) too when parse_special, otherwise
  // they are plain text. SPM: dummy-prefix space (add_space_prefix) at the start and after each
  // added token, as llama.cpp does.
  std::vector<int32_t> encode(std::string_view text, bool add_bos,
                              bool parse_special = false) const;

  // Text that continues an output (no BOS, no added-token scan, no SentencePiece dummy-prefix
  // space): how the tokenizer splits it mid-sequence, so a word's remainder ("anted") gets the
  // pieces that follow a piece inside the word. Constrained decoding emits forced text with it.
  std::vector<int32_t> encode_continuation(std::string_view text) const;

  // Text of one token: SPM "▁" -> ' ' and <0xXX> -> the byte; byte-level BPE pieces mapped back
  // to bytes; WordPiece "▁" -> ' '; user-defined tokens as written; control tokens -> "".
  // Throws std::out_of_range for an id outside [0, n_vocab).
  std::string token_to_piece(int32_t id) const;

  // Concatenated pieces, minus one leading space where encoding adds one (SPM dummy prefix,
  // WordPiece word starts). decode(encode(s)) == s for SPM and byte-level BPE text the vocabulary
  // can represent; WordPiece is lossy (case, accents, spacing).
  std::string decode(const std::vector<int32_t>& ids) const;

  // Whether decode drops the first decoded character when it is a space.
  bool strips_leading_space() const { return strip_leading_space_; }

  int32_t n_vocab() const { return vocab_->size(); }
  int32_t bos() const { return vocab_->bos_id; }
  int32_t eos() const { return vocab_->eos_id; }
  VocabKind kind() const { return vocab_->kind; }
  const Vocab& vocab() const { return *vocab_; }

 private:
  void encode_text(std::string_view text, std::vector<int32_t>& out) const;

  std::unique_ptr<const Vocab> vocab_;  // heap: the models keep references to it
  std::unique_ptr<SpmModel> spm_;
  std::unique_ptr<BpeModel> bpe_;
  std::unique_ptr<WpmModel> wpm_;
  // Added tokens by first byte, longest first (leftmost-longest matching).
  std::array<std::vector<int32_t>, 256> added_;
  std::vector<std::string> decoded_;  // token_to_piece per id, built once
  bool strip_leading_space_ = false;
};

}  // namespace shrike::tokenizer
