// SPM BPE encoding/decoding on small hand-made vocabularies (no shared data needed).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace shrike::tokenizer {
namespace {

const std::string kSp = "\xE2\x96\x81";  // ▁

// <unk>, <s>, </s>, 256 byte pieces, then the given scored pieces (ids from 259).
Vocab make_vocab(const std::vector<std::pair<std::string, float>>& pieces) {
  Vocab v;
  auto add = [&](std::string p, float s, TokenType t) {
    v.pieces.push_back(std::move(p));
    v.scores.push_back(s);
    v.types.push_back(t);
  };
  add("<unk>", 0, TokenType::Unknown);
  add("<s>", 0, TokenType::Control);
  add("</s>", 0, TokenType::Control);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    add(buf, 0, TokenType::Byte);
  }
  for (const auto& [p, s] : pieces) add(p, s, TokenType::Normal);
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  return v;
}

TEST(TokenizerEncode, MergesByScoreThenLeftmost) {
  // 259 ▁, 260 a, 261 b, 262 ab, 263 ▁a, 264 ba
  const Tokenizer t(
      make_vocab({{kSp, -5}, {"a", -5}, {"b", -5}, {"ab", -1}, {kSp + "a", -2}, {"ba", -1}}));
  // "▁aba": ab(-1) at 1 and ba(-1) at 2 tie; the leftmost (ab) wins, leaving ▁, ab, a.
  EXPECT_EQ(t.encode("aba", false), (std::vector<int32_t>{259, 262, 260}));
  EXPECT_EQ(t.encode("aba", true), (std::vector<int32_t>{1, 259, 262, 260}));
  EXPECT_EQ(t.encode("", true), (std::vector<int32_t>{1}));
  EXPECT_EQ(t.encode("", false), (std::vector<int32_t>{}));
  // "▁a" beats nothing else: "▁a" (-2) vs none -> 263.
  EXPECT_EQ(t.encode("a", false), (std::vector<int32_t>{263}));
}

TEST(TokenizerEncode, ByteFallbackAndInvalidUtf8) {
  const Tokenizer t(make_vocab({{kSp, 0}, {"a", 0}}));
  // "é" (C3 A9) is not a piece: two byte tokens. 0xFF alone is invalid UTF-8: one byte token.
  EXPECT_EQ(t.encode("a\xC3\xA9", false), (std::vector<int32_t>{259, 260, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(t.encode("\xFF"
                     "a",
                     false),
            (std::vector<int32_t>{259, 3 + 0xFF, 260}));
  // A truncated sequence (E2 82 without its third byte) falls back byte by byte.
  EXPECT_EQ(t.encode("\xE2\x82", false), (std::vector<int32_t>{259, 3 + 0xE2, 3 + 0x82}));
  EXPECT_EQ(t.decode(t.encode("a\xC3\xA9 \xFF", true)), "a\xC3\xA9 \xFF");
}

TEST(TokenizerEncode, SpecialTextIsPlainText) {
  // "<s>" in the text must not become BOS even though it is a piece: control pieces never merge.
  const Tokenizer t(make_vocab({{kSp, 0}, {"<", 0}, {"s", 0}, {">", 0}, {"<s", 1}}));
  EXPECT_EQ(t.encode("<s>", false), (std::vector<int32_t>{259, 263, 262}));
}

TEST(TokenizerEncode, NoDummyPrefixWhenDisabled) {
  Vocab v = make_vocab({{kSp, 0}, {"a", 0}, {kSp + "a", 1}});
  v.add_space_prefix = false;
  const Tokenizer t(std::move(v));
  EXPECT_EQ(t.encode("a a", false), (std::vector<int32_t>{260, 261}));
  EXPECT_EQ(t.decode({260, 261}), "a a");
}

TEST(TokenizerEncode, PiecesSpanningWordsDisableWordSplitting) {
  // "a▁" (-1) beats "▁b" (-2): the merge crosses the word boundary, so encode must not cut
  // before "▁" here; with the "a▁" piece absent the same text splits into words.
  const Tokenizer crossing(
      make_vocab({{kSp, -9}, {"a", -9}, {"b", -9}, {"a" + kSp, -1}, {kSp + "b", -2}}));
  EXPECT_EQ(crossing.encode("a b", false), (std::vector<int32_t>{259, 262, 261}));
  const Tokenizer words(make_vocab({{kSp, -9}, {"a", -9}, {"b", -9}, {kSp + "b", -2}}));
  EXPECT_EQ(words.encode("a b", false), (std::vector<int32_t>{259, 260, 262}));
}

TEST(TokenizerDecode, PiecesAndLeadingSpace) {
  const Tokenizer t(make_vocab({{kSp + "hi", 0}, {kSp, 0}}));
  EXPECT_EQ(t.token_to_piece(259), " hi");
  EXPECT_EQ(t.token_to_piece(1), "");           // control
  EXPECT_EQ(t.token_to_piece(3 + '\n'), "\n");  // <0x0A>
  EXPECT_EQ(t.token_to_piece(0), "<unk>");      // unknown: shown as stored
  EXPECT_EQ(t.decode({1, 259, 259}), "hi hi");  // dummy-prefix space dropped once
  EXPECT_EQ(t.decode({260, 259}), " hi");       // only one space dropped
  EXPECT_THROW(t.token_to_piece(-1), std::out_of_range);
  EXPECT_THROW(t.token_to_piece(t.n_vocab()), std::out_of_range);
}

TEST(TokenizerCtor, RejectsInconsistentVocab) {
  Vocab v = make_vocab({});
  v.scores.pop_back();
  EXPECT_THROW(Tokenizer{v}, std::invalid_argument);
  Vocab w = make_vocab({});
  w.bos_id = w.size();
  EXPECT_THROW(Tokenizer{w}, std::invalid_argument);
  EXPECT_THROW(Tokenizer{Vocab{}}, std::invalid_argument);
}

}  // namespace
}  // namespace shrike::tokenizer
