// Hugging Face tokenizers (tokenizer.json, with tokenizer_config.json and config.json beside it)
// read into the same Vocab the GGUF vocabularies use, and any Vocab written back as GGUF
// tokenizer.ggml.* keys (for `shrike convert`):
//
// - model BPE with byte_fallback / Metaspace ("▁" pieces, <0xXX> bytes: Llama-2, Mistral) ->
//   VocabKind::Spm, each merge's rank turned into a score for the piece it makes (earlier merges
//   score higher, which is the order SentencePiece's scores gave them);
// - model BPE with a ByteLevel pre-tokenizer (GPT-2, Llama-3, Qwen2, DeepSeek, StarCoder, Falcon)
//   -> VocabKind::Bpe, with the pre-tokenizer family recognised from its Split regexes, Digits
//   and ByteLevel steps (an unknown sequence is an error: guessing would give wrong ids);
// - model WordPiece (BERT) -> VocabKind::Wpm in llama.cpp's "phantom space" form.
//
// added_tokens become control tokens when special (or shaped like "<|...|>"), user-defined
// otherwise. BOS/EOS come from tokenizer_config.json (bos_token / eos_token, strings or
// {"content": ...}), else config.json's ids; add_bos/add_eos from tokenizer_config.json, else the
// post_processor's template.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/vocab.h"

namespace shrike::gguf {
class GgufWriter;
}

namespace shrike::tokenizer {

struct HfTokenizer {
  Vocab vocab;
  // tokenizer_config.json's chat_template (the "default" one of a list), else the folder's
  // chat_template.jinja; "" when neither exists.
  std::string chat_template;
};

// Reads dir/tokenizer.json (required), dir/tokenizer_config.json and dir/config.json (optional).
// vocab_size > 0: the model's vocabulary; ids the tokenizer leaves unused up to it become
// "[PAD<id>]" pieces of type Unused (as llama.cpp's converter pads them), and a tokenizer with
// more tokens is an error. Throws FileError with one line naming the file: invalid JSON, missing
// or wrong-typed fields, an unsupported model type, normalizer or pre-tokenizer, ids that
// collide or are absurd, merges that name unknown tokens, special tokens not in the vocabulary.
HfTokenizer load_hf_tokenizer(const std::string& dir, int64_t vocab_size = 0);

// Adds tokenizer.ggml.{model,pre,tokens,scores,token_type,merges,bos_token_id,eos_token_id,
// unknown_token_id,padding_token_id,add_bos_token,add_eos_token,add_space_prefix} (BERT:
// cls_token_id / seperator_token_id) and tokenizer.chat_template when non-empty, with the names
// and types llama.cpp reads; vocab_from_gguf reads back the same Vocab.
void add_vocab_to_gguf(const Vocab& v, const std::string& chat_template, gguf::GgufWriter& w);

}  // namespace shrike::tokenizer
