// Forward-pass properties on synthetic models of every weight type: thread-count independence,
// batched prefill equal to token-by-token decoding, and input validation.
#include "model/model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>

#include "decode/sampler.h"
#include "kv/contiguous_kv.h"
#include "model/synth.h"

namespace shrike {
namespace {

// Writes a small synthetic model and loads it (weights are copied at load, so the file goes).
std::unique_ptr<model::Model> synth_model(DType type, int64_t kv_heads = 2) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("shrike_model_test_" + std::to_string(getpid()) + "_" +
                     std::string(dtype_name(type)) + "_" + std::to_string(kv_heads) + ".gguf");
  model::SynthOptions o;
  o.dim = 128;
  o.n_layers = 2;
  o.n_heads = 4;
  o.n_kv_heads = kv_heads;
  o.ffn_dim = 320;
  o.vocab = 400;
  o.context_length = 256;
  o.type = type;
  o.seed = 3;
  model::write_synth_model(o, path.string());
  auto m = model::load_model(path.string());
  std::filesystem::remove(path);
  return m;
}

std::vector<int32_t> greedy(const model::Model& m, std::vector<int32_t> prompt, int n,
                            int threads) {
  ThreadPool pool(threads);
  const auto& c = m.config();
  kv::ContiguousKvCache kv(c.n_layers, int64_t(prompt.size()) + n, c.n_kv_heads, c.head_dim);
  std::vector<float> logits(size_t(c.vocab_size));
  m.forward(prompt.data(), int64_t(prompt.size()), 0, kv, 1, logits.data(), pool);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const int32_t next = decode::argmax(logits.data(), c.vocab_size);
    out.push_back(next);
    m.forward(&next, 1, int64_t(prompt.size()) + i, kv, 1, logits.data(), pool);
  }
  return out;
}

class SynthModelTest : public ::testing::TestWithParam<DType> {};

TEST_P(SynthModelTest, GreedyOutputIsTheSameWithOneAndTwoThreads) {
  const auto m = synth_model(GetParam());
  const std::vector<int32_t> prompt = {1, 300, 17, 42, 99, 260, 5};
  const auto one = greedy(*m, prompt, 40, 1);
  const auto two = greedy(*m, prompt, 40, 2);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one.size(), 40u);
}

