// Trains a byte-level BPE vocabulary (VocabKind::Bpe, tokenizer.ggml.model "gpt2"), the kind
// Qwen2, Llama-3 and GPT-2 ship, from plain text: `shrike tokenizer train --byte-level`. A model
// trained on it has what a downloaded checkpoint has: a vocabulary of tens of thousands of
// pieces, most of which one task never uses (what vocabulary trimming removes).
//
// Text is split into words by the pre-tokeniser of `pre` (the family's regex sequence,
// pretokenize.h), exactly as BpeModel::encode splits it; each word's bytes become GPT-2's
// byte-to-unicode characters; the most frequent adjacent pair within a word is merged until the
// vocabulary has vocab_size pieces or no pair occurs min_frequency times. Every merge applied is
// a "left right" entry of Vocab::merges in order, so BpeModel (lowest rank first) reproduces the
// training segmentation.
//
// Layout of the ids: 0..255 the single bytes (in byte order, as GPT-2's characters), then the
// merged pieces in merge order, then the special tokens (Control): "<|endoftext|>" (EOS, and the
// BOS id a prompt never gets by default, as Qwen2 has it), "<|im_start|>", "<|im_end|>".
// Deterministic: the same texts and options give the same vocabulary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/vocab.h"

namespace shrike::tokenizer {

struct ByteBpeTrainOptions {
  int32_t vocab_size = 32768;  // at most this many pieces, specials included
  int64_t min_frequency = 2;   // for a pair to merge
  int32_t max_piece_bytes = 16;
  std::string pre = "qwen2";  // tokenizer.ggml.pre: the pre-tokeniser (pretokenize.h)
};

// Throws std::invalid_argument when the texts hold no bytes, when vocab_size is below 256 + the
// 3 special tokens, when min_frequency < 1 or max_piece_bytes < 2, or for an unknown `pre`.
Vocab train_byte_level_bpe(const std::vector<std::string>& texts,
                           const ByteBpeTrainOptions& opt = {});

}  // namespace shrike::tokenizer
