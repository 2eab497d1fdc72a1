// The BPE trainer, checked through the real SPM encoder: round trips (with byte fallback),
// compression, exact merge order on a hand-computed corpus, script and digit boundaries,
// vocabulary size limits, determinism, the tokenizer GGUF and speed.
#include "tokenizer/bpe_trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/sanitizers.h"
#include "gguf/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace shrike::tokenizer {
namespace {

const std::string kMarker = "\xE2\x96\x81";  // "▁", SentencePiece's space

// Customer-service sentences in English and Chinese from small templates (fixed seed; rng() %
// n rather than distributions, whose output the standard leaves to the implementation).
std::vector<std::string> corpus(size_t n, bool zh, uint32_t seed) {
  static const std::vector<std::string> en_tpl = {"when will I get my refund?",
                                                  "I want to {v} my order {n}",
                                                  "can you {v} order {n} please",
                                                  "please {v} the {o} I bought last week",
                                                  "how do I {v} my {o}?",
                                                  "my {o} has not arrived yet, order {n}",
                                                  "I would like a refund for my {o}",
                                                  "where is my {o}? the tracking number is {n}",
                                                  "help me {v} the {o} from order {n}"};
  static const std::vector<std::string> en_v = {"cancel", "track", "return", "change", "check"};
  static const std::vector<std::string> en_o = {"package", "phone", "laptop", "shoes", "jacket"};
  static const std::vector<std::string> zh_tpl = {
      "我想{v}我的订单{n}",         "请帮我{v}一下订单{n}", "我上周买的{o}还没到",
      "怎么{v}我的{o}？",           "我要申请{o}的退款",    "退款什么时候到账？",
      "订单{n}的{o}什么时候发货？", "你好，我想{v}{o}",     "请问{o}可以{v}吗？"};
  static const std::vector<std::string> zh_v = {"取消", "查询", "退货", "修改", "确认"};
  static const std::vector<std::string> zh_o = {"手机", "电脑", "鞋子", "外套", "耳机"};
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    const std::vector<std::string>& tpl = zh ? zh_tpl : en_tpl;
    std::string s = tpl[rng() % tpl.size()];
    auto fill = [&](const std::string& slot, const std::vector<std::string>& values) {
      const size_t at = s.find(slot);
      if (at != std::string::npos) s.replace(at, slot.size(), values[rng() % values.size()]);
    };
    fill("{v}", zh ? zh_v : en_v);
    fill("{o}", zh ? zh_o : en_o);
    if (const size_t at = s.find("{n}"); at != std::string::npos)
      s.replace(at, 3, std::to_string(100000 + rng() % 900000));
    out.push_back(std::move(s));
  }
  return out;
}

