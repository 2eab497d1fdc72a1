// Structured pruning: removing a unit equals zeroing what it writes into the residual stream,
// the ranking follows the measured importance, and the pruned model is a loadable GGUF.
#include "train/prune.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "model/model.h"
#include "train/checkpoint.h"
#include "train/transformer.h"

namespace shrike::train {
namespace {

model::ModelConfig config() {
  model::ModelConfig c;
  c.dim = 32, c.n_layers = 3, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 8, c.rope_dims = 8;
  c.ffn_dim = 48, c.vocab_size = 40, c.context_length = 32;
  return c;
}

TokenBatch batch() {
  TokenBatch b;
  b.add({1, 7, 9, 30, 2, 5}, {7, 9, 30, 2, 5, 3});
  b.add({1, 12, 39}, {12, 39, 2});
  return b;
}

std::vector<float> logits_of(Transformer<float>& m) {
  ThreadPool pool(2);
  const TokenBatch b = batch();
  return m.forward(b, pool);
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::abs(a[i] - b[i])));
  EXPECT_LT(worst, 1e-4);
}

std::unique_ptr<Transformer<float>> trained_like() {
  auto m = std::make_unique<Transformer<float>>(config());
  m->init_random(11);
  for (float& p : m->params()) p *= 10.0f;  // visible activations everywhere
  return m;
}

// Importance that forces which units go: the named ones score 0, everything else 1.
Importance forced(const model::ModelConfig& c, int64_t drop_group, std::vector<int64_t> drop_ffn,
                  int64_t drop_layer) {
  Importance imp;
  imp.kv_groups.assign(size_t(c.n_layers), std::vector<double>(size_t(c.n_kv_heads), 1.0));
  imp.ffn_channels.assign(size_t(c.n_layers), std::vector<double>(size_t(c.ffn_dim), 1.0));
  imp.layers.assign(size_t(c.n_layers), 1.0);
  imp.hidden.assign(size_t(c.dim), 1.0);
  for (auto& g : imp.kv_groups)
    if (drop_group >= 0) g[size_t(drop_group)] = 0;
  for (auto& f : imp.ffn_channels)
    for (int64_t j : drop_ffn) f[size_t(j)] = 0;
  if (drop_layer >= 0) imp.layers[size_t(drop_layer)] = 0;
  return imp;
}

TEST(Prune, NothingRemovedIsTheSameModel) {
  auto m = trained_like();
  const auto p = prune_model(*m, forced(m->config(), -1, {}, -1), PruneOptions{});
  EXPECT_EQ(p->params(), m->params());
}

TEST(Prune, RemovingAKvGroupEqualsSilencingItsHeads) {
  auto m = trained_like();
  const model::ModelConfig c = m->config();
  PruneOptions opt;
  opt.heads = 0.5;
  auto p = prune_model(*m, forced(c, 1, {}, -1), opt);
  EXPECT_EQ(p->config().n_kv_heads, 1);
  EXPECT_EQ(p->config().n_heads, 2);  // the group's two query heads went with it
  // Group 1 = query heads 2 and 3 = columns 16..31 of attn_output.
  for (int64_t l = 0; l < c.n_layers; ++l) {
    float* wo = m->param("blk." + std::to_string(l) + ".attn_output.weight");
    for (int64_t r = 0; r < c.dim; ++r)
      for (int64_t j = 16; j < 32; ++j) wo[r * c.q_dim() + j] = 0;
  }
  expect_close(logits_of(*p), logits_of(*m));
}

TEST(Prune, RemovingFfnChannelsAndALayerEqualsZeroingTheirOutputs) {
  auto m = trained_like();
  const model::ModelConfig c = m->config();
  PruneOptions opt;
  opt.ffn = 0.25;  // 12 of 48
  opt.layers = 1;
  std::vector<int64_t> drop;
  for (int64_t j = 0; j < 48; j += 4) drop.push_back(j);
  auto p = prune_model(*m, forced(c, -1, drop, 1), opt);
  EXPECT_EQ(p->config().ffn_dim, 36);
  EXPECT_EQ(p->config().n_layers, 2);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string pre = "blk." + std::to_string(l) + ".";
    float* wd = m->param(pre + "ffn_down.weight");
    for (int64_t r = 0; r < c.dim; ++r)
      for (int64_t j : drop) wd[r * c.ffn_dim + j] = 0;
    if (l == 1) {  // the removed layer: nothing reaches the stream
      std::fill_n(wd, c.dim * c.ffn_dim, 0.0f);
      std::fill_n(m->param(pre + "attn_output.weight"), c.dim * c.q_dim(), 0.0f);
    }
  }
  expect_close(logits_of(*p), logits_of(*m));
}

TEST(Prune, MeasuredImportanceRanksASilencedHeadGroupLast) {
  auto m = trained_like();
  const model::ModelConfig c = m->config();
  float* wo = m->param("blk.0.attn_output.weight");
  for (int64_t r = 0; r < c.dim; ++r)
    for (int64_t j = 0; j < 16; ++j) wo[r * c.q_dim() + j] *= 1e-3f;  // group 0 nearly silent
  ThreadPool pool(2);
  const Importance imp = measure_importance(*m, {batch()}, pool);
  EXPECT_EQ(imp.tokens, 9);
  EXPECT_LT(imp.kv_groups[0][0], imp.kv_groups[0][1]);
  EXPECT_EQ(top_indices(imp.kv_groups[0], 1), std::vector<int64_t>{1});
  for (double v : imp.layers) EXPECT_GT(v, 0.0);
}

TEST(Prune, HiddenPruningGivesAStandardLoadableGguf) {
  auto m = trained_like();
  ThreadPool pool(2);
  PruneOptions opt;
  opt.hidden = 0.25, opt.heads = 0.5, opt.ffn = 0.5;
  const auto p = prune_model(*m, measure_importance(*m, {batch()}, pool), opt);
  EXPECT_EQ(p->config().dim, 24);
  EXPECT_LT(body_param_count(p->config()), body_param_count(m->config()) / 2);
  tokenizer::Vocab v;
  for (int i = 0; i < 40; ++i) {
    v.pieces.push_back("t" + std::to_string(i));
    v.types.push_back(tokenizer::TokenType::Normal);
  }
  v.scores.assign(40, 0.0f);
  const std::string path = (std::filesystem::temp_directory_path() / "shrike_pruned.gguf").string();
  save_model(*p, v, "pruned", path);
  const auto loaded = model::load_model(path);
  EXPECT_EQ(loaded->config().dim, 24);
  EXPECT_EQ(loaded->config().n_heads, 2);
  std::filesystem::remove(path);
  EXPECT_THROW(prune_model(*m, measure_importance(*m, {batch()}, pool), PruneOptions{1.0, 0, 0, 0}),
               std::invalid_argument);
}

}  // namespace
}  // namespace shrike::train
