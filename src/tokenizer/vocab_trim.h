// Which tokens a trimmed vocabulary must keep so that the texts a task uses tokenize exactly as
// before, and the trimmed vocabulary itself. The model side (embedding and output rows, GGUF
// keys) is model/vocab_trim.h; `shrike trim-vocab` (cli/trim_vocab.cc) joins the two.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace shrike::tokenizer {

// The pieces SentencePiece BPE builds on its way to piece `id`: encoding the piece's own text
// merges pairs of symbols by score (leftmost on ties) exactly as encode does inside any text
// where `id` comes out as one token, and every product of those merges (the final one, `id`,
// included) is listed, in merge order. Empty for pieces BPE never merges into (control, byte,
// unknown) and for single characters.
std::vector<int32_t> spm_merge_products(const Vocab& v, int32_t id);

// What a trimmed vocabulary keeps, as sorted ids of `tok`'s vocabulary:
//  - every token of every text in `texts` (encoded with parse_special = false; BOS/EOS are
//    added below anyway),
//  - every id in `extra`,
//  - every byte-fallback, control, unknown and user-defined token, and BOS/EOS/UNK/PAD,
//  - SentencePiece and byte-level BPE: the merge closure, every intermediate product of the
//    merges that build a kept piece; byte-level BPE also keeps its 256 single-byte pieces;
//  - WordPiece: every single-character piece (word-initial and continuation).
// With the closure, encoding only ever performs merges whose products are kept, so each kept
// text encodes to the same pieces with the trimmed vocabulary (the candidate pairs of each step
// are a subset of the full vocabulary's that still holds the best one); WordPiece's longest
// match at each position is a kept piece already. Text outside `texts` still encodes: through
// byte pieces (SentencePiece, byte-level BPE) or single characters (WordPiece). Throws
// std::invalid_argument for an `extra` id outside the vocabulary.
std::vector<int32_t> tokens_to_keep(const Tokenizer& tok, const std::vector<std::string>& texts,
                                    const std::vector<int32_t>& extra = {});

// The merges ("left right", in rank order) whose two parts and result are all kept pieces: the
// merges list of a trimmed byte-level BPE vocabulary, ranks in the same relative order.
std::vector<std::string> kept_merges(const std::vector<std::string>& pieces,
                                     const std::vector<std::string>& merges,
                                     const std::vector<int32_t>& kept);

// The vocabulary of the kept ids (sorted, unique, in range), in that order: pieces, scores and
// types copied, merges cut by kept_merges, special ids renumbered (-1 when the special is not
// kept), flags unchanged.
Vocab subset_vocab(const Vocab& v, const std::vector<int32_t>& kept);

}  // namespace shrike::tokenizer
