// The byte-level BPE trainer, checked through the real byte-level encoder (BpeModel): exact merge
// order on a hand-computed corpus, round trips of seen and unseen text (any bytes), the size
// limit, compression, determinism, the tokenizer GGUF and its errors.
#include "tokenizer/byte_bpe_trainer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "test_util.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/tokenizer.h"

namespace shrike::tokenizer {
namespace {

// Open-vocabulary text: Latin words of 1-3 syllables, digits and runs of Han characters, with a
// skewed choice so that there are many distinct words and pairs (rng() % n: the standard leaves
// distributions' output to the implementation).
std::vector<std::string> open_corpus(size_t n, uint32_t seed) {
  static const char* syl[] = {"ka", "lo", "mi",  "ne",  "ru",  "ta",  "shi", "po", "ven", "dar",
                              "el", "on", "ist", "ing", "pre", "con", "ber", "ul", "ax",  "mo"};
  std::mt19937 rng(seed);
  auto skewed = [&](uint32_t n_max) { return rng() % (rng() % n_max + 1); };
  auto han = [](uint32_t cp) {
    return std::string{char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)),
                       char(0x80 | (cp & 0x3F))};
  };
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    std::string s;
    for (uint32_t w = 0, nw = 3 + rng() % 8; w < nw; ++w) {
      if (w) s += rng() % 5 == 0 ? ", " : " ";
      if (rng() % 4 == 0) {
        for (uint32_t k = 0, nk = 2 + rng() % 5; k < nk; ++k) s += han(0x4E00 + skewed(300));
      } else {
        for (uint32_t k = 0, nk = 1 + rng() % 3; k < nk; ++k) s += syl[skewed(20)];
        if (rng() % 7 == 0) s += std::to_string(rng() % 100000);
      }
    }
    out.push_back(std::move(s) + (i % 3 == 0 ? "?" : ""));
  }
  return out;
}

std::vector<std::string> pieces_of(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(tok.vocab().pieces[size_t(id)]);
  return out;
}

TEST(ByteBpeTrainer, MergesTheMostFrequentPairFirstWithinWords) {
  // "aab aab aab" -> words (qwen2 pre-tokeniser) "aab", " aab", " aab", counted by hand.
  // Pairs: (a,a) 3, (a,b) 3, (" ",a) 2.
  // Ties go to the lexicographically smaller pair: "a a" < "a b", so "aa" first, then (aa,b) 3.
  ByteBpeTrainOptions o;
  o.vocab_size = 256 + 3 + 2;
  const Vocab v = train_byte_level_bpe({"aab aab aab"}, o);
  EXPECT_EQ(v.kind, VocabKind::Bpe);
  EXPECT_EQ(v.pre, "qwen2");
  ASSERT_EQ(v.merges, (std::vector<std::string>{"a a", "aa b"}));
  ASSERT_EQ(v.size(), 261);
  EXPECT_EQ(v.pieces[256], "aa");
  EXPECT_EQ(v.pieces[257], "aab");
  EXPECT_EQ(v.pieces[258], "<|endoftext|>");
  EXPECT_EQ(v.types[258], TokenType::Control);
  EXPECT_EQ(v.eos_id, 258);
  EXPECT_FALSE(v.add_bos);
  const Tokenizer tok(v);
  // " aab" is two tokens: the space's byte ("Ġ") never merged.
  EXPECT_EQ(pieces_of(tok, tok.encode("aab aab", false)),
            (std::vector<std::string>{"aab", "\xC4\xA0", "aab"}));
}

TEST(ByteBpeTrainer, RoundTripsSeenAndUnseenBytesAndCompresses) {
  const std::vector<std::string> texts = open_corpus(3000, 7);
  ByteBpeTrainOptions o;
  o.vocab_size = 3000;
  const Vocab v = train_byte_level_bpe(texts, o);
  EXPECT_EQ(v.size(), 3000) << "the corpus has enough repeated pairs to fill the vocabulary";
  EXPECT_GE(v.merges.size(), size_t(3000 - 259));
  const Tokenizer tok(v);
  size_t bytes = 0, tokens = 0;
  for (const std::string& t : texts) {
    const std::vector<int32_t> ids = tok.encode(t, false);
    ASSERT_EQ(tok.decode(ids), t);
    bytes += t.size();
    tokens += ids.size();
  }
  EXPECT_LT(double(tokens), 0.4 * double(bytes)) << tokens << " tokens for " << bytes << " bytes";
  for (const std::string& t : open_corpus(200, 99)) ASSERT_EQ(tok.decode(tok.encode(t, false)), t);
  const std::string odd = std::string("\xFF\xFE caf\xC3\xA9 \x01\x7F", 11) + "\xF0\x9F\x98\x80";
  EXPECT_EQ(tok.decode(tok.encode(odd, false)), odd);
}

TEST(ByteBpeTrainer, IsDeterministicAndSurvivesItsGguf) {
  const std::vector<std::string> texts = open_corpus(800, 3);
  ByteBpeTrainOptions o;
  o.vocab_size = 1200;
  const Vocab a = train_byte_level_bpe(texts, o), b = train_byte_level_bpe(texts, o);
  EXPECT_EQ(a.pieces, b.pieces);
  EXPECT_EQ(a.merges, b.merges);
  const std::string path = shrike::testing::scratch_dir() + "/byte_bpe.gguf";
  write_tokenizer_gguf(a, path);
  const Vocab back = vocab_from_gguf(gguf::GgufFile::open(path));
  EXPECT_EQ(back.kind, VocabKind::Bpe);
  EXPECT_EQ(back.pieces, a.pieces);
  EXPECT_EQ(back.merges, a.merges);
  EXPECT_EQ(back.pre, "qwen2");
  EXPECT_EQ(back.eos_id, a.eos_id);
  EXPECT_FALSE(back.add_bos);
  const Tokenizer ta(a), tb(back);
  for (const std::string& t : open_corpus(50, 11))
    EXPECT_EQ(ta.encode(t, false), tb.encode(t, false));
}

TEST(ByteBpeTrainer, NamesWhatIsWrong) {
  ByteBpeTrainOptions o;
  o.vocab_size = 258;
  try {
    train_byte_level_bpe({"abc"}, o);
    FAIL() << "a vocabulary smaller than its bytes and specials";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("at least 259"), std::string::npos) << e.what();
  }
  o.vocab_size = 300;
  o.pre = "klingon";
  EXPECT_THROW(train_byte_level_bpe({"abc"}, o), std::invalid_argument);
  o.pre = "qwen2";
  EXPECT_THROW(train_byte_level_bpe({}, o), std::invalid_argument);
  EXPECT_THROW(train_byte_level_bpe({""}, o), std::invalid_argument);
}

}  // namespace
}  // namespace shrike::tokenizer
