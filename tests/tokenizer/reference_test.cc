// Checks against reference data in ../shared: llama2.c run.c's stories260K prompts and
// llama.cpp's tokenizer test vectors (whose expected ids come from Hugging Face tokenizers).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "shared_data.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace shrike::tokenizer {
namespace {

using shrike::testing::read_file;
using shrike::testing::shared_dir;

std::string stories_dir() {
  return shared_dir() + "/reference/stories260K";
}

// golden.json: every prompt encodes to run.c's ids; every generated id's piece matches run.c's
// (which stores "▁" as ' ', BOS as "\n<s>\n" and prints <0xXX> as the raw byte); the whole text
// decodes to run.c's stdout minus its final newline.
void check_golden(const Tokenizer& tok) {
  const auto golden = nlohmann::json::parse(read_file(stories_dir() + "/golden.json"));
  ASSERT_FALSE(golden["cases"].empty());
  for (const auto& c : golden["cases"]) {
    const std::string prompt = c["prompt"];
    SCOPED_TRACE("prompt '" + prompt + "'");
    const auto prompt_ids = c["prompt_token_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(prompt, true), prompt_ids);

    const auto gen_ids = c["greedy_token_ids"].get<std::vector<int32_t>>();
    const auto gen_pieces = c["greedy_token_pieces"].get<std::vector<std::string>>();
    ASSERT_EQ(gen_ids.size(), gen_pieces.size());
    for (size_t i = 0; i < gen_ids.size(); ++i) {
      std::string want = gen_pieces[i];
      unsigned byte = 0;
      if (want.size() == 6 && std::sscanf(want.c_str(), "<0x%02X>", &byte) == 1)
        want = std::string(1, char(byte));
      else if (want == "\n<s>\n" || want == "\n</s>\n")
        want.clear();
      EXPECT_EQ(tok.token_to_piece(gen_ids[i]), want) << "generated token " << i;
    }

    std::vector<int32_t> all = prompt_ids;
    all.insert(all.end(), gen_ids.begin(), gen_ids.end());
    std::string text = c["text"];
    ASSERT_FALSE(text.empty());
    text.pop_back();  // run.c's final newline
    EXPECT_EQ(tok.decode(all), text);
  }
}

TEST(TokenizerGolden, Stories260KWithTok512) {
  SHRIKE_REQUIRE_SHARED("reference/stories260K/golden.json");
  SHRIKE_REQUIRE_SHARED("reference/stories260K/tok512.bin");
  check_golden(Tokenizer(load_llama2c_vocab(stories_dir() + "/tok512.bin", 512)));
}

TEST(TokenizerGolden, Stories260KWithGgufVocab) {
  SHRIKE_REQUIRE_SHARED("reference/stories260K/golden.json");
  SHRIKE_REQUIRE_SHARED("reference/stories260K/stories260K.gguf");
  const Vocab v = vocab_from_gguf(gguf::GgufFile::open(stories_dir() + "/stories260K.gguf"));
  EXPECT_EQ(v.size(), 512);
  EXPECT_EQ(v.pieces, load_llama2c_vocab(stories_dir() + "/tok512.bin", 512).pieces);
  check_golden(Tokenizer(v));
}

// llama.cpp's test-tokenizer-0 vectors: .inp strings separated by "\n__ggml_vocab_test__\n",
// .out lines of space-separated ids (no BOS/EOS).
void check_vectors(const std::string& name) {
  const std::string base =
      ::shrike::testing::tokenizer_vectors_dir() + "/ggml-vocab-" + name + ".gguf";
  const Tokenizer tok(vocab_from_gguf(gguf::GgufFile::open(base)));
  const std::string inp = read_file(base + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0, next; (next = inp.find(sep, pos)) != std::string::npos;
       pos = next + sep.size())
    texts.push_back(inp.substr(pos, next - pos));
  std::istringstream out(read_file(base + ".out"));
  std::vector<std::vector<int32_t>> want;
  for (std::string line; std::getline(out, line);) {
    std::istringstream ls(line);
    want.emplace_back();
    for (int32_t id; ls >> id;) want.back().push_back(id);
  }
  ASSERT_EQ(texts.size(), want.size());
  ASSERT_GE(texts.size(), 40u);

  // WordPiece lower-cases, strips accents and drops spacing, so only SPM and byte-level BPE
  // must decode back to the text.
  const bool lossless = tok.kind() != VocabKind::Wpm;
  int enc_ok = 0, dec_ok = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto got = tok.encode(texts[i], false);
    enc_ok += got == want[i];
    EXPECT_EQ(got, want[i]) << name << " test " << i << ": encode '" << texts[i] << "'";
    const std::string back = tok.decode(want[i]);
    dec_ok += back == texts[i];
    if (lossless) {
      EXPECT_EQ(back, texts[i]) << name << " test " << i << ": decode";
    }
  }
  std::printf("[ vectors  ] %-14s encode %d/%zu, decode round trip %d/%zu%s\n", name.c_str(),
              enc_ok, texts.size(), dec_ok, texts.size(), lossless ? "" : " (lossy: not checked)");
}

TEST(TokenizerVectors, LlamaSpm) {
  SHRIKE_REQUIRE_SHARED("reference/tokenizers/ggml-vocab-llama-spm.gguf");
  check_vectors("llama-spm");
}

TEST(TokenizerVectors, Phi3) {
  SHRIKE_REQUIRE_SHARED("reference/tokenizers/ggml-vocab-phi-3.gguf");
  check_vectors("phi-3");
}

// Every other vocabulary with both a .gguf and vectors: WordPiece and byte-level BPE with each
// pre-tokenizer family present.
class TokenizerVectorsBpe : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerVectorsBpe, MatchesReferenceIds) {
  const std::string name = GetParam();
  SHRIKE_REQUIRE_SHARED("reference/tokenizers/ggml-vocab-" + name + ".gguf");
  check_vectors(name);
}

