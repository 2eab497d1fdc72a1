// The training layer on the checkpoints people bring: tiny random-weight Hugging Face folders
// shaped like Qwen2.5 (q/k/v biases, NeoX rotary, tied embeddings, a 151,936-token byte-level
// BPE), Llama-3.2 (llama3 rope scaling, tied embeddings, a 128,256-token byte-level BPE) and
// Mistral (32,000-token SentencePiece). For each: the training forward equals the inference
// forward of the same folder, and pruning nothing (heads, FFN, layers, width) written to GGUF
// and loaded back is the same model (top-1 agreement 1, KL ~ 0) with its architecture, rope
// scaling and chat template intact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "hf_test_util.h"
#include "kv/contiguous_kv.h"
#include "model/model.h"
#include "model/synth.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint.h"
#include "train/prune.h"
#include "train/transformer.h"

namespace shrike::train {
namespace {

::testing::Environment* const cleanup =
    ::testing::AddGlobalTestEnvironment(new hftest::ScratchCleanup);

const char* kPage =
    "the customer asked where the order went and the agent said it left the store on monday. "
    "she wanted a refund for the blue shoes because they were too small, and asked to talk to "
    "a human about the delivery date, the address and the card she used to pay. the agent "
    "checked the tracking number and promised a call back before friday afternoon.";

struct Shape {
  std::string name, model_type, vocab_type;
  int64_t vocab;
  bool tied;
  hftest::json extra_config = hftest::json::object();
};

Shape qwen2() {
  return {"qwen2", "qwen2", "qwen2", 151936, true};
}
Shape llama3() {
  Shape s{"llama3", "llama", "llama-bpe", 128256, true};
  s.extra_config = {{"rope_theta", 500000.0},
                    {"rope_scaling",
                     {{"rope_type", "llama3"},
                      {"factor", 32.0},
                      {"low_freq_factor", 1.0},
                      {"high_freq_factor", 4.0},
                      {"original_max_position_embeddings", 64}}}};
  return s;
}
Shape mistral() {
  return {"mistral", "mistral", "spm", 32000, false};
}

const std::string kTemplate = "{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}";

// A Hugging Face folder of the shape: GQA, three layers, biases of visible size.
std::string hf_folder(const Shape& s) {
  const std::string root = hftest::scratch("arch_" + s.name);
  model::SynthOptions o;
  o.dim = 64, o.n_layers = 3, o.n_heads = 4, o.n_kv_heads = 2, o.ffn_dim = 96;
  o.vocab = s.vocab, o.vocab_type = s.vocab_type, o.tied_output = s.tied;
  o.context_length = 256, o.type = DType::F32, o.seed = 5;
  model::write_synth_model(o, root + "/synth.gguf");
  hftest::HfOptions h;
  h.model_type = s.model_type;
  h.bias = 0.5f;  // qwen2 only
  h.extra_config = s.extra_config;
  h.chat_template = kTemplate;
  const std::string dir = root + "/hf";
  std::filesystem::create_directories(dir);
  hftest::write_hf_from_gguf(root + "/synth.gguf", dir, h);
  return dir;
}

std::vector<int32_t> page_tokens(const tokenizer::Vocab& v) {
  const tokenizer::Tokenizer tok(v);
  return tok.encode(kPage, true);
}

// The inference model's logits at every position of tokens.
std::vector<float> inference_logits(const model::Model& m, const std::vector<int32_t>& tokens) {
  ThreadPool pool(2);
  const auto& c = m.config();
  const int64_t n = int64_t(tokens.size());
  kv::ContiguousKvCache kv(c.n_layers, n, c.n_kv_heads, c.head_dim);
  std::vector<float> out(size_t(n * c.vocab_size));
  m.forward(tokens.data(), n, 0, kv, n, out.data(), pool);
  return out;
}

// The training forward's logits at every position (every row carries a target).
std::vector<float> training_logits(Transformer<float>& m, const std::vector<int32_t>& tokens) {
  ThreadPool pool(2);
  TokenBatch b;
  std::vector<int32_t> targets(tokens.begin() + 1, tokens.end());
  targets.push_back(0);
  b.add(tokens, targets);
  return m.forward(b, pool);
}

struct Agreement {
  double top1 = 0, mean_kl = 0;
};

Agreement agreement(const std::vector<float>& p_logits, const std::vector<float>& q_logits,
                    int64_t vocab) {
  const int64_t rows = int64_t(p_logits.size()) / vocab;
  Agreement a;
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = p_logits.data() + r * vocab;
    const float* q = q_logits.data() + r * vocab;
    a.top1 += std::max_element(p, p + vocab) - p == std::max_element(q, q + vocab) - q;
    const double mp = *std::max_element(p, p + vocab), mq = *std::max_element(q, q + vocab);
    double zp = 0, zq = 0;
    for (int64_t i = 0; i < vocab; ++i) zp += std::exp(p[i] - mp), zq += std::exp(q[i] - mq);
    double kl = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      const double lp = p[i] - mp - std::log(zp), lq = q[i] - mq - std::log(zq);
      kl += std::exp(lp) * (lp - lq);
    }
    a.mean_kl += kl;
  }
  a.top1 /= double(rows), a.mean_kl /= double(rows);
  return a;
}

