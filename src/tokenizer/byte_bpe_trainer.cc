#include "tokenizer/byte_bpe_trainer.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "tokenizer/bpe.h"
#include "tokenizer/bpe_merger.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode.h"

namespace shrike::tokenizer {
namespace {

const char* const kSpecials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};

// One byte as GPT-2's visible character, in UTF-8 (as BpeModel maps a word's bytes).
std::string byte_char(uint8_t b) {
  std::string s;
  unicode::append_utf8(byte_to_codepoint(b), s);
  return s;
}

}  // namespace

Vocab train_byte_level_bpe(const std::vector<std::string>& texts, const ByteBpeTrainOptions& opt) {
  const int32_t n_specials = int32_t(std::size(kSpecials));
  if (opt.vocab_size < 256 + n_specials)
    throw std::invalid_argument("train_byte_level_bpe: vocab_size " +
                                std::to_string(opt.vocab_size) + " is too small: at least " +
                                std::to_string(256 + n_specials) +
                                " needed (256 bytes + 3 special tokens)");
  if (opt.min_frequency < 1)
    throw std::invalid_argument("train_byte_level_bpe: min_frequency must be at least 1, got " +
                                std::to_string(opt.min_frequency));
  if (opt.max_piece_bytes < 2)
    throw std::invalid_argument("train_byte_level_bpe: max_piece_bytes must be at least 2, got " +
                                std::to_string(opt.max_piece_bytes));
  PreType pre_type;
  if (!pre_type_from_name(opt.pre, pre_type))
    throw std::invalid_argument("train_byte_level_bpe: unknown pre-tokenizer '" + opt.pre + "'");

  // Words with their counts, as the encoder will see them.
  const PreTokenizer pre(pre_type);
  std::unordered_map<std::string, int64_t> word_freq;
  std::vector<std::pair<uint32_t, uint32_t>> spans;
  for (const std::string& text : texts) {
    spans.clear();
    pre.split(text, spans);
    for (const auto& [b, e] : spans)
      if (e > b) ++word_freq[text.substr(b, e - b)];
  }
  if (word_freq.empty()) throw std::invalid_argument("train_byte_level_bpe: no text to train on");
  std::vector<std::pair<std::string, int64_t>> words(word_freq.begin(), word_freq.end());
  std::sort(words.begin(), words.end());  // segment order independent of hashing

  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(byte_char(uint8_t(b)));
  std::unordered_set<std::string> reserved(std::begin(kSpecials), std::end(kSpecials));
  PairMerger merger(bytes, opt.min_frequency, opt.max_piece_bytes, reserved);
  std::vector<int32_t> seq;
  for (const auto& [w, f] : words) {
    if (w.size() < 2) continue;
    seq.clear();
    for (char c : w) seq.push_back(int32_t(uint8_t(c)));  // byte b has symbol id b
    merger.add_segment(seq, f);
  }
  const std::vector<std::string> merged =
      merger.run(size_t(opt.vocab_size) - 256 - size_t(n_specials));

  Vocab v;
  v.kind = VocabKind::Bpe;
  v.pre = opt.pre;
  auto add = [&](std::string piece, TokenType type) {
    v.pieces.push_back(std::move(piece));
    v.scores.push_back(0);
    v.types.push_back(type);
  };
  for (std::string& b : bytes) add(std::move(b), TokenType::Normal);
  for (const std::string& m : merged) add(m, TokenType::Normal);
  for (const char* s : kSpecials) add(s, TokenType::Control);
  for (const auto& [a, b] : merger.merge_parts()) v.merges.push_back(a + " " + b);
  v.eos_id = v.bos_id = int32_t(256 + merged.size());  // <|endoftext|>
  v.unk_id = v.pad_id = -1;
  v.add_bos = false;
  v.add_eos = false;
  v.add_space_prefix = false;
  return v;
}

}  // namespace shrike::tokenizer