INSTANTIATE_TEST_SUITE_P(All, TokenizerVectorsBpe,
                         ::testing::Values("bert-bge", "gpt-2", "mpt", "falcon", "starcoder",
                                           "refact", "deepseek-coder", "deepseek-llm"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

// Encoding word by word (the fast path) must give what BPE over the whole text gives. An extra
// piece that no merge can reach ("\x01▁\x01") turns the word splitting off.
TEST(TokenizerVectors, WordSplittingMatchesWholeText) {
  SHRIKE_REQUIRE_SHARED("reference/tokenizers/ggml-vocab-llama-spm.gguf");
  const std::string base =
      ::shrike::testing::tokenizer_vectors_dir() + "/ggml-vocab-llama-spm.gguf";
  Vocab v = vocab_from_gguf(gguf::GgufFile::open(base));
  const Tokenizer split(v);
  v.pieces.push_back("\x01\xE2\x96\x81\x01");
  v.scores.push_back(-1e9f);
  v.types.push_back(TokenType::Normal);
  const Tokenizer whole(std::move(v));
  std::string all = read_file(base + ".inp");
  for (char& c : all)
    if (c == '_') c = ' ';  // more words and space runs
  EXPECT_EQ(split.encode(all, true), whole.encode(all, true));

  // Random bytes (mostly invalid UTF-8) and random space/letter mixes: both paths agree, and
  // byte fallback makes every string without a literal "▁" round-trip.
  std::mt19937 rng(1234);
  for (int i = 0; i < 300; ++i) {
    std::string text(rng() % 40, ' ');
    for (char& c : text) c = i % 2 ? char(rng()) : " ab\xE2\x96\x81\xC3\xA9"[rng() % 8];
    EXPECT_EQ(split.encode(text, false), whole.encode(text, false)) << i;
    if (text.find("\xE2\x96\x81") == std::string::npos) {  // a literal "▁" decodes as ' '
      EXPECT_EQ(split.decode(split.encode(text, true)), text) << i;
    }
  }
}

// Prints (does not assert) encoding throughput on ~1 MB of English with the Llama-2 vocabulary,
// word by word (the normal path) and as one BPE over the whole text (the path for vocabularies
// with pieces that span words), and checks both decode back exactly.
TEST(TokenizerSpeed, EncodeOneMegabyteLlamaSpm) {
  SHRIKE_REQUIRE_SHARED("reference/tokenizers/ggml-vocab-llama-spm.gguf");
  Vocab v = vocab_from_gguf(gguf::GgufFile::open(::shrike::testing::tokenizer_vectors_dir() +
                                                 "/ggml-vocab-llama-spm.gguf"));
  const Tokenizer split(v);
  v.pieces.push_back("\x01\xE2\x96\x81\x01");  // unreachable; turns word splitting off
  v.scores.push_back(-1e9f);
  v.types.push_back(TokenType::Normal);
  const Tokenizer whole(std::move(v));
  const std::string paragraph =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park with her friends, and every morning she asked her mother whether the weather would "
      "be nice. \"Can we go to the river today?\" she said. Her mother smiled: the sky was clear, "
      "the birds were singing, and the old oak tree near the bridge had grown 3 new branches.\n";
  std::string text;
  while (text.size() < (1u << 20)) text += paragraph;
  for (const auto* tok : {&split, &whole}) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = tok->encode(text, false);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ speed    ] llama-spm encode (%s): %.2f MB in %.3f s = %.1f MB/s, %zu tokens\n",
                tok == &split ? "word by word" : "whole text", text.size() / 1e6, s,
                text.size() / 1e6 / s, ids.size());
    EXPECT_EQ(tok->decode(ids), text);
  }
}

}  // namespace
}  // namespace shrike::tokenizer
