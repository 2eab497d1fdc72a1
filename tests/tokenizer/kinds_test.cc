// Byte-level BPE and WordPiece: malformed GGUF metadata, pre-tokenizer splits of the families
// without a vocabulary file here (Llama-3, Qwen2), added tokens, streaming detokenisation, and
// encoding speed (printed, not asserted).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "shared_data.h"
#include "test_util.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/stream.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace shrike::tokenizer {
namespace {

using shrike::testing::scratch_dir;

// A tiny byte-level BPE GGUF: pieces for "a", "b", "ab", "Ġ" (space), "Ġab"; `edit` may break it.
template <typename F>
std::string write_bpe_gguf(const std::string& name, F&& edit) {
  gguf::GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "gpt-2");
  w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "ab", "\xC4\xA0",
                                               "\xC4\xA0"
                                               "ab",
                                               "<|end|>"});
  w.set_int32_array("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 3});
  w.set_string_array("tokenizer.ggml.merges", {"a b", "\xC4\xA0 ab"});
  edit(w);
  const std::string path = scratch_dir() + "/" + name + ".gguf";
  w.write(path);
  return path;
}

void expect_file_error(const std::string& path, const std::string& what) {
  try {
    vocab_from_gguf(gguf::GgufFile::open(path));
    ADD_FAILURE() << "no FileError for " << path;
  } catch (const FileError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
}

TEST(TokenizerBpe, TinyVocabularyEncodesAndDecodes) {
  const std::string path = write_bpe_gguf("bpe_ok", [](gguf::GgufWriter&) {});
  const Tokenizer tok(vocab_from_gguf(gguf::GgufFile::open(path)));
  EXPECT_EQ(tok.kind(), VocabKind::Bpe);
  EXPECT_EQ(tok.encode("ab ab", false), (std::vector<int32_t>{2, 4}));
  EXPECT_EQ(tok.decode({2, 4}), "ab ab");
  // Control tokens are text unless parse_special; then they are one id and decode to nothing.
  EXPECT_EQ(tok.encode("ab<|end|>", false, true), (std::vector<int32_t>{2, 5}));
  EXPECT_EQ(tok.decode({2, 5}), "ab");
}

TEST(TokenizerBpe, MalformedMetadataThrowsFileError) {
  expect_file_error(write_bpe_gguf("merge_unknown",
                                   [](gguf::GgufWriter& w) {
                                     w.set_string_array("tokenizer.ggml.merges", {"a b", "a c"});
                                   }),
                    "tokenizer.ggml.merges[1] 'a c' names 'c', which is not a token");
  expect_file_error(write_bpe_gguf("merge_result_unknown",
                                   [](gguf::GgufWriter& w) {
                                     w.set_string_array("tokenizer.ggml.merges", {"b a"});
                                   }),
                    "names 'ba', which is not a token");
  expect_file_error(write_bpe_gguf("merge_no_space",
                                   [](gguf::GgufWriter& w) {
                                     w.set_string_array("tokenizer.ggml.merges", {"ab"});
                                   }),
                    "tokenizer.ggml.merges[0] 'ab' is not two pieces separated by a space");
  expect_file_error(write_bpe_gguf("merges_wrong_type",
                                   [](gguf::GgufWriter& w) {
                                     w.set_int32_array("tokenizer.ggml.merges", {1, 2});
                                   }),
                    "tokenizer.ggml.merges");
  expect_file_error(
      write_bpe_gguf("pre_wrong_type",
                     [](gguf::GgufWriter& w) { w.set_uint32("tokenizer.ggml.pre", 2); }),
      "tokenizer.ggml.pre");
  expect_file_error(
      write_bpe_gguf("pre_unknown",
                     [](gguf::GgufWriter& w) { w.set_string("tokenizer.ggml.pre", "klingon"); }),
      "unknown pre-tokenizer tokenizer.ggml.pre = 'klingon'");
  expect_file_error(write_bpe_gguf("types_short",
                                   [](gguf::GgufWriter& w) {
                                     w.set_int32_array("tokenizer.ggml.token_type", {1, 1});
                                   }),
                    "tokenizer.ggml.token_type has 2 entries but tokenizer.ggml.tokens has 6");
  expect_file_error(write_bpe_gguf("scores_short",
                                   [](gguf::GgufWriter& w) {
                                     w.set_float32_array("tokenizer.ggml.scores", {0});
                                   }),
                    "tokenizer.ggml.scores has 1 entries but tokenizer.ggml.tokens has 6");
  expect_file_error(
      write_bpe_gguf("no_merges",
                     [](gguf::GgufWriter& w) { w.set_string("tokenizer.ggml.merges", "a b"); }),
      "tokenizer.ggml.merges");
  expect_file_error(
      write_bpe_gguf("bad_eos",
                     [](gguf::GgufWriter& w) { w.set_uint32("tokenizer.ggml.eos_token_id", 6); }),
      "tokenizer.ggml.eos_token_id is 6");
}

std::vector<std::string> split(PreType t, const std::string& text) {
  std::vector<std::pair<uint32_t, uint32_t>> w;
  PreTokenizer(t).split(text, w);
  std::vector<std::string> out;
  for (const auto& [a, b] : w) out.push_back(text.substr(a, b - a));
  return out;
}

// Llama-3 and Qwen2 have vectors but no vocabulary here; check their pre-tokenizer splits on the
// cases where their regexes differ from GPT-2's (contractions in any case, digit runs, a
// non-letter before a word, newlines after punctuation, whitespace before newlines).
TEST(TokenizerPreTokenizer, Llama3AndQwen2Splits) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split(PreType::Llama3, "I'M 1234567 $hello!!\n\n  x"),
            (V{"I", "'M", " ", "123", "456", "7", " $", "hello", "!!\n\n", " ", " x"}));
  EXPECT_EQ(split(PreType::Qwen2, "ab 123"), (V{"ab", " ", "1", "2", "3"}));
  EXPECT_EQ(split(PreType::Llama3, "a  \n b"), (V{"a", "  \n", " b"}));
  EXPECT_EQ(split(PreType::Gpt2, "I'M 12345   x"), (V{"I", "'", "M", " 12345", "  ", " x"}));
  // Invalid UTF-8 is kept byte for byte and all of the text is covered.
  const std::string bad = "a\xFF\xC3 b";
  std::string joined;
  for (const auto& s : split(PreType::Llama3, bad)) joined += s;
  EXPECT_EQ(joined, bad);
}