class RealArch : public ::testing::TestWithParam<Shape> {};

TEST_P(RealArch, TrainingForwardIsTheInferenceForwardAndPruningNothingIsExact) {
  const Shape s = GetParam();
  const std::string dir = hf_folder(s);
  const auto served = model::load_model(dir);
  TrainableFile f = load_trainable(dir);
  const model::ModelConfig& c = f.model->config();
  ASSERT_EQ(c.vocab_size, s.vocab);
  EXPECT_EQ(c.tied_output, s.tied);
  EXPECT_EQ(c.qkv_bias, s.model_type == "qwen2");
  EXPECT_EQ(c.rope_layout == kernels::RopeLayout::NeoX, s.model_type == "qwen2");
  EXPECT_EQ(!c.rope_freq_factors.empty(), s.name == "llama3");
  EXPECT_EQ(f.chat_template, kTemplate);
  EXPECT_FALSE(f.model->has_grads()) << "a model that only runs forward holds no gradients";

  const std::vector<int32_t> tokens = page_tokens(f.vocab);
  ASSERT_GT(tokens.size(), 40u);
  const std::vector<float> ref = inference_logits(*served, tokens);
  const std::vector<float> trained = training_logits(*f.model, tokens);
  ASSERT_EQ(ref.size(), trained.size());
  float worst = 0, largest = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    worst = std::max(worst, std::fabs(ref[i] - trained[i]));
    largest = std::max(largest, std::fabs(ref[i]));
  }
  EXPECT_LT(worst, 1e-4f) << s.name << ": training and inference forward differ (largest logit "
                          << largest << ")";
  EXPECT_GT(largest, 0.05f) << "logits too small for the comparison to mean anything";

  // Pruning nothing, by every kind of unit, through a GGUF and back.
  const Importance imp = [&] {
    ThreadPool pool(2);
    TokenBatch b;
    b.add(tokens, std::vector<int32_t>(tokens.size(), -1));
    return measure_importance(*f.model, {b}, pool);
  }();
  const auto pruned = prune_model(*f.model, imp, PruneOptions{});
  const std::string out = hftest::scratch("arch_" + s.name + "_pruned") + "/pruned.gguf";
  save_model(*pruned, f.vocab, "pruned", out, nullptr, nullptr, f.chat_template);
  const auto reloaded = model::load_model(out);
  const Agreement a = agreement(ref, inference_logits(*reloaded, tokens), s.vocab);
  EXPECT_EQ(a.top1, 1.0) << s.name;
  EXPECT_LT(a.mean_kl, 1e-6) << s.name;
  std::printf(
      "%s: %zu tokens, max |training - inference logit| %.3g (largest logit %.3g); "
      "pruned nothing, through GGUF: top-1 agreement %.4f, mean KL %.3g\n",
      s.name.c_str(), tokens.size(), double(worst), double(largest), a.top1, a.mean_kl);

  const auto g = gguf::GgufFile::open(out);
  EXPECT_EQ(g.get_string("general.architecture"), s.model_type == "qwen2" ? "qwen2" : "llama");
  EXPECT_EQ(g.get_string_or("tokenizer.chat_template", ""), kTemplate);
  EXPECT_EQ(g.find_tensor("rope_freqs.weight") != nullptr, s.name == "llama3");
  EXPECT_EQ(g.find_tensor("blk.0.attn_q.bias") != nullptr, s.model_type == "qwen2");
  // What the file says is what was loaded: the trainable reading agrees too.
  TrainableFile back = load_trainable(out);
  EXPECT_EQ(back.model->config().rope_freq_factors, c.rope_freq_factors);
  EXPECT_EQ(back.chat_template, kTemplate);
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, RealArch, ::testing::Values(qwen2(), llama3(), mistral()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace shrike::train
