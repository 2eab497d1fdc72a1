// KL-divergence evaluation against a reference model: exact zero against itself, growth with
// perturbation, a model whose logits are known in closed form (KL, P99, perplexities checked
// against sums written out here), batching and chunking that change nothing, the sequence
// builders, input errors, and stories260K's perplexity against llama2.c's own logits.
#include "quant/kl_eval.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/file_buffer.h"
#include "gguf/gguf.h"
#include "kv/contiguous_kv.h"
#include "model/model.h"
#include "shared_data.h"
#include "task/task_eval.h"
#include "task/task_training.h"
#include "tokenizer/vocab.h"
#include "train/inference_model.h"
#include "train/transformer.h"

namespace shrike::quant {
namespace {

model::ModelConfig small_config() {
  model::ModelConfig c;
  c.dim = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 8;
  c.rope_dims = 8;
  c.ffn_dim = 48;
  c.vocab_size = 40;
  c.context_length = 64;
  return c;
}

// A random model, scaled so that its distributions are far from uniform, plus `noise` times
// N(0, 1) on every parameter.
std::unique_ptr<model::Model> random_model(double noise, uint64_t noise_seed = 7) {
  train::Transformer<float> t(small_config());
  t.init_random(3);
  std::mt19937_64 rng(noise_seed);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  for (float& p : t.params()) p = 10.0f * p + float(noise) * n01(rng);
  return train::to_inference_model(t);
}

std::vector<ScoredSequence> random_sequences(int n, int len, int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> seqs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    for (int t = 0; t < len + i % 5; ++t) seqs[size_t(i)].push_back(int32_t(rng() % vocab));
  return all_positions(seqs);
}

TEST(KlEval, LogSoftmaxIsStableForHugeLogits) {
  const float x[3] = {1000.0f, 1000.0f, 0.0f};
  double lp[3];
  log_softmax(x, 3, lp);
  EXPECT_NEAR(lp[0], -std::log(2.0), 1e-12);
  EXPECT_NEAR(lp[1], -std::log(2.0), 1e-12);
  EXPECT_NEAR(lp[2], -1000.0 - std::log(2.0), 1e-9);
}

TEST(KlEval, ModelAgainstItselfIsExactlyZero) {
  ThreadPool pool(2);
  const auto m = random_model(0.0);
  const auto seqs = random_sequences(6, 20, 40, 1);
  const RefDistributions ref = reference_distributions(*m, seqs, pool);
  int64_t expected = 0;
  for (const auto& s : seqs) expected += int64_t(s.tokens.size()) - 1;
  ASSERT_EQ(ref.n_positions(), expected);
  const KlStats k = compare_to_reference(*m, ref, pool);
  EXPECT_EQ(k.n_positions, expected);
  EXPECT_EQ(k.mean_kl, 0.0);
  EXPECT_EQ(k.max_kl, 0.0);
  EXPECT_EQ(k.top1_agreement, 1.0);
  EXPECT_EQ(k.model_nll, k.ref_nll);
  EXPECT_GT(k.model_perplexity, 1.0);
  EXPECT_EQ(k.model_perplexity, k.ref_perplexity);
}

TEST(KlEval, KlGrowsWithPerturbation) {
  ThreadPool pool(2);
  const auto ref_model = random_model(0.0);
  const auto seqs = random_sequences(6, 20, 40, 2);
  const RefDistributions ref = reference_distributions(*ref_model, seqs, pool);
  const KlStats small = compare_to_reference(*random_model(0.01), ref, pool);
  const KlStats large = compare_to_reference(*random_model(0.1), ref, pool);
  EXPECT_GT(small.mean_kl, 0.0);
  EXPECT_GT(large.mean_kl, 5 * small.mean_kl);
  EXPECT_LE(small.mean_kl, small.p99_kl);
  EXPECT_LE(small.p99_kl, small.max_kl);
  EXPECT_GE(small.top1_agreement, large.top1_agreement);
  EXPECT_LT(large.top1_agreement, 1.0);
  EXPECT_EQ(small.ref_nll, large.ref_nll);  // the reference's figures do not depend on the model
}

// A model whose blocks are all zero: the residual stream is the token's embedding, so the logits
// at a position are output * rmsnorm(embedding[token]) and depend on that token alone.
struct ClosedForm {
  model::ModelConfig c;
  std::vector<double> emb, out;  // [vocab][dim]
  std::unique_ptr<model::Model> model;
  std::vector<double> logits(int32_t token) const {
    double ms = 0;
    for (int64_t j = 0; j < c.dim; ++j)
      ms += emb[size_t(token * c.dim + j)] * emb[size_t(token * c.dim + j)];
    const double inv = 1.0 / std::sqrt(ms / double(c.dim) + double(c.rms_eps));
    std::vector<double> z(size_t(c.vocab_size), 0.0);
    for (int64_t v = 0; v < c.vocab_size; ++v)
      for (int64_t j = 0; j < c.dim; ++j)
        z[size_t(v)] += out[size_t(v * c.dim + j)] * emb[size_t(token * c.dim + j)] * inv;
    return z;
  }
  std::vector<double> log_probs(int32_t token) const {
    std::vector<double> z = logits(token);
    const double mx = *std::max_element(z.begin(), z.end());
    double s = 0;
    for (double x : z) s += std::exp(x - mx);
    for (double& x : z) x = x - mx - std::log(s);
    return z;
  }
};

ClosedForm closed_form(uint64_t output_seed) {
  ClosedForm f;
  f.c.dim = 4, f.c.n_layers = 1, f.c.n_heads = 1, f.c.n_kv_heads = 1, f.c.head_dim = 4;
  f.c.rope_dims = 4, f.c.ffn_dim = 4, f.c.vocab_size = 5, f.c.context_length = 64;
  train::Transformer<float> t(f.c);
  for (const train::ParamTensor& p : t.layout()) {
    float* w = t.param(p.name);
    std::fill(w, w + p.size(), p.is_norm() ? 1.0f : 0.0f);
  }
  std::mt19937_64 emb_rng(11), out_rng(output_seed);
  std::uniform_int_distribution<int> small(-8, 8);
  auto fill = [&](const char* name, std::vector<double>& dst, std::mt19937_64& rng) {
    float* w = t.param(name);
    dst.resize(size_t(f.c.vocab_size * f.c.dim));
    for (size_t i = 0; i < dst.size(); ++i) w[i] = float(dst[i] = small(rng) / 4.0);  // exact
  };
  fill("token_embd.weight", f.emb, emb_rng);
  fill("output.weight", f.out, out_rng);
  f.model = train::to_inference_model(t);
  return f;
}

TEST(KlEval, MatchesClosedFormKlP99AndPerplexity) {
  ThreadPool pool(2);
  const ClosedForm ref = closed_form(21), cand = closed_form(22);
  // Two sequences; the second scores only from position 30 on (an "answer").
  std::mt19937_64 rng(5);
  std::vector<ScoredSequence> seqs(2);
  for (int t = 0; t < 60; ++t) seqs[0].tokens.push_back(int32_t(rng() % 5));
  for (int t = 0; t < 50; ++t) seqs[1].tokens.push_back(int32_t(rng() % 5));
  seqs[1].first_scored = 30;

  std::vector<double> kl, model_nll, ref_nll;
  int agree = 0;
  for (const ScoredSequence& s : seqs) {
    for (size_t t = size_t(s.first_scored); t + 1 < s.tokens.size(); ++t) {
      const auto lp = ref.log_probs(s.tokens[t]), lq = cand.log_probs(s.tokens[t]);
      double d = 0;
      for (size_t i = 0; i < lp.size(); ++i) d += std::exp(lp[i]) * (lp[i] - lq[i]);
      kl.push_back(d);
      ref_nll.push_back(-lp[size_t(s.tokens[t + 1])]);
      model_nll.push_back(-lq[size_t(s.tokens[t + 1])]);
      agree += std::max_element(lp.begin(), lp.end()) - lp.begin() ==
               std::max_element(lq.begin(), lq.end()) - lq.begin();
    }
  }
  const size_t n = kl.size();
  ASSERT_EQ(n, 59u + 19u);
  double mean_kl = 0, mean_ref = 0, mean_model = 0;
  for (size_t i = 0; i < n; ++i)
    mean_kl += kl[i], mean_ref += ref_nll[i], mean_model += model_nll[i];
  mean_kl /= double(n), mean_ref /= double(n), mean_model /= double(n);
  std::vector<double> sorted = kl;
  std::sort(sorted.begin(), sorted.end());
  // Nearest rank, ceil(0.99 n): the max for these 78 positions (SummarizeUsesNearestRankP99
  // covers a P99 below the max).
  const double p99 = sorted[(99 * n + 99) / 100 - 1];

  const RefDistributions d = reference_distributions(*ref.model, seqs, pool);
  const KlStats k = compare_to_reference(*cand.model, d, pool);
  ASSERT_GT(mean_kl, 0.05);  // the two output matrices really differ
  EXPECT_EQ(k.n_positions, int64_t(n));
  EXPECT_NEAR(k.mean_kl, mean_kl, 1e-5 * mean_kl);
  EXPECT_NEAR(k.p99_kl, p99, 1e-5 * p99);
  EXPECT_NEAR(k.max_kl, sorted.back(), 1e-5 * sorted.back());
  EXPECT_NEAR(k.top1_agreement, double(agree) / double(n), 1e-12);
  EXPECT_NEAR(k.ref_perplexity, std::exp(mean_ref), 1e-5 * std::exp(mean_ref));
  EXPECT_NEAR(k.model_perplexity, std::exp(mean_model), 1e-5 * std::exp(mean_model));
  const PerplexityStats p = perplexity(*cand.model, seqs, pool);
  EXPECT_EQ(p.n_positions, int64_t(n));
  EXPECT_NEAR(p.perplexity, std::exp(mean_model), 1e-5 * std::exp(mean_model));
}

TEST(KlEval, SummarizeUsesNearestRankP99) {
  PositionScores s;
  for (int i = 200; i >= 1; --i) {  // unsorted on purpose
    s.kl.push_back(i / 100.0);
    s.model_nll.push_back(std::log(4.0));
    s.ref_nll.push_back(std::log(2.0));
    s.top1_agree.push_back(i % 4 != 0);
  }
  const KlStats k = summarize(s);
  EXPECT_EQ(k.n_positions, 200);
  EXPECT_NEAR(k.mean_kl, 1.005, 1e-12);
  EXPECT_DOUBLE_EQ(k.p99_kl, 1.98);  // ceil(0.99 * 200) = 198th smallest
  EXPECT_DOUBLE_EQ(k.max_kl, 2.0);
  EXPECT_DOUBLE_EQ(k.top1_agreement, 0.75);
  EXPECT_NEAR(k.model_perplexity, 4.0, 1e-12);
  EXPECT_NEAR(k.ref_perplexity, 2.0, 1e-12);
  EXPECT_EQ(summarize(PositionScores{}).n_positions, 0);
}

TEST(KlEval, BatchingAndChunkingChangeNothing) {
  ThreadPool pool(2);
  const auto ref_model = random_model(0.0);
  const auto cand = random_model(0.05);
  auto seqs = random_sequences(9, 15, 40, 3);
  seqs[4].first_scored = 10;
  seqs[6].tokens.resize(1);  // nothing to score
  const KlStats batched =
      compare_to_reference(*cand, reference_distributions(*ref_model, seqs, pool), pool);
  EvalOptions alone;
  alone.batch_tokens = 1;
  const KlStats one_by_one = compare_to_reference(
      *cand, reference_distributions(*ref_model, seqs, pool, alone), pool, alone);
  EvalOptions few_logits;
  few_logits.batch_logits_bytes = 40 * 40 * sizeof(float);  // 40 positions' logits per pass
  const KlStats small_passes = compare_to_reference(
      *cand, reference_distributions(*ref_model, seqs, pool, few_logits), pool, few_logits);
  const KlStats chunked = compare_models(*cand, *ref_model, seqs, pool, {}, /*max_ref_bytes=*/1);
  for (const KlStats* k : {&one_by_one, &small_passes, &chunked}) {
    EXPECT_EQ(k->n_positions, batched.n_positions);
    EXPECT_NEAR(k->mean_kl, batched.mean_kl, 1e-6 * batched.mean_kl);
    EXPECT_NEAR(k->max_kl, batched.max_kl, 1e-6 * batched.max_kl);
    EXPECT_NEAR(k->model_perplexity, batched.model_perplexity, 1e-6 * batched.model_perplexity);
    EXPECT_NEAR(k->ref_perplexity, batched.ref_perplexity, 1e-6 * batched.ref_perplexity);
  }
  // The KV cache factory is what the model under test runs with.
  int made = 0;
  EvalOptions counted;
  counted.make_cache = [&](const model::ModelConfig& c, int64_t capacity) {
    ++made;
    return std::make_unique<kv::ContiguousKvCache>(c.n_layers, capacity, c.n_kv_heads, c.head_dim);
  };
  const KlStats with_factory = compare_models(*cand, *ref_model, seqs, pool, counted);
  EXPECT_GT(made, 0);
  EXPECT_NEAR(with_factory.mean_kl, batched.mean_kl, 1e-6 * batched.mean_kl);
}

TEST(KlEval, ChunkedScoringMatchesWholeSequences) {
  ThreadPool pool(2);
  const auto ref_model = random_model(0.0);
  const auto cand = random_model(0.05);
  auto seqs = random_sequences(5, 18, 40, 6);
  seqs[1].first_scored = 9;
  seqs[3].first_scored = 16;
  const KlStats whole =
      compare_to_reference(*cand, reference_distributions(*ref_model, seqs, pool), pool);
  for (const int64_t chunk : {1, 4}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    EvalOptions o;
    o.scored_chunk = chunk;
    const RefDistributions d = reference_distributions(*ref_model, seqs, pool, o);
    EXPECT_EQ(compare_to_reference(*ref_model, d, pool, o).max_kl, 0.0);
    const KlStats k = compare_to_reference(*cand, d, pool, o);
    EXPECT_EQ(k.n_positions, whole.n_positions);
    EXPECT_NEAR(k.mean_kl, whole.mean_kl, 1e-5 * whole.mean_kl);
    EXPECT_NEAR(k.model_perplexity, whole.model_perplexity, 1e-5 * whole.model_perplexity);
    EXPECT_NEAR(k.ref_perplexity, whole.ref_perplexity, 1e-5 * whole.ref_perplexity);
  }
}

TEST(KlEval, KvCacheTypesCostWhatTheyRound) {
  ThreadPool pool(2);
  const auto m = random_model(0.0);
  const auto seqs = random_sequences(4, 40, 40, 8);
  auto kl_with = [&](kv::KvType type, int64_t chunk) {
    kv::KvCacheOptions kv;
    kv.type = type;
    EvalOptions o;
    o.make_cache = kv_cache_factory(kv);
    o.scored_chunk = chunk;
    return compare_models(*m, *m, seqs, pool, o).mean_kl;
  };
  const double f16 = kl_with(kv::KvType::F16, 0), int8 = kl_with(kv::KvType::Int8, 0);
  EXPECT_EQ(kl_with(kv::KvType::F32, 0), 0.0);
  EXPECT_GT(f16, 0.0);
  EXPECT_GT(int8, 10 * f16);
  // int8-mixed reads a forward call's own positions in f16: over whole sequences it is f16;
  // position by position, its old positions are int8 (but the sinks and recent window are not).
  EXPECT_NEAR(kl_with(kv::KvType::Int8Mixed, 0), f16, 1e-9 * f16);
  const double mixed_decoding = kl_with(kv::KvType::Int8Mixed, 1);
  EXPECT_GT(mixed_decoding, 2 * f16);
  EXPECT_LT(mixed_decoding, kl_with(kv::KvType::Int8, 1));
}

TEST(KlEval, RejectsBadInputs) {
  ThreadPool pool(1);
  const auto m = random_model(0.0);
  auto too_long = random_sequences(1, 66, 40, 4);  // 65 positions > context 64
  EXPECT_THROW(reference_distributions(*m, too_long, pool), std::invalid_argument);
  auto fits = random_sequences(1, 65, 40, 4);  // 64 positions run, the last token only a target
  EXPECT_NO_THROW(reference_distributions(*m, fits, pool));
  auto bad_token = random_sequences(1, 10, 40, 4);
  bad_token[0].tokens[3] = 40;
  EXPECT_THROW(reference_distributions(*m, bad_token, pool), std::invalid_argument);
  auto bad_first = random_sequences(1, 10, 40, 4);
  bad_first[0].first_scored = 10;
  EXPECT_THROW(reference_distributions(*m, bad_first, pool), std::invalid_argument);
  bad_first[0].first_scored = -1;
  EXPECT_THROW(reference_distributions(*m, bad_first, pool), std::invalid_argument);

  const ClosedForm other = closed_form(1);  // vocabulary of 5
  const RefDistributions d = reference_distributions(*m, random_sequences(1, 10, 5, 4), pool);
  EXPECT_THROW(compare_to_reference(*other.model, d, pool), std::invalid_argument);
  EXPECT_THROW(compare_models(*other.model, *m, random_sequences(1, 10, 5, 4), pool),
               std::invalid_argument);
}

tokenizer::Tokenizer small_tokenizer() {
  std::vector<data::Example> ex;
  for (const char* t : {"where is my order", "cancel the order please", "the code is 4K7Q",
                        "a quiet river runs past the old mill"})
    ex.push_back({t, "x", {}, "en"});
  return tokenizer::Tokenizer(task::train_task_tokenizer(ex, task::task_tokenizer_options(300)));
}

TEST(KlEval, TextWindowsPredictEveryTokenOnce) {
  const tokenizer::Tokenizer tok = small_tokenizer();
  const std::string text = "the quiet order is where the river runs past my old code 4K7Q";
  const std::vector<int32_t> ids = tok.encode(text, false);
  ASSERT_GT(ids.size(), 20u);
  for (const int64_t ctx :
       {int64_t(2), int64_t(5), int64_t(8), int64_t(ids.size()) + 1, int64_t(1000)}) {
    SCOPED_TRACE("ctx " + std::to_string(ctx));
    const auto w = text_windows(tok, text, ctx);
    std::vector<int32_t> targets;
    for (const ScoredSequence& s : w) {
      EXPECT_LE(int64_t(s.tokens.size()), ctx);
      EXPECT_EQ(s.tokens[0], tok.bos());
      EXPECT_EQ(s.first_scored, 0);
      targets.insert(targets.end(), s.tokens.begin() + 1, s.tokens.end());
    }
    EXPECT_EQ(targets, ids);
  }
  EXPECT_THROW(text_windows(tok, text, 1), std::invalid_argument);
  EXPECT_TRUE(text_windows(tok, "", 16).empty());
}

TEST(KlEval, GreedyTaskAnswersDecodeAsTrainingEvalDoes) {
  ThreadPool pool(2);
  const tokenizer::Tokenizer tok = small_tokenizer();
  model::ModelConfig c = small_config();
  c.vocab_size = tok.n_vocab();
  c.context_length = 128;
  c.bos_id = tok.bos(), c.eos_id = tok.eos();
  train::Transformer<float> t(c);
  t.init_random(4);
  for (float& p : t.params()) p *= 8.0f;
  const auto m = train::to_inference_model(t);
  std::vector<data::Example> ex;
  for (const char* text : {"where is my order", "the code is 4K7Q", "cancel it"})
    ex.push_back({text, "x", {}, "en"});
  const auto expected = task::generate_answers(*m, tok, ex, pool, 12, 2);
  ASSERT_FALSE(expected[0].empty());
  // An f32 cache from the factory decodes exactly as the default cache.
  EXPECT_EQ(task::generate_answers(*m, tok, ex, pool, 12, 2, kv_cache_factory({})), expected);
}

TEST(KlEval, TaskSequencesScoreTheAnswerOnly) {
  const tokenizer::Tokenizer tok = small_tokenizer();
  const data::Example ex{"where is my order", "order_status", {{"order", "my order"}}, "en"};
  const auto seqs = task::task_sequences(tok, {ex});
  ASSERT_EQ(seqs.size(), 1u);
  const train::TrainingSequence t = task::encode_task(tok, ex);
  EXPECT_EQ(seqs[0].tokens, t.tokens);
  std::vector<int32_t> scored_targets(seqs[0].tokens.begin() + seqs[0].first_scored + 1,
                                      seqs[0].tokens.end());
  std::vector<int32_t> answer = tok.encode(task::task_answer(ex), false);
  answer.push_back(tok.eos());
  EXPECT_EQ(scored_targets, answer);
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("kl_eval_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& content) {
    const std::string p = (dir_ / name).string();
    std::ofstream(p) << content;
    return p;
  }
  std::filesystem::path dir_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const FileError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST_F(TempDir, ReadsTextAndJsonlDocuments) {
  EXPECT_EQ(read_text_documents(write("a.txt", "Once upon a time.\n\nThe end.\n")),
            std::vector<std::string>{"Once upon a time.\n\nThe end.\n"});
  EXPECT_EQ(
      read_text_documents(write("b.jsonl", "{\"text\":\"one\",\"id\":1}\n\n{\"text\":\"two\"}\n")),
      (std::vector<std::string>{"one", "two"}));
  const std::string bad = write("c.jsonl", "{\"text\":\"one\"}\n{\"text\":\"two\"}\n{oops\n");
  EXPECT_NE(error_of([&] { read_text_documents(bad); }).find("c.jsonl:3: invalid JSON"),
            std::string::npos);
  const std::string no_text = write("d.jsonl", "{\"body\":\"one\"}\n");
  EXPECT_NE(error_of([&] { read_text_documents(no_text); }).find(":1: missing \"text\""),
            std::string::npos);
  const std::string number = write("e.jsonl", "{\"text\":5}\n");
  EXPECT_NE(error_of([&] { read_text_documents(number); }).find("must be a string"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_text_documents(write("f.txt", " \n\t\n")); }).find("no text"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_text_documents(write("g.jsonl", "")); }).find("no text"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] { read_text_documents((dir_ / "missing.txt").string()); }).find("cannot open"),
      std::string::npos);
  EXPECT_NE(error_of([&] { read_text_documents(dir_.string()); }).find("directory"),
            std::string::npos);
}

