// Prints (does not assert) encoding throughput on ~2 MB of mixed English and Chinese text for a
// SentencePiece vocabulary (Llama 2) and byte-level BPE ones (GPT-2, DeepSeek-LLM, whose
// pre-tokenizer has the most stages), and the time to encode a 4,000-token prompt; checks that
// every one decodes back to the text.
#include <gtest/gtest.h>

#include <chrono>

#include "gguf/gguf.h"
#include "shared_data.h"
#include "tokenizer/tokenizer.h"

namespace shrike::tokenizer {
namespace {

std::string mixed_text(size_t bytes) {
  const std::string en =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park with her friends, and every morning she asked her mother whether the weather would "
      "be nice. \"Can we go to the river today?\" she said. In 2024, 3,141 people visited.\n";
  // The same story in Chinese, as UTF-8 bytes.
  const std::string zh =
      "\xE4\xBB\x8E\xE5\x89\x8D\xE6\x9C\x89\xE4\xB8\x80\xE4\xB8\xAA\xE5\xB0\x8F\xE5\xA5\xB3"
      "\xE5\xAD\xA9\xEF\xBC\x8C\xE5\x90\x8D\xE5\x8F\xAB\xE8\x8E\x89\xE8\x8E\x89\xE3\x80\x82"
      "\xE5\xA5\xB9\xE5\x96\x9C\xE6\xAC\xA2\xE5\x92\x8C\xE6\x9C\x8B\xE5\x8F\x8B\xE4\xBB\xAC"
      "\xE5\x9C\xA8\xE5\x85\xAC\xE5\x9B\xAD\xE9\x87\x8C\xE7\x8E\xA9\xE8\x80\x8D\xEF\xBC\x8C"
      "\xE6\xAF\x8F\xE5\xA4\xA9\xE6\x97\xA9\xE4\xB8\x8A\xE5\xA5\xB9\xE9\x83\xBD\xE4\xBC\x9A"
      "\xE9\x97\xAE\xE5\xA6\x88\xE5\xA6\x88\xE5\xA4\xA9\xE6\xB0\x94\xE5\xA5\xBD\xE4\xB8\x8D"
      "\xE5\xA5\xBD\xE3\x80\x82\xE2\x80\x9C\xE6\x88\x91\xE4\xBB\xAC\xE4\xBB\x8A\xE5\xA4\xA9"
      "\xE5\x8F\xAF\xE4\xBB\xA5\xE5\x8E\xBB\xE6\xB2\xB3\xE8\xBE\xB9\xE5\x90\x97\xEF\xBC\x9F"
      "\xE2\x80\x9D\xE5\xA5\xB9\xE8\xAF\xB4\xE3\x80\x82\xE5\xA6\x88\xE5\xA6\x88\xE7\xAC\x91"
      "\xE4\xBA\x86\xEF\xBC\x9A\xE5\xA4\xA9\xE7\xA9\xBA\xE5\xBE\x88\xE6\x99\xB4\xE6\x9C\x97"
      "\xEF\xBC\x8C\xE9\xB8\x9F\xE5\x84\xBF\xE5\x9C\xA8\xE6\xAD\x8C\xE5\x94\xB1\xEF\xBC\x8C"
      "\xE6\xA1\xA5\xE8\xBE\xB9\xE7\x9A\x84\xE8\x80\x81\xE6\xA9\xA1\xE6\xA0\x91\xE9\x95\xBF"
      "\xE5\x87\xBA\xE4\xBA\x86\xE4\xB8\x89\xE6\xA0\xB9\xE6\x96\xB0\xE6\x9E\x9D\xE3\x80\x82\n";
  std::string text;
  while (text.size() < bytes) text += en + zh;
  return text;
}

class TokenizerSpeed : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerSpeed, MixedEnglishAndChinese) {
  const std::string name = GetParam();
  const std::string rel = "reference/tokenizers/ggml-vocab-" + name + ".gguf";
  SHRIKE_REQUIRE_SHARED(rel);
  const Tokenizer tok(vocab_from_gguf(gguf::GgufFile::open(testing::shared_dir() + "/" + rel)));
  const std::string text = mixed_text(size_t(2) << 20);
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  const auto ids = tok.encode(text, false);
  const double s = std::chrono::duration<double>(clock::now() - t0).count();
  EXPECT_EQ(tok.decode(ids), text);

  // A 4,000-token prompt: the same text cut to about that many tokens.
  const std::string prompt =
      text.substr(0, size_t(4000.0 * double(text.size()) / double(ids.size())));
  t0 = clock::now();
  const auto prompt_ids = tok.encode(prompt, true);
  const double ps = std::chrono::duration<double>(clock::now() - t0).count();
  std::printf(
      "[ speed    ] %-13s %.2f MB mixed en/zh in %.3f s = %5.1f MB/s (%.2f bytes/token); "
      "%zu-token prompt in %.2f ms\n",
      name.c_str(), double(text.size()) / 1e6, s, double(text.size()) / 1e6 / s,
      double(text.size()) / double(ids.size()), prompt_ids.size(), ps * 1e3);
}

INSTANTIATE_TEST_SUITE_P(All, TokenizerSpeed,
                         ::testing::Values("llama-spm", "gpt-2", "deepseek-llm"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

}  // namespace
}  // namespace shrike::tokenizer