// A const Model holds no per-call state: threads decoding different prompts at once, each with its
// own scratch and cache, get what each gets alone (with a shared scratch inside the model they
// would overwrite each other's activations).
TEST_P(SynthModelTest, ThreadsShareOneConstModel) {
  const auto m = synth_model(GetParam());
  const std::vector<std::vector<int32_t>> prompts = {{1, 7, 300, 201}, {42, 399, 3}, {5, 6}};
  std::vector<std::vector<int32_t>> alone, together(prompts.size());
  for (const auto& p : prompts) alone.push_back(greedy(*m, p, 24, 1));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i)
    threads.emplace_back([&, i] {
      model::ForwardScratch scratch;
      ThreadPool pool(1);
      const auto& c = m->config();
      std::vector<int32_t> p = prompts[i];
      kv::ContiguousKvCache kv(c.n_layers, int64_t(p.size()) + 24, c.n_kv_heads, c.head_dim);
      std::vector<float> logits(size_t(c.vocab_size));
      m->forward(p.data(), int64_t(p.size()), 0, kv, 1, logits.data(), pool, scratch);
      for (int t = 0; t < 24; ++t) {
        const int32_t next = decode::argmax(logits.data(), c.vocab_size);
        together[i].push_back(next);
        m->forward(&next, 1, int64_t(p.size()) + t, kv, 1, logits.data(), pool, scratch);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(together, alone);
}

// A ragged batch (a prefill chunk, decode tokens, a sequence at a later position) gives every
// sequence the same logits, bit for bit, as running it alone (batch-invariant kernels).
TEST_P(SynthModelTest, RaggedBatchEqualsEachSequenceAlone) {
  const bool float_type =
      GetParam() == DType::F32 || GetParam() == DType::F16 || GetParam() == DType::BF16;
  model::ForwardOptions opt;
  opt.matmul.batch_invariant = float_type;
  const auto m = synth_model(GetParam(), 2);
  const auto& c = m->config();
  ThreadPool pool(2);
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 7, 300, 201, 42, 399, 3, 260, 12},
      {5},
      {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 11, 12, 13, 14, 15, 16, 17}};
  // Alone: each prompt in one forward call, logits of every token.
  std::vector<std::vector<float>> alone;
  for (const auto& p : prompts) {
    kv::ContiguousKvCache kv(c.n_layers, 32, c.n_kv_heads, c.head_dim);
    std::vector<float> l(p.size() * size_t(c.vocab_size));
    m->forward(p.data(), int64_t(p.size()), 0, kv, int64_t(p.size()), l.data(), pool, opt);
    alone.push_back(l);
  }
  // Batched: the first 4 tokens of each as one batch, then the rest as a second batch.
  std::vector<std::unique_ptr<kv::ContiguousKvCache>> kvs;
  for (size_t i = 0; i < prompts.size(); ++i)
    kvs.push_back(
        std::make_unique<kv::ContiguousKvCache>(c.n_layers, 32, c.n_kv_heads, c.head_dim));
  for (int64_t start : {int64_t{0}, int64_t{4}}) {
    std::vector<model::BatchSequence> batch;
    std::vector<int64_t> offset;
    int64_t rows = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const int64_t n = start == 0 ? std::min<int64_t>(4, int64_t(prompts[i].size()))
                                   : std::max<int64_t>(0, int64_t(prompts[i].size()) - 4);
      batch.push_back({prompts[i].data() + start, n, start, kvs[i].get(), n});
      offset.push_back(rows);
      rows += n;
    }
    std::vector<float> l(size_t(rows * c.vocab_size));
    m->forward_batch(batch.data(), int64_t(batch.size()), l.data(), pool, opt);
    for (size_t i = 0; i < prompts.size(); ++i)
      for (int64_t t = 0; t < batch[i].n_tokens; ++t)
        ASSERT_EQ(0, std::memcmp(l.data() + (offset[i] + t) * c.vocab_size,
                                 alone[i].data() + (start + t) * c.vocab_size,
                                 size_t(c.vocab_size) * sizeof(float)))
            << "sequence " << i << " position " << start + t;
  }
}

TEST_P(SynthModelTest, BatchedPrefillMatchesTokenByToken) {
  const auto m = synth_model(GetParam(), 1);
  const auto& c = m->config();
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = {1, 7, 300, 201, 42, 399, 3, 260, 12, 11, 10};
  const int64_t n = int64_t(prompt.size());
  kv::ContiguousKvCache kv_batch(c.n_layers, n, c.n_kv_heads, c.head_dim),
      kv_step(c.n_layers, n, c.n_kv_heads, c.head_dim);
  std::vector<float> batch(size_t(n * c.vocab_size)), step(size_t(c.vocab_size));
  m->forward(prompt.data(), n, 0, kv_batch, n, batch.data(), pool);
  for (int64_t t = 0; t < n; ++t) {
    m->forward(&prompt[size_t(t)], 1, t, kv_step, 1, step.data(), pool);
    for (int64_t v = 0; v < c.vocab_size; ++v)
      // Quantised paths may round activations per call; the logits of random models are O(1).
      ASSERT_NEAR(batch[size_t(t * c.vocab_size + v)], step[size_t(v)], 2e-3f)
          << "position " << t << " token " << v;
  }
}