// Open-vocabulary text: Latin words of 1-3 syllables and runs of Han characters, both drawn
// with a skewed (roughly Zipf-like) distribution, so there are many distinct words and pairs.
std::vector<std::string> random_corpus(size_t n, uint32_t seed) {
  static const char* syl[] = {"ka", "lo", "mi",  "ne",  "ru",  "ta",  "shi", "po", "ven", "dar",
                              "el", "on", "ist", "ing", "pre", "con", "ber", "ul", "ax",  "mo"};
  std::mt19937 rng(seed);
  auto skewed = [&](uint32_t n_max) { return rng() % (rng() % n_max + 1); };
  auto utf8 = [](uint32_t cp) {  // three-byte UTF-8 (the Han block)
    return std::string{char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)),
                       char(0x80 | (cp & 0x3F))};
  };
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    std::string s;
    if (i % 2 == 0) {
      for (uint32_t w = 0, nw = 4 + rng() % 8; w < nw; ++w) {
        if (w) s += ' ';
        for (uint32_t k = 0, ns = 1 + rng() % 3; k < ns; ++k) s += syl[skewed(20)];
      }
    } else {
      for (uint32_t c = 0, nc = 6 + rng() % 14; c < nc; ++c) s += utf8(0x4E00 + skewed(1200));
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> mixed_corpus(size_t n_each) {
  std::vector<std::string> t = corpus(n_each, false, 1);
  const std::vector<std::string> zh = corpus(n_each, true, 2);
  t.insert(t.end(), zh.begin(), zh.end());
  return t;
}

int32_t id_of(const Vocab& v, const std::string& piece) {
  const auto it = std::find(v.pieces.begin(), v.pieces.end(), piece);
  return it == v.pieces.end() ? -1 : int32_t(it - v.pieces.begin());
}

double avg_tokens(const Tokenizer& tok, const std::vector<std::string>& texts) {
  size_t n = 0;
  for (const std::string& t : texts) n += tok.encode(t, false).size();
  return double(n) / double(texts.size());
}

TEST(BpeTrainer, LayoutMatchesTheSpmConventions) {
  BpeTrainOptions opt;
  opt.vocab_size = 2000;
  std::vector<std::string> texts = mixed_corpus(500);
  const std::vector<std::string> more = random_corpus(2000, 3);
  texts.insert(texts.end(), more.begin(), more.end());
  const Vocab v = train_bpe(texts, opt);
  ASSERT_EQ(v.size(), 2000);
  EXPECT_EQ(v.kind, VocabKind::Spm);
  EXPECT_EQ(v.pieces[0], "<unk>");
  EXPECT_EQ(v.types[0], TokenType::Unknown);
  EXPECT_EQ(v.pieces[1], "<s>");
  EXPECT_EQ(v.types[1], TokenType::Control);
  EXPECT_EQ(v.pieces[2], "</s>");
  EXPECT_EQ(v.types[2], TokenType::Control);
  EXPECT_EQ(v.pieces[3], "<0x00>");
  EXPECT_EQ(v.pieces[3 + 0x41], "<0x41>");
  EXPECT_EQ(v.pieces[258], "<0xFF>");
  for (int i = 3; i < 259; ++i) EXPECT_EQ(v.types[i], TokenType::Byte);
  EXPECT_EQ(v.unk_id, 0);
  EXPECT_EQ(v.bos_id, 1);
  EXPECT_EQ(v.eos_id, 2);
  EXPECT_TRUE(v.add_bos);
  EXPECT_TRUE(v.add_space_prefix);
  EXPECT_GE(id_of(v, kMarker), 259);
  EXPECT_GE(id_of(v, "订"), 259);
  EXPECT_GE(id_of(v, "？"), 259);
  // Characters first (scores below every merge), then merges by decreasing score.
  int32_t first_merge = 260;
  while (first_merge < v.size() && v.scores[first_merge] < v.scores[first_merge - 1]) ++first_merge;
  ASSERT_LT(first_merge, v.size());
  EXPECT_EQ(v.scores[first_merge], 0.0f);
  for (int32_t i = first_merge + 1; i < v.size(); ++i) EXPECT_LT(v.scores[i], v.scores[i - 1]);
  for (int32_t i = 259; i < first_merge; ++i) EXPECT_LT(v.scores[i], v.scores[v.size() - 1]);
}

// Computed by hand: "▁abab" x3. Characters a (6), b (6), ▁ (3). Merges: "ab" (6); then
// ("ab","ab") and ("▁","ab") both 3, and "ab" < "▁" bytewise: "abab"; then "▁abab".
TEST(BpeTrainer, MergeOrderIsExactAndTheEncoderReplaysIt) {
  BpeTrainOptions opt;
  opt.vocab_size = 300;
  const Vocab v = train_bpe({"abab", "abab", "abab"}, opt);
  const std::vector<std::string> want = {"a", "b", kMarker, "ab", "abab", kMarker + "abab"};
  ASSERT_EQ(v.size(), 259 + int32_t(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(v.pieces[259 + i], want[i]) << i;
  const Tokenizer tok(v);
  EXPECT_EQ(tok.encode("abab", false), (std::vector<int32_t>{264}));
  EXPECT_EQ(tok.encode("ab", false), (std::vector<int32_t>{261, 262}));
  EXPECT_EQ(tok.encode("ababab", false), (std::vector<int32_t>{264, 262}));

  // "▁ab" x3, "▁bc" x2. Characters b (5), ▁ (5), a (3), c (2). Merges: "ab" (3, tied with
  // "▁a" and "a" < "▁"), "▁ab" (3), "bc" (2, tied with "▁b"), "▁bc" (2). "abc" then needs
  // "ab" to win over the later "bc": a reversed priority would give ▁ a bc.
  const Vocab w = train_bpe({"ab ab ab bc bc"}, opt);
  const std::vector<std::string> want_w = {"b",  kMarker,        "a",  "c",
                                           "ab", kMarker + "ab", "bc", kMarker + "bc"};
  ASSERT_EQ(w.size(), 259 + int32_t(want_w.size()));
  for (size_t i = 0; i < want_w.size(); ++i) EXPECT_EQ(w.pieces[259 + i], want_w[i]) << i;
  EXPECT_EQ(Tokenizer(w).encode("abc", false), (std::vector<int32_t>{264, 262}));
}

TEST(BpeTrainer, RoundTripsTrainingAndUnseenText) {
  const std::vector<std::string> texts = mixed_corpus(1500);
  const Tokenizer tok(train_bpe(texts));
  for (const std::string& t : texts) ASSERT_EQ(tok.decode(tok.encode(t, true)), t) << t;
  const std::vector<std::string> unseen = {"Zebra quokka xylophone, ÆØÅ ß ñ über",
                                           "这是一个从未见过的句子：龘靐齉",
                                           "emoji 🙂👍🏽 and 中文 mixed 123abc",
                                           "  leading and trailing spaces  ",
                                           "tabs\tand\nnewlines",
                                           "\xFF\xFE invalid \xE4\xB8 utf-8",
                                           "<s> </s> <unk> <0x41> look like specials",
                                           ""};
  for (const std::string& t : unseen) EXPECT_EQ(tok.decode(tok.encode(t, true)), t) << t;
  // Unseen characters take the byte fallback: 🙂 is F0 9F 99 82.
  const std::vector<int32_t> ids = tok.encode("🙂", false);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(std::vector<int32_t>(ids.end() - 4, ids.end()),
            (std::vector<int32_t>{3 + 0xF0, 3 + 0x9F, 3 + 0x99, 3 + 0x82}));
}

TEST(BpeTrainer, FrequentWordsBecomeOneToken) {
  const std::vector<std::string> texts = mixed_corpus(2000);
  const Vocab v = train_bpe(texts);
  const Tokenizer tok(v);
  EXPECT_EQ(tok.encode("refund", false).size(), 1u);
  EXPECT_EQ(tok.encode("my order", false).size(), 2u);
  EXPECT_GE(id_of(v, "订单"), 0);
  EXPECT_GE(id_of(v, "退款"), 0);
  const std::vector<std::string> en(texts.begin(), texts.begin() + 2000);
  const std::vector<std::string> zh(texts.begin() + 2000, texts.end());
  const double en_avg = avg_tokens(tok, en), zh_avg = avg_tokens(tok, zh);
  std::printf("average tokens per sentence: en %.2f, zh %.2f (vocab %d)\n", en_avg, zh_avg,
              v.size());
  // Templates of ~6-9 words (plus a 6-digit number, one token per digit) and ~8-12 Chinese
  // characters: well below one token per character.
  EXPECT_LT(en_avg, 16.0);
  EXPECT_LT(zh_avg, 11.0);
}

TEST(BpeTrainer, PiecesStayWithinOneScriptAndDigitsStayAlone) {
  std::vector<std::string> texts = mixed_corpus(500);
  for (int i = 0; i < 200; ++i) texts.push_back("订单ABC号2024，ok你好hello");
  const Vocab v = train_bpe(texts);
  auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  auto is_latin = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  for (int32_t i = 259; i < v.size(); ++i) {
    const std::string& p = v.pieces[i];
    const bool has_digit = std::any_of(p.begin(), p.end(), is_digit);
    if (has_digit) {
      EXPECT_EQ(p.size(), 1u) << p;
    }
    const bool has_latin = std::any_of(p.begin(), p.end(), is_latin);
    const bool has_high = std::any_of(p.begin() + (p.rfind(kMarker, 0) == 0 ? 3 : 0), p.end(),
                                      [](char c) { return uint8_t(c) >= 0x80; });
    EXPECT_FALSE(has_latin && has_high) << p;
  }
  EXPECT_GE(id_of(v, "订单"), 0);
  EXPECT_GE(id_of(v, "ABC"), 0);
}

TEST(BpeTrainer, MergedDigitsWhenAsked) {
  BpeTrainOptions opt;
  opt.split_digits = false;
  std::vector<std::string> texts(50, "call 2024 now");
  const Vocab v = train_bpe(texts, opt);
  EXPECT_GE(id_of(v, kMarker + "2024"), 0);
  EXPECT_EQ(Tokenizer(v).encode("call 2024 now", false).size(), 3u);
}

// With split_space and split_cjk a value is the same tokens wherever it stands: after a space in
// a sentence, after a quote in a JSON answer, inside a run of Chinese characters.
TEST(BpeTrainer, SplitSpacesAndCjkTokeniseAValueAlikeInEveryContext) {
  BpeTrainOptions opt;
  opt.split_space = true;
  opt.split_cjk = true;
  std::vector<std::string> texts = mixed_corpus(500);
  for (int i = 0; i < 100; ++i) {
    texts.push_back("deliver it next Friday please");
    texts.push_back("{\"date\":\"next Friday\"}");
    texts.push_back("小米手环能退吗");
  }
  const Vocab v = train_bpe(texts, opt);
  for (int32_t i = 259; i < v.size(); ++i) {
    const std::string& p = v.pieces[i];
    if (p.find(kMarker) != std::string::npos) {
      EXPECT_EQ(p, kMarker);
    }
    // No piece longer than one CJK ideograph (lead bytes E4-E9 cover U+4000-U+9FFF).
    EXPECT_FALSE(p.size() > 3 && uint8_t(p[0]) >= 0xE4 && uint8_t(p[0]) <= 0xE9) << p;
  }
  const Tokenizer tok(v);
  auto ids = [&](const std::string& s) { return tok.encode(s, false); };
  auto contains = [](const std::vector<int32_t>& hay, const std::vector<int32_t>& needle) {
    return std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
  };
  const std::vector<int32_t> friday = ids("{\"date\":\"next Friday\"}");
  std::vector<int32_t> value = ids("x next Friday");
  value.erase(value.begin(), value.begin() + 2);  // "▁", "x": the value starts at "▁next"
  value.erase(value.begin());                     // the "▁" before "next"
  EXPECT_TRUE(contains(friday, value));
  const std::vector<int32_t> phrase = ids("小米手环");  // "▁" then one token per character
  EXPECT_EQ(phrase.size(), 5u);
  EXPECT_TRUE(
      contains(ids("小米手环能退吗"), std::vector<int32_t>(phrase.begin() + 1, phrase.end())));
  // Without the options the same corpus merges "▁" into words.
  const Vocab merged = train_bpe(texts);
  EXPECT_GE(id_of(merged, kMarker + "Friday"), 0);
}

TEST(BpeTrainer, RareCharactersAreLeftToTheByteFallback) {
  std::vector<std::string> texts(10, "hello world");
  texts.push_back("q");  // seen once, below min_frequency 2
  const Vocab v = train_bpe(texts);
  EXPECT_EQ(id_of(v, "q"), -1);
  EXPECT_GE(id_of(v, "h"), 0);
  BpeTrainOptions once;
  once.min_frequency = 1;
  EXPECT_GE(id_of(train_bpe(texts, once), "q"), 0);
}

TEST(BpeTrainer, VocabSizeIsAnUpperBound) {
  const std::vector<std::string> texts = random_corpus(4000, 4);
  for (int32_t n : {1500, 2222, 3000}) {
    BpeTrainOptions opt;
    opt.vocab_size = n;
    EXPECT_EQ(train_bpe(texts, opt).size(), n);
  }
  // A tiny corpus runs out of pairs occurring twice before reaching the size.
  BpeTrainOptions opt;
  opt.vocab_size = 4096;
  const Vocab small = train_bpe({"hello hello", "help"}, opt);
  EXPECT_LT(small.size(), 4096);
  EXPECT_GT(small.size(), 259);
}

TEST(BpeTrainer, MaxMergesCapsTheMergedPieces) {
  const std::vector<std::string> texts = random_corpus(4000, 4);
  BpeTrainOptions opt;
  opt.vocab_size = 3000;
  const int32_t full = train_bpe(texts, opt).size();
  opt.max_merges = 0;
  const int32_t chars_only = train_bpe(texts, opt).size();
  EXPECT_LT(chars_only, full);
  for (int32_t m : {1, 100}) {
    opt.max_merges = m;
    EXPECT_EQ(train_bpe(texts, opt).size(), chars_only + m);
  }
  opt.max_merges = 1 << 20;  // vocab_size still bounds it
  EXPECT_EQ(train_bpe(texts, opt).size(), full);
}

TEST(BpeTrainer, RejectsBadInput) {
  const std::vector<std::string> texts = mixed_corpus(200);
  BpeTrainOptions opt;
  opt.vocab_size = 300;
  try {
    train_bpe(texts, opt);
    ADD_FAILURE() << "no error for a vocabulary smaller than its characters";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("at least"), std::string::npos) << e.what();
  }
  EXPECT_THROW(train_bpe({}), std::invalid_argument);
  EXPECT_THROW(train_bpe({"", ""}), std::invalid_argument);
  BpeTrainOptions zero;
  zero.min_frequency = 0;
  EXPECT_THROW(train_bpe(texts, zero), std::invalid_argument);
  BpeTrainOptions dup;
  dup.user_defined = {"<x>", "<x>"};
  EXPECT_THROW(train_bpe(texts, dup), std::invalid_argument);
  BpeTrainOptions special;
  special.user_defined = {"</s>"};
  EXPECT_THROW(train_bpe(texts, special), std::invalid_argument);
}

TEST(BpeTrainer, UserDefinedTokensStayWhole) {
  BpeTrainOptions opt;
  opt.user_defined = {"<|sep|>", "{\"intent\":\""};
  std::vector<std::string> texts = mixed_corpus(300);
  for (int i = 0; i < 50; ++i) texts.push_back("question<|sep|>{\"intent\":\"cancel\"}");
  const Vocab v = train_bpe(texts, opt);
  EXPECT_EQ(v.pieces[259], "<|sep|>");
  EXPECT_EQ(v.types[259], TokenType::UserDefined);
  EXPECT_EQ(v.pieces[260], "{\"intent\":\"");
  for (int32_t i = 261; i < v.size(); ++i) EXPECT_EQ(v.pieces[i].find("<|sep"), std::string::npos);
  const std::vector<int32_t> ids = Tokenizer(v).encode("question<|sep|>{\"intent\":\"x", false);
  EXPECT_NE(std::find(ids.begin(), ids.end(), 259), ids.end());
  EXPECT_NE(std::find(ids.begin(), ids.end(), 260), ids.end());
}

TEST(BpeTrainer, DeterministicAndIndependentOfTextOrder) {
  std::vector<std::string> texts = mixed_corpus(800);
  const Vocab a = train_bpe(texts);
  const Vocab b = train_bpe(texts);
  std::mt19937 rng(7);
  std::shuffle(texts.begin(), texts.end(), rng);
  const Vocab c = train_bpe(texts);
  EXPECT_EQ(a.pieces, b.pieces);
  EXPECT_EQ(a.scores, b.scores);
  EXPECT_EQ(a.types, b.types);
  EXPECT_EQ(a.pieces, c.pieces);
  EXPECT_EQ(a.scores, c.scores);
}

TEST(BpeTrainer, TokenizerGgufReadsBackTheSameVocab) {
  BpeTrainOptions opt;
  opt.user_defined = {"<|sep|>"};
  const Vocab v = train_bpe(mixed_corpus(500), opt);
  const std::string path = shrike::testing::scratch_dir() + "/bpe_tok.gguf";
  write_tokenizer_gguf(v, path);
  const gguf::GgufFile f = gguf::GgufFile::open(path);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_TRUE(f.has("general.name"));
  EXPECT_TRUE(f.tensors().empty());
  const Vocab r = vocab_from_gguf(f);
  EXPECT_EQ(r.kind, v.kind);
  EXPECT_EQ(r.pieces, v.pieces);
  EXPECT_EQ(r.scores, v.scores);
  EXPECT_EQ(r.types, v.types);
  EXPECT_EQ(r.bos_id, v.bos_id);
  EXPECT_EQ(r.eos_id, v.eos_id);
  EXPECT_EQ(r.unk_id, v.unk_id);
  EXPECT_EQ(r.pad_id, v.pad_id);
  EXPECT_EQ(r.add_bos, v.add_bos);
  EXPECT_EQ(r.add_eos, v.add_eos);
  EXPECT_EQ(r.add_space_prefix, v.add_space_prefix);
  EXPECT_EQ(r.merges, v.merges);
  EXPECT_EQ(r.pre, v.pre);
  EXPECT_THROW(write_tokenizer_gguf(v, shrike::testing::scratch_dir() + "/no/such/dir/t.gguf"),
               FileError);
}

TEST(BpeTrainer, TrainsThousandsOfSentencesQuickly) {
  std::vector<std::string> texts = mixed_corpus(1000);
  const std::vector<std::string> more = random_corpus(6000, 5);
  texts.insert(texts.end(), more.begin(), more.end());
  const auto t0 = std::chrono::steady_clock::now();
  const Vocab v = train_bpe(texts);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%zu sentences -> %d pieces in %.3f s\n", texts.size(), v.size(), secs);
  EXPECT_EQ(v.size(), 4096);
#ifdef SHRIKE_SANITIZED
  const double limit = 20.0;  // ASan/UBSan builds run several times slower
#else
  const double limit = 2.0;
#endif
  EXPECT_LT(secs, limit);
}

}  // namespace
}  // namespace shrike::tokenizer
