// The whole trainable model: finite-difference gradient check of a 2-layer model (every
// parameter), agreement with the inference engine's forward pass, checkpoints, AdamW.
#include "train/transformer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "kv/contiguous_kv.h"
#include "model/model.h"
#include "train/checkpoint.h"
#include "train/inference_model.h"
#include "train/optimizer.h"

namespace shrike::train {
namespace {

model::ModelConfig tiny_config(bool tied) {
  model::ModelConfig c;
  c.dim = 8;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;  // GQA
  c.head_dim = 2;    // n_heads * head_dim = dim, as after no pruning
  c.rope_dims = 2;
  c.ffn_dim = 12;
  c.vocab_size = 11;
  c.context_length = 16;
  c.tied_output = tied;
  return c;
}

TokenBatch tiny_batch() {
  TokenBatch b;
  b.add({1, 5, 7, 3, 9}, {-1, -1, 3, 9, 2});
  b.add({1, 4, 10}, {-1, 10, 2});
  b.add({2, 6}, {6, -1});
  return b;
}

double loss_of(Transformer<double>& m, const TokenBatch& b, ThreadPool& pool,
               std::vector<double>* d_logits) {
  const std::vector<double>& logits = m.forward(b, pool);
  std::vector<double> d(logits.size());
  const int64_t M = m.n_target_rows();
  const double loss = cross_entropy(d.data(), logits.data(), m.target_ids().data(), M,
                                    m.config().vocab_size, 1.0 / double(M), pool);
  if (d_logits) *d_logits = d;
  return loss / double(M);
}

// Biases start at zero; give them values so that they change what they feed.
template <class T>
void fill_biases(Transformer<T>& m) {
  for (const ParamTensor& t : m.layout())
    if (t.is_bias())
      for (int64_t i = 0; i < t.size(); ++i)
        m.params()[size_t(t.offset + i)] = T(std::sin(i + 1.0));
}

class WholeModelGradient : public ::testing::TestWithParam<bool> {};

// Every parameter of a 2-layer GQA model, in double: central differences with eps = 1e-5 have a
// truncation error of O(eps^2 * f''') ~ 1e-10 and a rounding error of ~1e-16 / 1e-5 = 1e-11, so
// analytic and numeric gradients must agree to ~1e-8 of the gradient's scale; 1e-6 leaves a
// margin while any wrong term (a missing residual, a transposed product) is off by > 1e-3.
// dropout > 0: every forward draws the same masks (set_dropout resets its draw), so the loss is
// a fixed function of the parameters whose gradient backward must give.
void expect_gradients_match_finite_differences(const model::ModelConfig& c,
                                               double weight_scale = 20.0, float dropout = 0) {
  ThreadPool pool(2);
  Transformer<double> m(c);
  m.init_random(7);
  // Larger weights than the 0.02 initialisation so every path carries a visible gradient.
  for (double& p : m.params()) p *= weight_scale;
  fill_biases(m);
  const TokenBatch b = tiny_batch();
  auto loss = [&](std::vector<double>* d) {
    m.set_dropout(dropout, 42);
    return loss_of(m, b, pool, d);
  };
  std::vector<double> d_logits;
  loss(&d_logits);
  m.zero_grads();
  m.backward(d_logits.data(), pool);
  const std::vector<double> analytic = m.grads();
  double scale = 0;
  for (double g : analytic) scale = std::max(scale, std::abs(g));
  ASSERT_GT(scale, 1e-3);
  const double eps = 1e-5;
  double worst = 0;
  std::string worst_name;
  for (const ParamTensor& t : m.layout()) {
    for (int64_t i = 0; i < t.size(); ++i) {
      double& p = m.params()[size_t(t.offset + i)];
      const double saved = p;
      p = saved + eps;
      const double up = loss(nullptr);
      p = saved - eps;
      const double down = loss(nullptr);
      p = saved;
      const double numeric = (up - down) / (2 * eps);
      const double err = std::abs(numeric - analytic[size_t(t.offset + i)]) / std::max(1.0, scale);
      if (err > worst) worst = err, worst_name = t.name;
    }
  }
  EXPECT_LT(worst, 1e-6) << "worst parameter: " << worst_name;
}

TEST_P(WholeModelGradient, MatchesFiniteDifferences) {
  expect_gradients_match_finite_differences(tiny_config(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Tied, WholeModelGradient, ::testing::Values(false, true));

// Residual dropout: backward goes through the masks forward drew, a mask changes the loss, and a
// forward-only model or dropout 0 ignores it.
TEST(WholeModelGradientWithDropout, MatchesFiniteDifferences) {
  expect_gradients_match_finite_differences(tiny_config(false), 20.0, 0.25f);
}

TEST(Transformer, DropoutDrawsFreshMasksAndIsOffWhenForwardOnly) {
  ThreadPool pool(1);
  Transformer<double> m(tiny_config(false));
  m.init_random(3);
  for (double& p : m.params()) p *= 20.0;
  const TokenBatch b = tiny_batch();
  const double plain = loss_of(m, b, pool, nullptr);
  m.set_dropout(0.25f, 9);
  const double first = loss_of(m, b, pool, nullptr), second = loss_of(m, b, pool, nullptr);
  EXPECT_NE(first, plain);
  EXPECT_NE(first, second);  // each forward its own masks
  // About a quarter of each branch's outputs are dropped.
  const auto& keep = m.layer_activations(0).keep_attn;
  ASSERT_EQ(keep.size(), b.tokens.size() * size_t(m.config().dim));
  int64_t dropped = 0;
  for (uint8_t k : keep) dropped += k == 0;
  EXPECT_GT(dropped, 8);
  EXPECT_LT(dropped, 32);
  m.set_forward_only(true);
  EXPECT_DOUBLE_EQ(loss_of(m, b, pool, nullptr), plain);
  m.set_forward_only(false);
  m.set_dropout(0, 0);
  EXPECT_DOUBLE_EQ(loss_of(m, b, pool, nullptr), plain);
  EXPECT_THROW(m.set_dropout(1.0f, 0), std::invalid_argument);
}

// Frozen embeddings: no gradient storage for them, the same gradients for everything else, and
// an optimizer step leaves them as they were.
TEST(Transformer, FrozenEmbeddingsKeepTheirValuesAndTheRestTrainsAlike) {
  for (const bool tied : {false, true}) {
    ThreadPool pool(2);
    Transformer<double> m(tiny_config(tied));
    m.init_random(5);
    for (double& p : m.params()) p *= 10.0;
    const TokenBatch b = tiny_batch();
    std::vector<double> d_logits;
    loss_of(m, b, pool, &d_logits);
    m.zero_grads();
    m.backward(d_logits.data(), pool);
    const std::vector<double> all = m.grads();

    m.freeze_embeddings(true);
    loss_of(m, b, pool, &d_logits);
    m.zero_grads();
    m.backward(d_logits.data(), pool);
    const int64_t embd = m.layout().front().size();
    EXPECT_EQ(m.grad_begin(), embd);
    EXPECT_EQ(m.grad_end(), param_count(m.layout()) - (tied ? 0 : embd));
    ASSERT_EQ(int64_t(m.grads().size()), m.grad_end() - m.grad_begin());
    for (int64_t i = m.grad_begin(); i < m.grad_end(); ++i)
      ASSERT_NEAR(m.grads()[size_t(i - m.grad_begin())], all[size_t(i)], 1e-12) << i;

    Transformer<float> f(tiny_config(tied));
    f.init_random(5);
    f.freeze_embeddings(true);
    const std::vector<float> before = f.params();
    f.forward(b, pool);
    std::vector<float> d(f.forward(b, pool).size(), 0.5f);
    f.zero_grads();
    f.backward(d.data(), pool);
    OptimizerState state;
    adamw_step(f.params(), f.grads(), f.layout(), state, 1e-2, AdamWParams{}, pool, f.grad_begin());
    EXPECT_EQ(state.m.size(), f.grads().size());
    for (int64_t i = 0; i < embd; ++i) ASSERT_EQ(f.params()[size_t(i)], before[size_t(i)]);
    EXPECT_NE(f.params()[size_t(embd)], before[size_t(embd)]);  // the first block's norm trains
  }
}

// The output layer and loss a few rows at a time give backward()'s gradients and loss, and a
// forward-only model computes the same logits as one that keeps its activations.
TEST(Transformer, ChunkedHeadEqualsWholeBackwardAndForwardOnlyEqualsForward) {
  ThreadPool pool(2);
  Transformer<double> m(tiny_config(true));
  m.init_random(5);
  for (double& p : m.params()) p *= 10.0;
  const TokenBatch b = tiny_batch();
  std::vector<double> d_logits;
  const double whole = loss_of(m, b, pool, &d_logits);
  m.zero_grads();
  m.backward(d_logits.data(), pool);
  const std::vector<double> expected = m.grads();
  const std::vector<double> logits = m.forward(b, pool);

  m.zero_grads();
  m.forward_hidden(b, pool);
  const int64_t M = m.n_target_rows(), V = m.config().vocab_size;
  ASSERT_GT(M, 3);
  const double chunked = m.backward_chunked(
      [&](int64_t r0, int64_t r1, const double* l, double* d) {
        return cross_entropy(d, l, m.target_ids().data() + r0, r1 - r0, V, 1.0 / double(M), pool);
      },
      pool, 2);
  EXPECT_NEAR(chunked / double(M), whole, 1e-12);
  for (size_t i = 0; i < expected.size(); ++i) ASSERT_NEAR(m.grads()[i], expected[i], 1e-12) << i;

  m.set_forward_only(true);
  EXPECT_EQ(m.forward(b, pool), logits);
  EXPECT_THROW(m.backward(d_logits.data(), pool), std::logic_error);
}

// Qwen2's shape: q/k/v biases, the NeoX rotary layout (two pairs per head, so the layout matters)
// and tied embeddings.
TEST(WholeModelGradientQwen2, MatchesFiniteDifferences) {
  model::ModelConfig c = tiny_config(true);
  c.architecture = "qwen2";
  c.head_dim = c.rope_dims = 4;
  c.qkv_bias = true;
  c.rope_layout = kernels::RopeLayout::NeoX;
  // Twice the heads' width raises the logits' curvature; a smaller scale keeps the central
  // differences' truncation error as small as in the tests above.
  expect_gradients_match_finite_differences(c, 4.0);
}

// Llama-3 style frequency factors (model/rope.h) divide each pair's frequency: two pairs per head
// so that a factor's slot shows, the second pair's frequency slowed 8x as Llama 3.1's low bands.
TEST(WholeModelGradientWithRopeFactors, MatchesFiniteDifferences) {
  model::ModelConfig c = tiny_config(false);
  c.n_heads = 2, c.n_kv_heads = 1, c.head_dim = 4, c.rope_dims = 4;
  c.rope_theta = 4.0f;  // a small base so the second pair turns visibly over 5 positions
  c.rope_freq_factors = {1.0f, 8.0f};
  expect_gradients_match_finite_differences(c);
}

void expect_forward_equals_the_inference_model(const model::ModelConfig& c) {
  ThreadPool pool(2);
  Transformer<float> t(c);
  t.init_random(3);
  for (float& p : t.params()) p *= 10.0f;
  fill_biases(t);
  const std::vector<int32_t> seq = {1, 17, 33, 4, 49, 8, 8, 21};
  TokenBatch b;
  b.add(seq, std::vector<int32_t>(seq.size(), 0));  // every row gets logits
  const std::vector<float> train_logits = t.forward(b, pool);

  const auto m = to_inference_model(t);
  kv::ContiguousKvCache kv(c.n_layers, c.context_length, c.n_kv_heads, c.head_dim);
  std::vector<float> logits(seq.size() * size_t(c.vocab_size));
  m->forward(seq.data(), int64_t(seq.size()), 0, kv, int64_t(seq.size()), logits.data(), pool);
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    max_diff = std::max(max_diff, double(std::abs(logits[i] - train_logits[i])));
    max_abs = std::max(max_abs, double(std::abs(logits[i])));
  }
  ASSERT_GT(max_abs, 0.1);
  EXPECT_LT(max_diff, 1e-4 * std::max(1.0, max_abs));
}

model::ModelConfig forward_config() {
  model::ModelConfig c = tiny_config(false);
  c.dim = 64, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 8, c.rope_dims = 8, c.ffn_dim = 96;
  c.vocab_size = 50;
  return c;
}

TEST(Transformer, ForwardEqualsTheInferenceModel) {
  expect_forward_equals_the_inference_model(forward_config());
}

TEST(Transformer, ForwardEqualsTheInferenceModelWithRopeFactors) {
  model::ModelConfig c = forward_config();
  c.rope_freq_factors = model::llama3_rope_factors(c.rope_dims, c.rope_theta, 8, 1, 4, 4);
  expect_forward_equals_the_inference_model(c);
}

TEST(Transformer, LayoutNamesAndCounts) {
  const auto layout = param_layout(tiny_config(false));
  EXPECT_EQ(layout.front().name, "token_embd.weight");
  EXPECT_EQ(layout.back().name, "output.weight");
  EXPECT_EQ(layout.size(), size_t(1 + 2 * 9 + 2));
  // 88 embedding + 2 x (8 + 8*8 + 2*4*8 + 8*8 + 8 + 3*12*8) + 8 + 88
  EXPECT_EQ(param_count(layout), 88 + 2 * (8 + 64 + 64 + 64 + 8 + 288) + 8 + 88);
  EXPECT_EQ(param_layout(tiny_config(true)).size(), size_t(1 + 2 * 9 + 1));
  // Qwen2's q/k/v biases: three vectors per block, after the attention output.
  model::ModelConfig biased = tiny_config(false);
  biased.qkv_bias = true;
  const auto with_bias = param_layout(biased);
  EXPECT_EQ(with_bias.size(), size_t(1 + 2 * 12 + 2));
  EXPECT_EQ(with_bias[6].name, "blk.0.attn_q.bias");
  EXPECT_EQ(with_bias[8].name, "blk.0.attn_v.bias");
  EXPECT_TRUE(with_bias[6].is_bias() && with_bias[6].is_norm());
  EXPECT_EQ(param_count(with_bias), param_count(layout) + 2 * (8 + 2 * 4));
  model::ModelConfig bad = tiny_config(false);
  bad.n_kv_heads = 3;  // does not divide the query heads
  EXPECT_THROW(param_layout(bad), std::invalid_argument);
}

TEST(Transformer, ForwardEqualsTheInferenceModelWithBiasesNeoxAndPartialRotary) {
  model::ModelConfig c = forward_config();
  c.architecture = "qwen2";
  c.qkv_bias = true;
  c.rope_layout = kernels::RopeLayout::NeoX;
  c.rope_dims = c.head_dim / 2;
  expect_forward_equals_the_inference_model(c);
}

TEST(Optimizer, AdamWMovesAgainstTheGradientAndDecaysOnlyMatrices) {
  ThreadPool pool(1);
  std::vector<ParamTensor> layout = {{"m", 0, 2, 2}, {"norm", 4, 1, 2}};
  std::vector<float> p = {1, -1, 0.5f, 0, 1, 1};
  std::vector<float> g = {0.1f, -0.2f, 0, 0, 0.3f, 0};
  OptimizerState s;
  AdamWParams hp;
  hp.weight_decay = 0.5;
  adamw_step(p, g, layout, s, 0.01, hp, pool);
  EXPECT_EQ(s.step, 1);
  // First step of Adam: update = sign(g) * lr (bias-corrected m / sqrt(v) = g / |g|).
  EXPECT_NEAR(p[0], 1 - 0.01 - 0.01 * 0.5 * 1, 1e-6);
  EXPECT_NEAR(p[1], -1 + 0.01 + 0.01 * 0.5 * 1, 1e-6);
  EXPECT_NEAR(p[2], 0.5 - 0.01 * 0.5 * 0.5, 1e-6);  // zero gradient: decay only
  EXPECT_NEAR(p[4], 1 - 0.01, 1e-6);                // norm: no decay
  EXPECT_FLOAT_EQ(p[5], 1);
  std::vector<float> big = {3, 4};
  EXPECT_DOUBLE_EQ(clip_grad_norm(big, 1.0), 5.0);
  EXPECT_NEAR(big[0], 0.6, 1e-6);
  EXPECT_NEAR(learning_rate(0, 100, 10, 1.0, 0.1), 0.1, 1e-12);
  EXPECT_NEAR(learning_rate(10, 100, 10, 1.0, 0.1), 1.0, 1e-12);
  EXPECT_NEAR(learning_rate(100, 100, 10, 1.0, 0.1), 0.1, 1e-12);
}

TEST(Checkpoint, RoundTripsWeightsStateAndLoadsInTheEngine) {
  model::ModelConfig c = tiny_config(false);
  c.dim = 32, c.head_dim = 8, c.rope_dims = 8, c.ffn_dim = 64;
  c.n_heads = 2;  // n_heads * head_dim != dim: a head-pruned shape
  c.vocab_size = 262;
  Transformer<float> t(c);
  t.init_random(5);
  tokenizer::Vocab v;
  v.pieces = {"<unk>", "<s>", "</s>"};
  v.types = {tokenizer::TokenType::Unknown, tokenizer::TokenType::Control,
             tokenizer::TokenType::Control};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    v.pieces.push_back(buf);
    v.types.push_back(tokenizer::TokenType::Byte);
  }
  for (const char* p : {"\xE2\x96\x81", "a", "b"}) {
    v.pieces.push_back(p);
    v.types.push_back(tokenizer::TokenType::Normal);
  }
  v.scores.assign(v.pieces.size(), 0.0f);
  v.bos_id = 1, v.eos_id = 2, v.unk_id = 0;
  OptimizerState s;
  s.step = 42;
  s.m.assign(t.params().size(), 0.25f);
  s.v.assign(t.params().size(), 0.5f);
  const auto dir = std::filesystem::temp_directory_path();
  const std::string model_path = (dir / "shrike_ckpt_model.gguf").string();
  const std::string ckpt_path = (dir / "shrike_ckpt_state.gguf").string();
  save_model(t, v, "test", model_path);
  save_model(t, v, "test", ckpt_path, &s);
  const TrainableFile back = load_trainable(ckpt_path);
  EXPECT_EQ(back.model->params(), t.params());
  EXPECT_EQ(back.state.step, 42);
  EXPECT_EQ(back.state.m, s.m);
  EXPECT_EQ(back.vocab.pieces, v.pieces);
  EXPECT_EQ(load_trainable(model_path).state.step, 0);
  const auto engine_model = model::load_model(model_path);
  EXPECT_EQ(engine_model->config().n_heads, 2);
  EXPECT_EQ(engine_model->config().head_dim, 8);
  std::filesystem::remove(model_path);
  std::filesystem::remove(ckpt_path);
}

}  // namespace
}  // namespace shrike::train