TEST_P(SynthModelTest, RejectsPositionsPastTheCacheAndBadTokenIds) {
  const auto m = synth_model(GetParam());
  const auto& c = m->config();
  ThreadPool pool(1);
  kv::ContiguousKvCache kv(c.n_layers, 4, c.n_kv_heads, c.head_dim);
  std::vector<float> logits(size_t(c.vocab_size));
  const int32_t ok = 5, bad = int32_t(c.vocab_size);
  EXPECT_THROW(m->forward(&ok, 1, 4, kv, 1, logits.data(), pool), std::out_of_range);
  EXPECT_THROW(m->forward(&bad, 1, 0, kv, 1, logits.data(), pool), std::out_of_range);
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, SynthModelTest,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0,
                                           DType::Q4_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(ModelConfig, Llama3RopeFactorsFollowTheReferenceBands) {
  // Llama-3.1 8B: theta 500000, factor 8, low 1, high 4, original context 8192, head dim 128.
  const auto f = model::llama3_rope_factors(128, 500000.0f, 8.0f, 1.0f, 4.0f, 8192);
  ASSERT_EQ(f.size(), 64u);
  EXPECT_FLOAT_EQ(f.front(), 1.0f);  // highest frequency: wavelength far below 8192/4
  EXPECT_FLOAT_EQ(f.back(), 8.0f);   // lowest frequency: wavelength above 8192
  for (size_t i = 1; i < f.size(); ++i) EXPECT_GE(f[i], f[i - 1]);  // monotone in between
}

// YaRN against transformers' formulation (_compute_yarn_parameters, in double): inverse
// frequencies blended between interpolation and extrapolation by a linear ramp over the
// correction range, cos and sin times 0.1 ln(factor) + 1. Qwen2.5's long-context settings.
TEST(ModelConfig, YarnTableFollowsTransformers) {
  model::ModelConfig c;
  c.rope_dims = 128;
  c.rope_theta = 1000000.0f;
  c.rope_yarn = true;
  c.rope_freq_scale = 0.25f;
  c.rope_original_context = 32768;
  const double factor = 4, base = 1e6, dim = 128, orig = 32768;
  auto corr = [&](double rot) {
    return dim * std::log(orig / (rot * 2 * M_PI)) / (2 * std::log(base));
  };
  const double low = std::max(0.0, std::floor(corr(32))),
               high = std::min(dim - 1, std::ceil(corr(1)));
  const double mscale = 0.1 * std::log(factor) + 1;
  std::vector<float> cs(128);
  for (int64_t pos : {0, 1, 17, 3000}) {
    c.rope_table(cs.data(), pos);
    for (int i = 0; i < 64; ++i) {
      const double extrap = 1.0 / std::pow(base, 2.0 * i / dim), interp = extrap / factor;
      const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      const double inv_freq = interp * ramp + extrap * (1 - ramp);
      const double angle = double(pos) * inv_freq;
      EXPECT_NEAR(cs[2 * i], std::cos(angle) * mscale, 3e-3) << pos << " " << i;
      EXPECT_NEAR(cs[2 * i + 1], std::sin(angle) * mscale, 3e-3) << pos << " " << i;
    }
  }
}

// LongRoPE as transformers' Phi-3: angle pos / (factor_i * base^(2i/d)), cos and sin times the
// attention factor; the short factors within the original context, the long ones past it.
TEST(ModelConfig, LongRopeUsesShortThenLongFactors) {
  model::ModelConfig c;
  c.rope_dims = 8;
  c.rope_theta = 10000.0f;
  c.rope_original_context = 4096;
  c.rope_freq_factors = {1.0f, 1.5f, 2.0f, 3.0f};
  c.rope_long_factors = {1.0f, 4.0f, 9.0f, 20.0f};
  c.rope_attn_factor = 1.19f;
  std::vector<float> cs(8);
  for (int64_t pos : {5, 4095, 4096, 9000}) {
    c.rope_table(cs.data(), pos);
    const auto& f = pos < 4096 ? c.rope_freq_factors : c.rope_long_factors;
    for (int i = 0; i < 4; ++i) {
      const double angle = double(pos) / (f[size_t(i)] * std::pow(10000.0, 2.0 * i / 8));
      EXPECT_NEAR(cs[2 * i], 1.19 * std::cos(angle), 3e-3) << pos << " " << i;
      EXPECT_NEAR(cs[2 * i + 1], 1.19 * std::sin(angle), 3e-3) << pos << " " << i;
    }
  }
}

}  // namespace
}  // namespace shrike
