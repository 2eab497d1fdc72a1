// Vocabulary loading: llama2.c tok*.bin files and GGUF metadata, including malformed inputs.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "shared_data.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace shrike::tokenizer {
namespace {

using shrike::testing::scratch_dir;
using shrike::testing::write_file;

std::string u32(uint32_t v) {
  return std::string(reinterpret_cast<const char*>(&v), 4);
}
std::string f32(float f) {
  return std::string(reinterpret_cast<const char*>(&f), 4);
}
std::string entry(float score, const std::string& bytes) {
  return f32(score) + u32(uint32_t(bytes.size())) + bytes;
}

// A 5-token llama2.c file: <unk>, BOS, EOS, <0x41>, " a".
std::string tiny_llama2c() {
  return u32(6) + entry(0, "<unk>") + entry(0, "\n<s>\n") + entry(0, "\n</s>\n") +
         entry(0, "<0x41>") + entry(-1.5f, " a");
}

// Expects a FileError whose message starts with the path and contains `what`.
template <typename F>
void expect_file_error(F&& f, const std::string& path, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "no FileError for " << path;
  } catch (const FileError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(TokenizerLlama2cVocab, ConvertsToSentencePieceForm) {
  const std::string path = scratch_dir() + "/tiny.bin";
  write_file(path, tiny_llama2c());
  const Vocab v = load_llama2c_vocab(path, 5);
  ASSERT_EQ(v.size(), 5);
  EXPECT_EQ(v.pieces[1], "<s>");
  EXPECT_EQ(v.pieces[2], "</s>");
  EXPECT_EQ(v.pieces[4],
            "\xE2\x96\x81"
            "a");
  EXPECT_EQ(v.scores[4], -1.5f);
  EXPECT_EQ(v.types[0], TokenType::Unknown);
  EXPECT_EQ(v.types[1], TokenType::Control);
  EXPECT_EQ(v.types[3], TokenType::Byte);
  EXPECT_EQ(v.types[4], TokenType::Normal);
  EXPECT_EQ(v.bos_id, 1);
  EXPECT_EQ(v.eos_id, 2);
  EXPECT_EQ(v.unk_id, 0);
  EXPECT_EQ(load_llama2c_vocab(path, 0).size(), 5);  // 0: read to the end of the file
  EXPECT_EQ(load_llama2c_vocab(path, 3).size(), 3);  // a prefix is fine (llama2.c does the same)
}

TEST(TokenizerLlama2cVocab, BadFilesThrowFileErrorNamingThePath) {
  const std::string dir = scratch_dir();
  const std::string full = tiny_llama2c();
  const std::string truncated = dir + "/truncated.bin", absurd = dir + "/absurd.bin",
                    empty = dir + "/empty.bin", missing = dir + "/missing.bin";
  write_file(truncated, full.substr(0, full.size() - 1));
  write_file(absurd, u32(6) + f32(0) + u32(0xFFFFFFF0u) + "<unk>");
  write_file(empty, "");
  expect_file_error([&] { load_llama2c_vocab(truncated, 5); }, truncated, "past the end");
  expect_file_error([&] { load_llama2c_vocab(absurd, 5); }, absurd, "4294967280 bytes");
  expect_file_error([&] { load_llama2c_vocab(empty, 5); }, empty, "truncated");
  expect_file_error([&] { load_llama2c_vocab(missing, 5); }, missing, "cannot open");
  // More ids than the file holds: truncated at a score/length field.
  const std::string whole = dir + "/whole.bin";
  write_file(whole, full);
  expect_file_error([&] { load_llama2c_vocab(whole, 6); }, whole, "token 5");
}

TEST(TokenizerLlama2cVocab, Tok512) {
  SHRIKE_REQUIRE_SHARED("reference/stories260K/tok512.bin");
  const Vocab v =
      load_llama2c_vocab(shrike::testing::shared_dir() + "/reference/stories260K/tok512.bin", 512);
  ASSERT_EQ(v.size(), 512);
  EXPECT_EQ(v.pieces[0], "<unk>");
  EXPECT_EQ(v.pieces[1], "<s>");
  EXPECT_EQ(v.pieces[3], "<0x00>");
  EXPECT_EQ(v.pieces[258], "<0xFF>");
  for (int i = 3; i <= 258; ++i) EXPECT_EQ(v.types[i], TokenType::Byte) << i;
  EXPECT_EQ(v.types[259], TokenType::Normal);
}

// A minimal "llama" tokenizer GGUF; `edit` may change it before it is written.
template <typename F>
std::string write_vocab_gguf(const std::string& name, F&& edit) {
  gguf::GgufWriter w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>",
                                               "\xE2\x96\x81"
                                               "a"});
  w.set_float32_array("tokenizer.ggml.scores", {0, 0, 0, -1});
  w.set_int32_array("tokenizer.ggml.token_type", {2, 3, 3, 1});
  edit(w);
  const std::string path = scratch_dir() + "/" + name + ".gguf";
  w.write(path);
  return path;
}

