// Trains a SentencePiece-style BPE vocabulary (VocabKind::Spm, tokenizer.ggml.model "llama") from
// plain text, for models trained from scratch (`shrike tokenizer train`). The vocabulary is built
// so that the existing SpmModel encoder reproduces the learned merges: it merges the adjacent
// pair whose concatenation has the highest score, and every merged piece scores -(its merge
// rank), so earlier merges win exactly as in training.
//
// Layout of the ids:
//   0 <unk> (Unknown), 1 <s> (Control, BOS), 2 </s> (Control, EOS);
//   3..258 "<0x00>".."<0xFF>" (Byte): byte fallback for anything the vocabulary lacks;
//   then the user-defined tokens, if any (UserDefined: the Tokenizer splits them out of text);
//   then every character seen at least min_frequency times ("▁" for a space included), most
//   frequent first;
//   then the merged pieces in merge order.
//
// Training follows what SpmModel::encode does to text: each fragment between user-defined tokens
// gets the dummy-prefix "▁" and spaces become "▁"; the text is cut before each "▁" that follows
// another character (so pieces never hold "▁" after text and the encoder keeps its word-by-word
// fast path). Within a word, merges never cross
//   - a change between CJK (Han, kana, Hangul, CJK and full-width punctuation), ASCII
//     punctuation and everything else (Latin, ...), so "订单号" and "ABC" stay separate pieces and
//     "hello," does not become one piece;
//   - a digit when split_digits (the default): each digit stays its own token, as Llama's
//     tokenizer does, so order numbers and amounts are copied digit by digit;
//   - a character below min_frequency or invalid UTF-8 (those take the byte fallback).
// A leading "▁" joins whatever follows it. Pieces are at most max_piece_chars characters.
//
// The most frequent adjacent pair (ties: the lexicographically smallest left, then right piece)
// is merged until the vocabulary has vocab_size pieces or no pair occurs min_frequency times, so
// the result has AT MOST vocab_size pieces (exactly vocab_size when the text has enough
// repeated pairs). Pair counts are updated incrementally (only the words holding the merged pair
// are revisited), so tens of thousands of sentences train in well under a second.
// Deterministic: the same texts and options give the same vocabulary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/vocab.h"

namespace shrike::tokenizer {

struct BpeTrainOptions {
  int32_t vocab_size = 4096;
  int64_t min_frequency = 2;     // for characters to enter the vocabulary and for pairs to merge
  int32_t max_piece_chars = 16;  // longest merged piece, in characters ("▁" counts as one)
  // At most this many merged pieces (-1: as many as vocab_size leaves room for). Few merges keep
  // a small model's tokens near characters, each seen thousands of times: what copying a name it
  // has never seen needs (task tokenizers, task/task_eval.h).
  int32_t max_merges = -1;
  bool split_digits = true;  // never merge digits (see above)
  // "▁" never merges: a word after a space is tokenised exactly like the same word after a
  // quote, so a small model copying a span from its input into a JSON answer sees the same
  // tokens on both sides (task models trained from scratch use this).
  bool split_space = false;
  // CJK characters never merge, for the same reason: Chinese has no spaces, so merges across a
  // slot value's edge would tokenise the value differently inside the sentence and alone.
  bool split_cjk = false;
  // Tokens the Tokenizer always keeps whole (type UserDefined), e.g. markers of a prompt format.
  // Note: as in llama.cpp, the text after such a token is encoded with a dummy-prefix space, so
  // decode(encode(s)) adds a space after each of them.
  std::vector<std::string> user_defined;
};

// Throws std::invalid_argument when the texts hold no characters, when vocab_size is below
// 3 + 256 + user-defined tokens + characters kept (the message states that minimum), when
// min_frequency < 1 or max_piece_chars < 1, or when a user-defined token is empty, repeated or
// the same as a special or byte piece.
Vocab train_bpe(const std::vector<std::string>& texts, const BpeTrainOptions& opt = {});

// Writes a GGUF holding only general.name and the tokenizer.ggml.* keys (add_vocab_to_gguf);
// vocab_from_gguf reads back the same Vocab. Throws FileError when the file cannot be written.
void write_tokenizer_gguf(const Vocab& v, const std::string& path);

}  // namespace shrike::tokenizer
