// Tokenizer vocabularies: pieces, scores, token types (and merges for byte-level BPE) read from a
// GGUF file (tokenizer.ggml.model "llama", "gpt2" or "bert") or a llama2.c tok*.bin file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/file_buffer.h"  // FileError

namespace shrike::gguf {
class GgufFile;
}

namespace shrike::tokenizer {

// Token kinds, numbered as GGUF's tokenizer.ggml.token_type (and SentencePiece) store them.
enum class TokenType : int32_t {
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,  // "<0xXX>": byte-fallback piece standing for one raw byte
};

enum class VocabKind {
  Spm,  // SentencePiece-style BPE ("llama"): pieces use U+2581 ("▁") for a space
  Bpe,  // byte-level BPE ("gpt2"): pieces in GPT-2's byte-to-unicode form, ranked merges
  Wpm,  // WordPiece ("bert"): word-initial pieces start with "▁", continuations do not
};

// pieces, scores and types are indexed by token id and have the same length.
struct Vocab {
  VocabKind kind = VocabKind::Spm;
  std::vector<std::string> pieces;
  std::vector<float> scores;  // BPE merge priority: higher merges first
  std::vector<TokenType> types;
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;  // -1: none
  bool add_bos = true;  // what the model expects by default at the start of a prompt
  bool add_eos = false;
  bool add_space_prefix = true;     // SentencePiece "dummy prefix": text starts with "▁"
  std::vector<std::string> merges;  // Bpe: "left right", highest priority first
  std::string pre;                  // Bpe: tokenizer.ggml.pre ("" when absent)

  int32_t size() const { return int32_t(pieces.size()); }
};

// Reads a llama2.c tokenizer file (tok512.bin, tokenizer.bin): uint32 max_token_length, then per
// id a float32 score, a uint32 byte length and the bytes. Converts back to SentencePiece form
// (space -> "▁", "\n<s>\n" -> "<s>", "\n</s>\n" -> "</s>"); ids 0/1/2 are unk/BOS/EOS.
// vocab_size <= 0 reads entries up to the end of the file. Throws FileError "PATH: ..." when the
// file is missing, truncated or holds lengths that run past its end.
Vocab load_llama2c_vocab(const std::string& path, int32_t vocab_size);

// Reads tokenizer.ggml.{model,tokens,scores,token_type,merges,pre,bos_token_id,eos_token_id,
// unknown_token_id,padding_token_id,add_bos_token,add_eos_token,add_space_prefix} (BERT: BOS/EOS
// are cls_token_id/seperator_token_id). Scores are optional for "gpt2" and "bert".
// Throws FileError "PATH: ..." for a tokenizer model other than "llama", "gpt2" or "bert", an
// unknown pre-tokenizer, missing or wrong-typed keys, arrays of different lengths, unknown token
// types, out-of-range ids and merges that are malformed or name pieces not in the vocabulary.
Vocab vocab_from_gguf(const gguf::GgufFile& f);

}  // namespace shrike::tokenizer
