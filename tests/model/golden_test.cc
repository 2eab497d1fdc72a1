// The forward pass against llama2.c's own outputs on a real trained model (stories260K): every
// greedy token of all four prompts, and the logits, from both the .bin and the GGUF file, on every
// SIMD target this machine has, with 1 and 2 threads.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "decode/sampler.h"
#include "gguf/gguf.h"
#include "kernels/isa.h"
#include "kv/contiguous_kv.h"
#include "model/model.h"
#include "shared_data.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace shrike {
namespace {

constexpr const char* kDir = "reference/stories260K";
constexpr float kLogitTolerance = 1e-4f;  // fp32 with another summation order (golden.json hint)

nlohmann::json load_golden() {
  std::ifstream in(testing::shared_dir() + "/" + kDir + "/golden.json");
  return nlohmann::json::parse(in);
}

struct GreedyRun {
  std::vector<int32_t> generated;
  std::vector<std::vector<float>> step_logits;  // first 16 steps
  std::vector<float> prompt_final_logits;
};

// Greedy generation with run.c's conventions: forward passes until position `steps`, stopping if
// BOS is sampled.
GreedyRun generate_greedy(const model::Model& m, const std::vector<int32_t>& prompt, int64_t steps,
                          int threads) {
  const auto& c = m.config();
  ThreadPool pool(threads);
  kv::ContiguousKvCache kv(c.n_layers, steps, c.n_kv_heads, c.head_dim);
  std::vector<float> logits(size_t(c.vocab_size));
  m.forward(prompt.data(), int64_t(prompt.size()), 0, kv, 1, logits.data(), pool);
  GreedyRun r;
  r.prompt_final_logits = logits;
  for (int64_t pos = int64_t(prompt.size()); pos <= steps; ++pos) {
    if (r.step_logits.size() < 16) r.step_logits.push_back(logits);
    const int32_t next = decode::argmax(logits.data(), c.vocab_size);
    if (next == 1) break;
    r.generated.push_back(next);
    if (pos == steps) break;
    m.forward(&next, 1, pos, kv, 1, logits.data(), pool);
  }
  return r;
}

class GoldenTest : public ::testing::TestWithParam<std::tuple<std::string, kernels::Isa, int>> {};

TEST_P(GoldenTest, ReproducesLlama2cTokensAndLogits) {
  SHRIKE_REQUIRE_SHARED(std::string(kDir) + "/golden.json");
  const auto& [file, isa, threads] = GetParam();
  kernels::set_active_isa(isa);
  const std::string dir = testing::shared_dir() + "/" + kDir + "/";
  const auto m = model::load_model(dir + file);
  const auto vocab = file == "stories260K.bin"
                         ? tokenizer::load_llama2c_vocab(dir + "tok512.bin", 512)
                         : tokenizer::vocab_from_gguf(gguf::GgufFile::open(dir + file));
  const tokenizer::Tokenizer tok(vocab);
  const auto golden = load_golden();
  const int64_t steps = golden["steps"];
  for (const auto& cs : golden["cases"]) {
    SCOPED_TRACE("prompt \"" + cs["prompt"].get<std::string>() + "\"");
    const auto prompt = tok.encode(cs["prompt"].get<std::string>(), true);
    ASSERT_EQ(prompt, cs["prompt_token_ids"].get<std::vector<int32_t>>());
    const GreedyRun r = generate_greedy(*m, prompt, steps, threads);
    EXPECT_EQ(r.generated, cs["greedy_token_ids"].get<std::vector<int32_t>>());

    const auto final_logits = cs["prompt_final_position_logits"].get<std::vector<float>>();
    ASSERT_EQ(final_logits.size(), r.prompt_final_logits.size());
    for (size_t i = 0; i < final_logits.size(); ++i)
      ASSERT_NEAR(r.prompt_final_logits[i], final_logits[i], kLogitTolerance) << "token " << i;

    const auto& top5 = cs["top5_logits_per_step"];
    ASSERT_EQ(top5.size(), std::min<size_t>(16, r.step_logits.size()));
    for (size_t step = 0; step < top5.size(); ++step) {
      for (const auto& pair : top5[step]) {
        const int id = pair[0];
        const float logit = pair[1];
        ASSERT_NEAR(r.step_logits[step][size_t(id)], logit, kLogitTolerance)
            << "step " << step << " token " << id;
      }
    }
  }
}

std::vector<std::tuple<std::string, kernels::Isa, int>> golden_params() {
  std::vector<std::tuple<std::string, kernels::Isa, int>> out;
  for (const char* f : {"stories260K.bin", "stories260K.gguf"})
    for (kernels::Isa isa : kernels::supported_isas())
      for (int threads : {1, 2}) out.emplace_back(f, isa, threads);
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllFilesIsasThreads, GoldenTest, ::testing::ValuesIn(golden_params()),
                         [](const auto& info) {
                           std::string f = std::get<0>(info.param);
                           for (char& ch : f)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return f + "_" +
                                  std::string(kernels::isa_name(std::get<1>(info.param))) + "_" +
                                  std::to_string(std::get<2>(info.param)) + "threads";
                         });

}  // namespace
}  // namespace shrike