TEST(TokenizerUnicode, ClassesComeFromTables) {
  EXPECT_TRUE(unicode::classes(0x4E2D) & unicode::kLetter);   // 中
  EXPECT_TRUE(unicode::classes(0x0661) & unicode::kNumber);   // Arabic-Indic one
  EXPECT_TRUE(unicode::classes(0x3000) & unicode::kSpace);    // ideographic space
  EXPECT_TRUE(unicode::classes(0x3002) & unicode::kPunct);    // 。
  EXPECT_TRUE(unicode::classes(0x1D400) & unicode::kLetter);  // mathematical bold A (> BMP)
  EXPECT_FALSE(unicode::classes(0x1F600) & (unicode::kLetter | unicode::kNumber));  // emoji
}

TEST(TokenizerStream, HoldsIncompleteUtf8) {
  Utf8Stream s;
  EXPECT_EQ(s.push("a\xE4"), "a");
  EXPECT_EQ(s.push("\xB8"), "");
  EXPECT_EQ(s.push("\xAD"
                   "b\xF0\x9F"),
            "\xE4\xB8\xAD"
            "b");
  EXPECT_EQ(s.push("\x98\x81"), "\xF0\x9F\x98\x81");
  EXPECT_EQ(s.push("\xFF"), "\xFF");  // can never be completed: passed through
  EXPECT_EQ(s.push("\xC3"), "");
  EXPECT_EQ(s.flush(), "\xC3");
}

// Byte-level BPE splits multi-byte characters across tokens: streaming one id at a time yields
// only whole characters and, concatenated, exactly decode().
TEST(TokenizerStream, DecoderMatchesDecode) {
  SHRIKE_REQUIRE_SHARED("reference/tokenizers/ggml-vocab-gpt-2.gguf");
  for (const char* name : {"gpt-2", "llama-spm"}) {
    const Tokenizer tok(vocab_from_gguf(gguf::GgufFile::open(
        ::shrike::testing::tokenizer_vectors_dir() + "/ggml-vocab-" + name + ".gguf")));
    const std::string text = "Hello 世界 🦙 Führer\n";
    const auto ids = tok.encode(text, false);
    StreamDecoder d(tok);
    std::string all;
    for (int32_t id : ids) {
      const std::string part = d.push(id);
      for (size_t i = 0; i < part.size();) {
        const size_t n = unicode::utf8_char_len(part, i);
        ASSERT_GT(n, 0u) << name << ": incomplete UTF-8 emitted";
        i += n;
      }
      all += part;
    }
    all += d.flush();
    EXPECT_EQ(all, tok.decode(ids)) << name;
    EXPECT_EQ(all, text) << name;
  }
}

TEST(TokenizerWordPiece, NormalisesLikeBert) {
  SHRIKE_REQUIRE_SHARED("reference/tokenizers/ggml-vocab-bert-bge.gguf");
  const Tokenizer tok(vocab_from_gguf(gguf::GgufFile::open(
      ::shrike::testing::tokenizer_vectors_dir() + "/ggml-vocab-bert-bge.gguf")));
  EXPECT_EQ(tok.kind(), VocabKind::Wpm);
  EXPECT_EQ(tok.decode(tok.encode("Héllo   WORLD", false)), "hello world");
  EXPECT_EQ(tok.encode("[CLS]", false, true), std::vector<int32_t>{101});
}

// Prints (does not assert) throughput on ~2 MB of mixed English and Chinese for SPM (Llama-2)
// and byte-level BPE (GPT-2, DeepSeek-LLM), and checks that the lossless ones decode back.
TEST(TokenizerSpeed, EncodeMixedEnglishChinese) {
  SHRIKE_REQUIRE_SHARED("reference/tokenizers/ggml-vocab-gpt-2.gguf");
  const std::string paragraph =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park with her friends; \"Can we go to the river today?\" she asked at 9:30.\n"
      "从前有一个小女孩，名叫莉莉。她喜欢和朋友们在公园里玩耍，每天早上都会问妈妈天气怎么样。\n";
  std::string text;
  while (text.size() < (2u << 20)) text += paragraph;
  for (const char* name : {"llama-spm", "gpt-2", "deepseek-llm"}) {
    const Tokenizer tok(vocab_from_gguf(gguf::GgufFile::open(
        ::shrike::testing::tokenizer_vectors_dir() + "/ggml-vocab-" + name + ".gguf")));
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = tok.encode(text, false);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf(
        "[ speed    ] %-12s encode mixed en/zh: %.2f MB in %.3f s = %.1f MB/s, %zu tokens\n", name,
        text.size() / 1e6, s, text.size() / 1e6 / s, ids.size());
    EXPECT_EQ(tok.decode(ids), text) << name;
  }
}

}  // namespace
}  // namespace shrike::tokenizer
