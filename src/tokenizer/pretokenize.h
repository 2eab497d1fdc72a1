// Pre-tokenisers of byte-level BPE vocabularies: split text into words before BPE, by the regex
// sequence of the model family named in tokenizer.ggml.pre (as llama.cpp's llama-vocab.cpp and
// the families' Hugging Face tokenizer.json files define them).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/regex.h"

namespace shrike::tokenizer {

enum class PreType {
  Default,  // no tokenizer.ggml.pre (e.g. gpt-neox): llama.cpp's default sequence
  Gpt2,     // gpt-2, mpt, olmo, jais, phi-2: the GPT-2 regex
  Llama3,   // llama-bpe / llama3: Llama-3's regex (digits in runs of up to 3)
  Qwen2,    // qwen2, deepseek-r1-qwen: Llama-3's regex with single digits
  DeepseekLlm,
  DeepseekCoder,
  Falcon,
  Starcoder,  // starcoder, refact: single digits, then the GPT-2 regex
};

// The regex sequence of a family, as llama.cpp lists it (the Hugging Face importer matches
// tokenizer.json pre-tokenizers against these).
std::vector<const char*> pretokenizer_regexes(PreType t);

// Maps a tokenizer.ggml.pre value ("" when absent); false for one it does not know.
bool pre_type_from_name(std::string_view name, PreType& out);

class PreTokenizer {
 public:
  explicit PreTokenizer(PreType type);

  // Byte ranges [first, second) of text, in order, covering all of it. Each regex of the family
  // splits every piece from the previous one into matches and the text between them (Hugging
  // Face's Split with "isolated" behaviour); invalid UTF-8 bytes stay as they are.
  void split(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& words) const;

 private:
  std::vector<Regex> stages_;
};

}  // namespace shrike::tokenizer
