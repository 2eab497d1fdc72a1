// The `shrike` command as a user runs it: exit codes, one-line errors naming the file, the
// documented output formats.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "run_shrike.h"
#include "shared_data.h"

namespace shrike {
namespace {

using Result = testing::CommandResult;

Result shrike(const std::string& args) {
  return testing::run_shrike(args);
}

std::string temp_file(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("shrike_cli_test_" + std::to_string(getpid()) + "_" + name))
      .string();
}

void expect_bad_file(const std::string& path, const std::string& phrase) {
  const Result r = shrike("generate -m " + path + " -p hi -n 2");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(phrase), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
}

TEST(Cli, BadModelFilesExitWithCode2AndOneLineNamingTheFile) {
  const std::string magic = temp_file("magic.gguf");
  std::ofstream(magic) << "GGUX and then some more bytes to look like a header..........";
  expect_bad_file(magic, "not a model file");

  const std::string version = temp_file("version.gguf");
  {
    std::ofstream out(version, std::ios::binary);
    const uint32_t v = 99;
    const uint64_t zero = 0;
    out.write("GGUF", 4);
    out.write(reinterpret_cast<const char*>(&v), 4);
    out.write(reinterpret_cast<const char*>(&zero), 8);
    out.write(reinterpret_cast<const char*>(&zero), 8);
  }
  expect_bad_file(version, "version");

  const std::string truncated = temp_file("truncated.gguf");
  std::ofstream(truncated) << "GGUF";
  expect_bad_file(truncated, "truncated");

  expect_bad_file(temp_file("missing.gguf"), "cannot open");
  for (const auto& f : {magic, version, truncated}) std::filesystem::remove(f);
}

TEST(Cli, UnknownOptionIsAUsageError) {
  const Result r = shrike("generate --no-such-flag");
  EXPECT_EQ(r.exit_code, 1);
}

TEST(Cli, GenerateIdsReproducesTheGoldenGreedyTokens) {
  SHRIKE_REQUIRE_SHARED("reference/stories260K/golden.json");
  const std::string dir = testing::shared_dir() + "/reference/stories260K/";
  std::ifstream in(dir + "golden.json");
  const auto golden = nlohmann::json::parse(in);
  const auto& cs = golden["cases"][2];  // "The little dog"
  const auto expected = cs["greedy_token_ids"].get<std::vector<int>>();
  for (const std::string& model :
       {std::string("stories260K.gguf"), std::string("stories260K.bin")}) {
    const std::string tok = model == "stories260K.bin" ? " --tokenizer " + dir + "tok512.bin" : "";
    const Result r =
        shrike("generate -m " + dir + model + tok + " -p '" + cs["prompt"].get<std::string>() +
               "' -n " + std::to_string(expected.size()) + " --temp 0 --ids --threads 2");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream ids(r.out);
    std::vector<int> got;
    for (int id; ids >> id;) got.push_back(id);
    EXPECT_EQ(got, expected) << model;
    EXPECT_NE(r.err.find("decode:"), std::string::npos) << "speeds go to stderr: " << r.err;
  }
}

// `shrike logits` on the prompt and llama2.c's greedy continuation (golden.json): each position's
// argmax is the next golden token, and the prompt's last row is llama2.c's own logits.
TEST(Cli, LogitsOfEveryPositionMatchTheGoldenGreedyRun) {
  SHRIKE_REQUIRE_SHARED("reference/stories260K/golden.json");
  const std::string dir = testing::shared_dir() + "/reference/stories260K/";
  std::ifstream in(dir + "golden.json");
  const auto cs = nlohmann::json::parse(in)["cases"][2];
  const auto prompt = cs["prompt_token_ids"].get<std::vector<int>>();
  auto greedy = cs["greedy_token_ids"].get<std::vector<int>>();
  greedy.resize(16);
  std::vector<int> ids = prompt;
  ids.insert(ids.end(), greedy.begin(), greedy.end() - 1);
  const std::string tokens = temp_file("ids.txt"), out = temp_file("logits.f32");
  {
    std::ofstream t(tokens);
    for (int id : ids) t << id << ' ';
  }
  Result r = shrike("logits -m " + dir + "stories260K.gguf --tokens " + tokens + " -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int64_t vocab = 512;
  ASSERT_EQ(int64_t(std::filesystem::file_size(out)), int64_t(ids.size()) * vocab * 4);
  std::vector<float> logits(ids.size() * size_t(vocab));
  std::ifstream(out, std::ios::binary)
      .read(reinterpret_cast<char*>(logits.data()), std::streamsize(logits.size() * 4));
  for (size_t i = 0; i < greedy.size(); ++i) {
    const float* row = logits.data() + (prompt.size() - 1 + i) * size_t(vocab);
    EXPECT_EQ(std::max_element(row, row + vocab) - row, greedy[i]) << "step " << i;
  }
  const auto want = cs["prompt_final_position_logits"].get<std::vector<float>>();
  ASSERT_EQ(int64_t(want.size()), vocab);
  for (int64_t v = 0; v < vocab; ++v)
    EXPECT_NEAR(logits[(prompt.size() - 1) * size_t(vocab) + size_t(v)], want[size_t(v)], 1e-4)
        << v;
  // A word that is not an id of this vocabulary names the file and the word.
  {
    std::ofstream t(tokens);
    t << "1 291 512";
  }
  r = shrike("logits -m " + dir + "stories260K.gguf --tokens " + tokens + " -o " + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'512' is not a token id of this vocabulary (0..511; word 3)"),
            std::string::npos)
      << r.err;
  std::filesystem::remove(tokens);
  std::filesystem::remove(out);
}

TEST(Cli, SynthWritesAModelThatBenchMeasures) {
  const std::string path = temp_file("synth.gguf");
  Result r = shrike(
      "synth --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --vocab 300 --type q4_0 -o " +
      path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = shrike("bench -m " + path + " -p 8,16 -n 4 -r 1 --threads 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"prefill_tok_s", "decode_tok_s", "decode_gb_s"}) {
    ASSERT_TRUE(j.contains(key)) << key;
    EXPECT_GT(j[key].get<double>(), 0) << key;
  }
  EXPECT_EQ(j["prefill"].size(), 2u);
  EXPECT_EQ(j["weight_type"], "q4_0");
  EXPECT_FALSE(j.contains("verify_steps")) << "only with -v";
  // Speculative verification cost: the one-token baseline comes first, then each size once.
  r = shrike("bench -m " + path + " -p 4 -n 0 -r 2 --threads 1 -v 3,2,3 --spec-context 20 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto v = nlohmann::json::parse(r.out)["verify_steps"];
  ASSERT_EQ(v.size(), 3u) << v;
  EXPECT_EQ(v[0]["tokens"], 1);
  EXPECT_DOUBLE_EQ(v[0]["ratio"].get<double>(), 1.0);
  EXPECT_EQ(v[1]["tokens"], 3);
  EXPECT_EQ(v[2]["tokens"], 2);
  EXPECT_EQ(v[2]["context"], 20);
  for (const auto& step : v) EXPECT_GT(step["ms"].get<double>(), 0) << step;
  r = shrike("generate -m " + path +
             " -p 'ab abc' -n 5 --temp 0.8 --top-k 40 --top-p 0.9 --seed 3");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::filesystem::remove(path);
}

TEST(Cli, SynthCanBorrowARealVocabulary) {
  SHRIKE_REQUIRE_SHARED("reference/tokenizers/ggml-vocab-llama-spm.gguf");
  const std::string path = temp_file("spm.gguf");
  Result r =
      shrike("synth --dim 64 --layers 1 --heads 2 --ffn 64 --type f16 --vocab-from " +
             testing::shared_dir() + "/reference/tokenizers/ggml-vocab-llama-spm.gguf -o " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = shrike("bench -m " + path + " -p 4 -n 2 -r 1 --threads 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["parameters"].get<int64_t>(), 2 * 32000 * 64 + 4 * 64 * 64 + 3 * 64 * 64 + 3 * 64);
  EXPECT_TRUE(j["bandwidth_gb_s"].is_null()) << "not measured without --roofline";
  // With it, a model this small fits in any last-level cache: the roofline says so.
  r = shrike("bench -m " + path + " -p 0 -n 2 -r 1 --threads 1 --roofline --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto roof = nlohmann::json::parse(r.out);
  EXPECT_GT(roof["bandwidth_gb_s"].get<double>(), 0);
  const auto llc = roof["llc_bytes"].get<int64_t>();
  EXPECT_GE(roof["probe_bytes"].get<int64_t>(), std::max<int64_t>(2 * llc, int64_t(512) << 20));
  EXPECT_EQ(roof["weights_fit_in_llc"].get<bool>(), llc > 0);
  if (llc > 0) {
    EXPECT_NE(r.err.find("fit in the last-level cache"), std::string::npos) << r.err;
  }
  r = shrike("generate -m " + path + " -p 'Hello world' -n 3 --ids");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::filesystem::remove(path);
}

TEST(Cli, TokenizeAndDetokenizeAFile) {
  SHRIKE_REQUIRE_SHARED("reference/tokenizers/ggml-vocab-gpt-2.gguf");
  const std::string vocab = testing::shared_dir() + "/reference/tokenizers/ggml-vocab-gpt-2.gguf";
  // The first test string of ggml-vocab-gpt-2.gguf.inp and its expected ids (.out).
  const std::string text = temp_file("text.txt"), ids = temp_file("ids.txt");
  std::ofstream(text) << "ied 4 \xC2\xBD months";
  Result r = shrike("tokenize -m " + vocab + " --text-file " + text);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "798 604 25208 1933\n");
  std::ofstream(ids) << r.out;
  r = shrike("tokenize -m " + vocab + " --text-file " + ids + " --detokenize");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "ied 4 \xC2\xBD months");
  std::ofstream(ids) << "798 50257";  // one past the vocabulary
  r = shrike("tokenize -m " + vocab + " --text-file " + ids + " --detokenize");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'50257' is not a token id"), std::string::npos) << r.err;
  std::filesystem::remove(text);
  std::filesystem::remove(ids);
}

TEST(Cli, SynthRejectsImpossibleShapes) {
  const Result r =
      shrike("synth --dim 100 --layers 1 --heads 3 --ffn 64 -o " + temp_file("x.gguf"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("multiple"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace shrike
