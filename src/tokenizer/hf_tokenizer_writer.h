// The inverse of hf_tokenizer.h: a Vocab as the tokenizer.json and tokenizer_config.json that
// Hugging Face's tokenizers and transformers write (SentencePiece-style BPE with byte fallback,
// byte-level BPE with its family's pre-tokenizer, WordPiece), so a model shrike compressed goes
// back to the tools its user already has, and load_hf_tokenizer reads back the same Vocab.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/vocab.h"

namespace shrike::tokenizer {

// Writes dir/tokenizer.json and dir/tokenizer_config.json (chat_template in the latter when not
// empty). Throws FileError when a file cannot be written, std::invalid_argument for a byte-level
// vocabulary whose pre-tokenizer has no Hugging Face form here.
void write_hf_tokenizer(const Vocab& v, const std::string& dir, const std::string& chat_template);

// The pieces, for tests that build tokenizer.json files of their own.
namespace hf_json {
using json = nlohmann::json;
// Splits a UTF-8 string at code point boundaries (HF's Python works on code points).
std::vector<size_t> char_boundaries(const std::string& s);
// transformers' SentencePieceExtractor merges of an SPM vocabulary.
json spm_merges(const Vocab& v);
json added_token(int32_t id, const std::string& content, bool special);
json template_processing(const std::vector<std::string>& before,
                         const std::vector<std::string>& after);
json byte_level(bool use_regex);
json split_regex(const std::string& re);
// The pre_tokenizer of a byte-level family's tokenizer.json, keyed by tokenizer.ggml.pre.
json family_pre_tokenizer(const std::string& pre);
json hf_tokenizer_json(const Vocab& v);
json hf_tokenizer_config(const Vocab& v, const std::string& chat_template);
}  // namespace hf_json

}  // namespace shrike::tokenizer
