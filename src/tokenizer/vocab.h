// Tokenizer vocabularies: the pieces, scores and token types of a SentencePiece-style (SPM) BPE
// model, read from a GGUF file (tokenizer.ggml.model = "llama") or a llama2.c tok*.bin file.
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

// A vocabulary in SentencePiece form: pieces use U+2581 ("▁") for a space, as in GGUF.
// pieces, scores and types are indexed by token id and have the same length.
struct Vocab {
  std::vector<std::string> pieces;
  std::vector<float> scores;  // BPE merge priority: higher merges first
  std::vector<TokenType> types;
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;  // -1: none
  bool add_bos = true;  // what the model expects by default at the start of a prompt
  bool add_eos = false;
  bool add_space_prefix = true;  // SentencePiece "dummy prefix": text starts with "▁"

  int32_t size() const { return int32_t(pieces.size()); }
};

// Reads a llama2.c tokenizer file (tok512.bin, tokenizer.bin): uint32 max_token_length, then per
// id a float32 score, a uint32 byte length and the bytes. Converts back to SentencePiece form
// (space -> "▁", "\n<s>\n" -> "<s>", "\n</s>\n" -> "</s>"); ids 0/1/2 are unk/BOS/EOS.
// vocab_size <= 0 reads entries up to the end of the file. Throws FileError "PATH: ..." when the
// file is missing, truncated or holds lengths that run past its end.
Vocab load_llama2c_vocab(const std::string& path, int32_t vocab_size);

// Reads tokenizer.ggml.{model,tokens,scores,token_type,bos_token_id,eos_token_id,
// unknown_token_id,padding_token_id,add_bos_token,add_eos_token,add_space_prefix}.
// Throws FileError "PATH: ..." for a tokenizer model other than "llama" (e.g. "gpt2"), missing or
// wrong-typed keys, arrays of different lengths, unknown token types and out-of-range ids.
Vocab vocab_from_gguf(const gguf::GgufFile& f);

}  // namespace shrike::tokenizer