TEST(TokenizerGgufVocab, ReadsMetadataAndDefaults) {
  const std::string path = write_vocab_gguf("ok", [](gguf::GgufWriter& w) {
    w.set_uint32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);
    w.set_uint32("tokenizer.ggml.eos_token_id", 3);
    w.set_bool("tokenizer.ggml.add_space_prefix", false);
  });
  const Vocab v = vocab_from_gguf(gguf::GgufFile::open(path));
  ASSERT_EQ(v.size(), 4);
  EXPECT_EQ(v.scores[3], -1.0f);
  EXPECT_EQ(v.types[0], TokenType::Unknown);
  EXPECT_EQ(v.bos_id, 1);  // absent: llama.cpp's SPM default
  EXPECT_EQ(v.eos_id, 3);
  EXPECT_EQ(v.unk_id, 0);
  EXPECT_EQ(v.pad_id, -1);  // 0xFFFFFFFF: none
  EXPECT_TRUE(v.add_bos);
  EXPECT_FALSE(v.add_eos);
  EXPECT_FALSE(v.add_space_prefix);
}

TEST(TokenizerGgufVocab, MalformedMetadataThrowsFileError) {
  const std::string short_scores = write_vocab_gguf("short_scores", [](gguf::GgufWriter& w) {
    w.set_float32_array("tokenizer.ggml.scores", {0, 0, 0});
  });
  expect_file_error([&] { vocab_from_gguf(gguf::GgufFile::open(short_scores)); }, short_scores,
                    "tokenizer.ggml.scores has 3 entries but tokenizer.ggml.tokens has 4");
  const std::string bad_type = write_vocab_gguf("bad_type", [](gguf::GgufWriter& w) {
    w.set_int32_array("tokenizer.ggml.token_type", {2, 3, 3, 9});
  });
  expect_file_error([&] { vocab_from_gguf(gguf::GgufFile::open(bad_type)); }, bad_type,
                    "tokenizer.ggml.token_type[3] is 9");
  const std::string bad_bos = write_vocab_gguf(
      "bad_bos", [](gguf::GgufWriter& w) { w.set_uint32("tokenizer.ggml.bos_token_id", 4); });
  expect_file_error([&] { vocab_from_gguf(gguf::GgufFile::open(bad_bos)); }, bad_bos,
                    "tokenizer.ggml.bos_token_id");
  const std::string wrong_kind = write_vocab_gguf(
      "wrong_kind", [](gguf::GgufWriter& w) { w.set_string("tokenizer.ggml.model", "t5"); });
  expect_file_error([&] { vocab_from_gguf(gguf::GgufFile::open(wrong_kind)); }, wrong_kind,
                    "unsupported tokenizer model 't5'");

  gguf::GgufWriter none;
  none.set_string("general.architecture", "llama");
  const std::string no_tokenizer = scratch_dir() + "/no_tokenizer.gguf";
  none.write(no_tokenizer);
  expect_file_error([&] { vocab_from_gguf(gguf::GgufFile::open(no_tokenizer)); }, no_tokenizer,
                    "tokenizer.ggml.model");
}

TEST(TokenizerGgufVocab, ReadsGpt2Vocabulary) {
  SHRIKE_REQUIRE_SHARED("reference/tokenizers/ggml-vocab-gpt-2.gguf");
  const Vocab v = vocab_from_gguf(gguf::GgufFile::open(
      shrike::testing::shared_dir() + "/reference/tokenizers/ggml-vocab-gpt-2.gguf"));
  EXPECT_EQ(v.kind, VocabKind::Bpe);
  EXPECT_EQ(v.pre, "gpt-2");
  EXPECT_EQ(v.size(), 50257);
  EXPECT_EQ(v.merges.size(), 50000u);
  EXPECT_EQ(v.bos_id, 50256);
  EXPECT_FALSE(v.add_space_prefix);
}

}  // namespace
}  // namespace shrike::tokenizer
