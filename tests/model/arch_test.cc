// Architecture variants checked against each other: a Qwen2 model (NeoX RoPE, Q/K/V biases)
// whose Q/K rows are the NeoX-ordered permutation of a Llama model's (adjacent-pair RoPE) must
// give the same logits, since q·k is invariant under a permutation applied to both and the
// permutation maps each adjacent pair (2i, 2i+1) onto the NeoX pair (i, i + d/2). This is the
// relation Hugging Face -> GGUF conversion relies on.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "gguf/gguf.h"
#include "kv/contiguous_kv.h"
#include "model/model.h"

namespace shrike {
namespace {

constexpr int64_t kDim = 64, kHeads = 4, kKvHeads = 2, kHeadDim = 16, kFfn = 96, kVocab = 50;

std::vector<float> random_vector(std::mt19937& rng, int64_t n, float scale) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(rng);
  return v;
}

// Reorders each head's rows from adjacent-pair order to NeoX order.
std::vector<float> to_neox_rows(const std::vector<float>& rows, int64_t n_heads, int64_t row_len) {
  std::vector<float> out(rows.size());
  const int64_t half = kHeadDim / 2;
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t c = 0; c < row_len; ++c) {
        const auto src = [&](int64_t r) { return rows[size_t((h * kHeadDim + r) * row_len + c)]; };
        out[size_t((h * kHeadDim + i) * row_len + c)] = src(2 * i);
        out[size_t((h * kHeadDim + half + i) * row_len + c)] = src(2 * i + 1);
      }
  return out;
}

std::string write_model(const std::string& arch, bool neox_rows) {
  std::mt19937 rng(11);  // same weights for both files
  gguf::GgufWriter w;
  w.set_string("general.architecture", arch);
  w.set_uint32(arch + ".embedding_length", kDim);
  w.set_uint32(arch + ".block_count", 2);
  w.set_uint32(arch + ".feed_forward_length", kFfn);
  w.set_uint32(arch + ".attention.head_count", kHeads);
  w.set_uint32(arch + ".attention.head_count_kv", kKvHeads);
  w.set_uint32(arch + ".context_length", 64);
  w.set_float32(arch + ".rope.freq_base", 1000.0f);
  auto add = [&](const std::string& name, std::vector<int64_t> dims, std::vector<float> data) {
    w.add_tensor(name, DType::F32, dims, data.data(), data.size() * 4);
  };
  auto matrix = [&](int64_t rows, int64_t cols) { return random_vector(rng, rows * cols, 0.3f); };
  add("token_embd.weight", {kDim, kVocab}, matrix(kVocab, kDim));
  for (int l = 0; l < 2; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    auto q = matrix(kHeads * kHeadDim, kDim), k = matrix(kKvHeads * kHeadDim, kDim);
    auto bq = random_vector(rng, kHeads * kHeadDim, 0.5f),
         bk = random_vector(rng, kKvHeads * kHeadDim, 0.5f);
    if (neox_rows) {
      q = to_neox_rows(q, kHeads, kDim);
      k = to_neox_rows(k, kKvHeads, kDim);
      bq = to_neox_rows(bq, kHeads, 1);
      bk = to_neox_rows(bk, kKvHeads, 1);
    }
    add(p + "attn_norm.weight", {kDim}, random_vector(rng, kDim, 1.0f));
    add(p + "attn_q.weight", {kDim, kHeads * kHeadDim}, q);
    add(p + "attn_k.weight", {kDim, kKvHeads * kHeadDim}, k);
    add(p + "attn_v.weight", {kDim, kKvHeads * kHeadDim}, matrix(kKvHeads * kHeadDim, kDim));
    add(p + "attn_q.bias", {kHeads * kHeadDim}, bq);
    add(p + "attn_k.bias", {kKvHeads * kHeadDim}, bk);
    add(p + "attn_v.bias", {kKvHeads * kHeadDim}, random_vector(rng, kKvHeads * kHeadDim, 0.5f));
    add(p + "attn_output.weight", {kHeads * kHeadDim, kDim}, matrix(kDim, kHeads * kHeadDim));
    add(p + "ffn_norm.weight", {kDim}, random_vector(rng, kDim, 1.0f));
    add(p + "ffn_gate.weight", {kDim, kFfn}, matrix(kFfn, kDim));
    add(p + "ffn_up.weight", {kDim, kFfn}, matrix(kFfn, kDim));
    add(p + "ffn_down.weight", {kFfn, kDim}, matrix(kDim, kFfn));
  }
  add("output_norm.weight", {kDim}, random_vector(rng, kDim, 1.0f));
  add("output.weight", {kDim, kVocab}, matrix(kVocab, kDim));
  const auto path = std::filesystem::temp_directory_path() /
                    ("shrike_arch_test_" + std::to_string(getpid()) + "_" + arch + ".gguf");
  w.write(path.string());
  return path.string();
}

std::vector<float> all_logits(const model::Model& m, const std::vector<int32_t>& tokens) {
  const auto& c = m.config();
  ThreadPool pool(1);
  kv::ContiguousKvCache kv(c.n_layers, int64_t(tokens.size()), c.n_kv_heads, c.head_dim);
  std::vector<float> logits(tokens.size() * size_t(c.vocab_size));
  m.forward(tokens.data(), int64_t(tokens.size()), 0, kv, int64_t(tokens.size()), logits.data(),
            pool);
  return logits;
}

TEST(Architectures, Qwen2WithNeoxRopeAndBiasesEqualsPermutedLlama) {
  const std::string llama_path = write_model("llama", false),
                    qwen_path = write_model("qwen2", true);
  const auto llama = model::load_model(llama_path);
  const auto qwen = model::load_model(qwen_path);
  EXPECT_TRUE(qwen->config().qkv_bias);
  EXPECT_EQ(qwen->config().rope_layout, kernels::RopeLayout::NeoX);
  EXPECT_EQ(llama->config().rope_layout, kernels::RopeLayout::Adjacent);
  const std::vector<int32_t> tokens = {1, 5, 9, 33, 2, 49, 17, 17, 0, 8, 21, 30};
  const auto a = all_logits(*llama, tokens), b = all_logits(*qwen, tokens);
  ASSERT_EQ(a.size(), b.size());
  float max_abs = 0;
  for (float x : a) max_abs = std::max(max_abs, std::fabs(x));
  ASSERT_GT(max_abs, 0.1f) << "logits should not be trivially zero";
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], 1e-4f * std::max(1.0f, max_abs)) << i;
  std::filesystem::remove(llama_path);
  std::filesystem::remove(qwen_path);
}

}  // namespace
}  // namespace shrike