// stories260K: llama2.c's logits at each golden prompt's last position are a full distribution;
// the perplexity of the first greedy token after each prompt, derived here from them, is what
// shrike's reference pass reports for those positions.
TEST(KlEval, Stories260KPerplexityMatchesGoldenLogits) {
  SHRIKE_REQUIRE_SHARED("reference/stories260K/golden.json");
  const std::string dir = testing::shared_dir() + "/reference/stories260K/";
  std::ifstream in(dir + "golden.json");
  const auto golden = nlohmann::json::parse(in);
  std::vector<ScoredSequence> seqs;
  double nll_sum = 0;
  std::vector<int32_t> top;
  for (const auto& cs : golden["cases"]) {
    ScoredSequence s;
    s.tokens = cs["prompt_token_ids"].get<std::vector<int32_t>>();
    s.first_scored = int64_t(s.tokens.size()) - 1;
    const int32_t next = cs["greedy_token_ids"][0];
    s.tokens.push_back(next);
    seqs.push_back(s);
    const auto logits = cs["prompt_final_position_logits"].get<std::vector<double>>();
    const double mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (const double z : logits) sum += std::exp(z - mx);
    nll_sum += mx + std::log(sum) - logits[size_t(next)];
    top.push_back(int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin()));
  }
  ASSERT_EQ(seqs.size(), 4u);
  const double expected = std::exp(nll_sum / 4.0);

  ThreadPool pool(2);
  const auto gguf = model::load_model(dir + "stories260K.gguf");
  const RefDistributions d = reference_distributions(*gguf, seqs, pool);
  ASSERT_EQ(d.n_positions(), 4);
  EXPECT_EQ(d.argmax, top);
  const KlStats self = compare_to_reference(*gguf, d, pool);
  EXPECT_NEAR(self.ref_perplexity, expected, 1e-4 * expected);
  EXPECT_NEAR(perplexity(*gguf, seqs, pool).perplexity, expected, 1e-4 * expected);

  // The llama2.c file holds the same weights: the same distributions.
  const auto bin = model::load_model(dir + "stories260K.bin");
  const KlStats k = compare_to_reference(*bin, d, pool);
  EXPECT_LT(k.max_kl, 1e-9);
  EXPECT_EQ(k.top1_agreement, 1.0);
}

}  // namespace
}  // namespace shrike::quant
