// The contiguous KV cache in every type (f32, f16, int8, int8-mixed), the int8-mixed policy
// (sinks, window, heavy hitters chosen and demoted, f16 layers, bounded f16 memory), its
// independence from how a prompt is chunked or batched, and what int8 costs on a real model
// (stories260K: bytes per token, K/V error, KL of the next-token distributions).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "core/dtype.h"
#include "decode/sampler.h"
#include "kernels/matmul.h"
#include "kv/contiguous_kv.h"
#include "model/model.h"
#include "model/synth.h"
#include "shared_data.h"

namespace shrike::kv {
namespace {

using model::BatchSequence;
using model::load_model;
using model::Model;
using model::ModelConfig;
using model::SynthOptions;
using model::write_synth_model;

using Kept = MixedPrecisionKv::Kept;

ModelConfig tiny_config(int64_t n_layers = 3) {
  ModelConfig c;
  c.dim = 8;
  c.n_layers = n_layers;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 4;
  return c;
}

KvCacheOptions mixed(int64_t sinks, int64_t window, double heavy,
                     std::vector<int64_t> fp16_layers = {}) {
  KvCacheOptions o;
  o.type = KvType::Int8Mixed;
  o.sinks = sinks;
  o.window = window;
  o.heavy_fraction = heavy;
  o.fp16_layers = std::move(fp16_layers);
  return o;
}

// Adds `w` to the weight sum of (layer, pos), as attention would (tiny_config: one kv head;
// only positions holding a copy have a sum).
void add_weight(MixedPrecisionKv& m, int64_t layer, int64_t pos, float w) {
  const WeightSums s = m.weight_sums(layer);
  ASSERT_NE(s.data, nullptr);
  ASSERT_NE(s.index, nullptr);
  if (s.index[pos] >= 0) s.data[s.index[pos]] += w;
}

// One decode step of the policy alone: position n is written, then decisions are taken.
void step(MixedPrecisionKv& m) {
  m.begin(m.n_positions(), 1);
  m.settle();
}

TEST(KvCacheOptions, NamesValidationAndLayerFormats) {
  for (KvType t : {KvType::F32, KvType::F16, KvType::Int8, KvType::Int8Mixed})
    EXPECT_EQ(kv_type_from_name(kv_type_name(t)), t);
  EXPECT_EQ(kv_type_from_name("int8-mixed"), KvType::Int8Mixed);
  EXPECT_FALSE(kv_type_from_name("q8_0"));
  EXPECT_FALSE(kv_type_from_name("INT8"));
  EXPECT_NO_THROW(mixed(4, 16, 0.1, {0, 2}).validate(3));
  EXPECT_THROW(mixed(-1, 16, 0.1).validate(3), std::invalid_argument);
  EXPECT_THROW(mixed(4, -1, 0.1).validate(3), std::invalid_argument);
  EXPECT_THROW(mixed(4, 16, 1.5).validate(3), std::invalid_argument);
  EXPECT_THROW(mixed(4, 16, std::nan("")).validate(3), std::invalid_argument);
  EXPECT_THROW(mixed(4, 16, 0.1, {3}).validate(3), std::invalid_argument);
  EXPECT_THROW(mixed(4, 16, 0.1, {-1}).validate(3), std::invalid_argument);
  KvCacheOptions int8;
  int8.type = KvType::Int8;
  EXPECT_NO_THROW(int8.validate(3));
  int8.fp16_layers = {1};
  EXPECT_THROW(int8.validate(3), std::invalid_argument);  // f16 layers are int8-mixed's
  using F = kernels::KvFormat;
  EXPECT_EQ(mixed(4, 16, 0.1, {2}).layer_formats(3), (std::vector<F>{F::Int8, F::Int8, F::F16}));
  KvCacheOptions f16;
  f16.type = KvType::F16;
  EXPECT_EQ(f16.layer_formats(2), (std::vector<F>{F::F16, F::F16}));
  EXPECT_EQ(mixed(4, 16, 0.1, {0, 5}).describe(),
            "int8-mixed (sinks 4, window 16, heavy 10%, f16 layers 0,5)");
  EXPECT_EQ(f16.describe(), "f16");
}

TEST(MixedPrecisionKv, SinksAndTheWindowKeepCopiesAndF16LayersAreNotTracked) {
  MixedPrecisionKv m(mixed(2, 3, 0.0, {1}), tiny_config().kv_dims());
  EXPECT_FALSE(m.tracks(1));
  m.begin(0, 10);  // a prefill: every position holds a copy until the logits call decides
  EXPECT_EQ(m.f16_positions(0), 10);
  EXPECT_EQ(m.kept(0, 0), Kept::Sink);
  EXPECT_EQ(m.kept(0, 5), Kept::Recent);
  EXPECT_EQ(m.f16_positions(1), 0);
  EXPECT_EQ(m.weight_sums(0).data, nullptr);  // no heavy hitters: no sums needed
  m.settle();
  for (int64_t l : {0, 2}) {
    EXPECT_EQ(m.f16_positions(l), 2 + 3) << l;
    for (int64_t p = 0; p < 10; ++p)
      EXPECT_EQ(m.kept(l, p), p < 2 ? Kept::Sink : p >= 7 ? Kept::Recent : Kept::Int8) << p;
  }
  EXPECT_EQ(m.f16_bytes(), size_t(2 * 5 * 2 * 4 * 2));  // 2 layers, 5 positions, K+V, 4 halves
  for (int i = 0; i < 20; ++i) step(m);
  EXPECT_EQ(m.kept(0, 1), Kept::Sink);
  EXPECT_EQ(m.kept(2, 26), Kept::Int8);
  EXPECT_EQ(m.kept(2, 27), Kept::Recent);
  EXPECT_EQ(m.f16_positions(2), 5);
  EXPECT_EQ(m.kept(1, 3), Kept::Int8);  // an f16 layer has no copies: its rows are f16
}

TEST(MixedPrecisionKv, HeavyHittersAreChosenFromTheWindowAndDemoted) {
  // No sinks, window 2, top 25%: with 8 positions outside the window, 2 heavy hitters.
  MixedPrecisionKv m(mixed(0, 2, 0.25), tiny_config(1).kv_dims());
  m.begin(0, 10);
  add_weight(m, 0, 3, 5.0f);
  add_weight(m, 0, 6, 4.0f);
  add_weight(m, 0, 1, 1.0f);
  m.settle();
  EXPECT_EQ(m.kept(0, 3), Kept::Heavy);
  EXPECT_EQ(m.kept(0, 6), Kept::Heavy);
  EXPECT_EQ(m.kept(0, 1), Kept::Int8);
  EXPECT_EQ(m.kept(0, 8), Kept::Recent);
  EXPECT_EQ(m.f16_positions(0), 2 + 2);
  EXPECT_DOUBLE_EQ(m.weight_sum(0, 3), 5.0);
  // Position 8 (still in the window) gathers more weight than 6; when it leaves, it takes 6's
  // place (9 positions outside the window: still 2 heavy hitters).
  add_weight(m, 0, 8, 4.5f);
  step(m);
  EXPECT_EQ(m.kept(0, 8), Kept::Heavy);
  EXPECT_EQ(m.kept(0, 3), Kept::Heavy);
  EXPECT_EQ(m.kept(0, 6), Kept::Int8) << "demoted";
  // Position 1 is int8: it cannot come back, and its weight is no longer tracked.
  add_weight(m, 0, 1, 100.0f);
  EXPECT_EQ(m.weight_sum(0, 1), 0.0);
  step(m);  // 10 positions outside the window: 2 heavy hitters; 9 (no weight) loses its copy
  EXPECT_EQ(m.kept(0, 1), Kept::Int8);
  EXPECT_EQ(m.kept(0, 3), Kept::Heavy);
  EXPECT_EQ(m.kept(0, 8), Kept::Heavy);
  EXPECT_EQ(m.kept(0, 9), Kept::Int8);
  EXPECT_EQ(m.f16_positions(0), 2 + 2);
  // The budget grows with the positions: 10 leaves with 11 positions outside the window (still 2
  // heavy hitters: it loses), 11 with 12 (3 heavy hitters: it stays).
  add_weight(m, 0, 11, 0.5f);
  step(m);
  EXPECT_EQ(m.kept(0, 10), Kept::Int8);
  step(m);
  EXPECT_EQ(m.kept(0, 11), Kept::Heavy);
  EXPECT_EQ(m.f16_positions(0), 3 + 2);
}

TEST(MixedPrecisionKv, F16MemoryStaysBoundedAsGenerationGoesOn) {
  const int64_t sinks = 4, window = 8;
  const double heavy = 0.1;
  MixedPrecisionKv m(mixed(sinks, window, heavy, {1}), tiny_config().kv_dims());
  std::mt19937 rng(3);
  std::exponential_distribution<float> weight(1.0f);
  m.begin(0, 50);  // prompt
  for (int64_t p = 0; p < 50; ++p) add_weight(m, 0, p, weight(rng));
  m.settle();
  for (int i = 0; i < 400; ++i) {
    const int64_t n = m.n_positions();
    for (int64_t p = 0; p < n; ++p) add_weight(m, 0, p, weight(rng) / float(n));
    step(m);
    const int64_t outside = std::max<int64_t>(0, n + 1 - sinks - window);
    const auto bound = sinks + window + int64_t(std::floor(heavy * double(outside)));
    ASSERT_LE(m.f16_positions(0), bound) << "n=" << n + 1;
    ASSERT_LE(m.f16_positions(2), bound) << "n=" << n + 1;
  }
  EXPECT_GT(m.f16_positions(0), sinks + window) << "heavy hitters were kept";
  EXPECT_EQ(m.f16_positions(1), 0);
  // Compacted: the prompt's slots (one per position until it was decided) are gone; what
  // remains is a slot index per position of the 2 int8 layers and, per slot allocated, its
  // halves (2 x 4) and weight sum (1 kv head): at most about twice the slots in use (or 16).
  const auto n = int64_t(m.n_positions());
  const int64_t used = std::max(m.f16_positions(0), m.f16_positions(2));
  EXPECT_LE(m.bytes(), size_t(2 * n * 4 + 2 * std::max<int64_t>(16, 3 * used) * (16 + 4 + 4)));
  EXPECT_EQ(MixedPrecisionKv::index_bytes_per_token(m.options(), tiny_config().kv_dims()), 2u * 4);
  EXPECT_EQ(MixedPrecisionKv::copy_bytes_per_token(m.options(), tiny_config().kv_dims()),
            2u * (16 + 4));
  m.clear();
  EXPECT_EQ(m.f16_bytes(), 0u);
  EXPECT_EQ(m.n_positions(), 0);
}

TEST(MixedPrecisionKv, RewritingPositionsForgetsTheirState) {
  MixedPrecisionKv m(mixed(1, 2, 0.25), tiny_config(1).kv_dims());
  m.begin(0, 8);
  add_weight(m, 0, 4, 3.0f);
  m.settle();  // 5 positions outside sink and window: 1 heavy hitter
  ASSERT_EQ(m.kept(0, 4), Kept::Heavy);
  ASSERT_EQ(m.kept(0, 1), Kept::Int8);
  m.begin(3, 2);  // positions 3, 4 recomputed: back in the window, their sums reset
  EXPECT_EQ(m.n_positions(), 5);
  EXPECT_EQ(m.kept(0, 4), Kept::Recent);
  EXPECT_EQ(m.weight_sum(0, 4), 0.0);
  EXPECT_EQ(m.f16_positions(0), 1 + 2);  // sink 0, positions 3 and 4
  m.begin(0, 3);                         // from scratch
  EXPECT_EQ(m.n_positions(), 3);
  EXPECT_EQ(m.f16_positions(0), 3);
  // A skipped range holds no copies.
  m.begin(6, 1);
  EXPECT_EQ(m.kept(0, 4), Kept::Int8);
  EXPECT_EQ(m.kept(0, 6), Kept::Recent);
}

TEST(MixedPrecisionKv, StoreAndAttachExposeTheF16Copies) {
  MixedPrecisionKv m(mixed(1, 1, 0.0), tiny_config(1).kv_dims());
  m.begin(0, 3);
  const float k[4] = {1.5f, -2, 0.1f, 3}, v[4] = {-1, 0.25f, 7, 0.3f};
  m.store(0, 2, k, v);
  EXPECT_THROW(m.store(0, 5, k, v), std::logic_error);
  const int8_t* none[1] = {nullptr};
  const float* no_scales[1] = {nullptr};
  kernels::KvRows kr{nullptr, 4, 4, 4}, vr = kr;
  kr.int8_blocks = vr.int8_blocks = none;
  kr.scale_blocks = vr.scale_blocks = no_scales;
  m.attach(0, kr, vr);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(kr.f16_copy(2, 0)[i], fp32_to_fp16(k[i]));
    EXPECT_EQ(vr.f16_copy(2, 0)[i], fp32_to_fp16(v[i]));
  }
  m.settle();  // position 1 leaves the window (no heavy hitters): read as int8 from now on
  m.attach(0, kr, vr);
  EXPECT_EQ(kr.f16_copy(1, 0), nullptr);
  EXPECT_NE(kr.f16_copy(0, 0), nullptr);  // the sink
}

TEST(ContiguousKvCache, Int8RowsScalesAndSizes) {
  ModelConfig c = tiny_config(2);
  c.n_kv_heads = 2;
  KvCacheOptions o;
  o.type = KvType::Int8;
  ContiguousKvCache kv(c.kv_dims(), 5, o);
  EXPECT_EQ(kv.storage_bytes_per_token(), size_t(2 * 2 * 2 * (4 + 4)));
  kv.begin_forward(0, 3);
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0, 2);
  std::vector<float> k(8), v(8);
  for (auto& x : k) x = d(rng);
  for (auto& x : v) x = d(rng);
  kv.store(1, 2, k.data(), v.data());
  const kernels::KvRows kr = kv.keys(1), vr = kv.values(1);
  ASSERT_TRUE(kr.is_int8());
  for (int64_t h = 0; h < 2; ++h) {
    int8_t want[4];
    EXPECT_EQ(kr.scale(2, h), kernels::quantize_int8_row(k.data() + h * 4, 4, want));
    EXPECT_EQ(0, std::memcmp(kr.int8_head(2, h), want, 4));
    EXPECT_EQ(vr.scale(2, h), kernels::quantize_int8_row(v.data() + h * 4, 4, want));
    EXPECT_EQ(0, std::memcmp(vr.int8_head(2, h), want, 4));
    EXPECT_EQ(kr.scale(1, h), 0.0f);  // not written: zero
  }
  EXPECT_EQ(kv.n_positions(), 3);
  EXPECT_EQ(kv.bytes_in_use(), 3 * kv.storage_bytes_per_token());
  EXPECT_DOUBLE_EQ(kv.bytes_per_token(), double(kv.storage_bytes_per_token()));
  // The other types' figures.
  const auto per_token = [&](KvType t) {
    KvCacheOptions x;
    x.type = t;
    return ContiguousKvCache(c.kv_dims(), 5, x).storage_bytes_per_token();
  };
  EXPECT_EQ(per_token(KvType::F32), size_t(2 * 2 * 2 * 4 * 4));
  EXPECT_EQ(per_token(KvType::F16), size_t(2 * 2 * 2 * 4 * 2));
  EXPECT_EQ(ContiguousKvCache(2, 5, 2, 4).storage_bytes_per_token(), per_token(KvType::F32));
  o.heavy_fraction = 2;
  EXPECT_THROW(ContiguousKvCache(c.kv_dims(), 5, o), std::invalid_argument);
}

TEST(ContiguousKvCache, Int8MixedCountsItsCopiesAndKeepsF16LayersInF16) {
  ModelConfig c = tiny_config(3);
  ContiguousKvCache kv(c.kv_dims(), 64, mixed(2, 4, 0.0, {1}));
  ASSERT_NE(kv.mixed(), nullptr);
  EXPECT_TRUE(kv.keys(0).is_int8());
  EXPECT_TRUE(kv.values(1).is_f16());
  EXPECT_EQ(kv.storage_bytes_per_token(), size_t(2 * (4 + 4) + 2 * 8 + 2 * (4 + 4)));
  kv.begin_forward(0, 20);
  kv.end_forward(true);
  const size_t copy = 2 * 4 * 2;  // K and V halves of one position in one layer
  EXPECT_EQ(kv.mixed()->f16_bytes(), 2 * (2 + 4) * copy);
  // The state of each int8 layer: a slot index per position, 32 slots allocated (16, then
  // doubled), 14 of them free (too few to compact); no weight sums (no heavy hitters).
  EXPECT_EQ(kv.mixed()->bytes(), 2 * (20 * 4 + 32 * copy + 14 * 4));
  EXPECT_EQ(kv.bytes_in_use(), 20 * kv.storage_bytes_per_token() + kv.mixed()->bytes());
  EXPECT_NE(kv.keys(0).f16_slot, nullptr);
  EXPECT_EQ(kv.keys(1).f16_slot, nullptr);
}

// ---- On a model --------------------------------------------------------------------------------

std::unique_ptr<Model> synth_model() {
  const auto path = std::filesystem::temp_directory_path() /
                    ("shrike_kv_cache_test_" + std::to_string(getpid()) + ".gguf");
  SynthOptions o;
  o.dim = 64;
  o.n_layers = 3;
  o.n_heads = 4;
  o.n_kv_heads = 2;
  o.ffn_dim = 96;
  o.vocab = 300;
  o.context_length = 256;
  o.type = DType::F32;
  o.seed = 9;
  write_synth_model(o, path.string());
  auto m = load_model(path.string());
  std::filesystem::remove(path);
  return m;
}

// Batch-invariant products: a sequence's logits do not depend on what else is in the batch.
model::ForwardOptions invariant() {
  model::ForwardOptions o;
  o.matmul.batch_invariant = true;
  return o;
}

// Prompt (in the given chunks, logits at the last one only), then greedy decoding; the logits of
// every step.
std::vector<float> run(const Model& m, ContiguousKvCache& kv, const std::vector<int32_t>& prompt,
                       const std::vector<int64_t>& chunks, int64_t n_decode, ThreadPool& pool) {
  const int64_t vocab = m.config().vocab_size;
  std::vector<float> all, logits(static_cast<size_t>(vocab));
  int64_t p = 0;
  for (size_t i = 0; p < int64_t(prompt.size()); ++i) {
    const int64_t len = std::min<int64_t>(chunks[i % chunks.size()], int64_t(prompt.size()) - p);
    const bool last = p + len == int64_t(prompt.size());
    m.forward(prompt.data() + p, len, p, kv, last ? 1 : 0, logits.data(), pool, invariant());
    p += len;
  }
  for (int64_t i = 0; i < n_decode; ++i) {
    all.insert(all.end(), logits.begin(), logits.end());
    const int32_t next = decode::argmax(logits.data(), vocab);
    m.forward(&next, 1, p++, kv, 1, logits.data(), pool, invariant());
  }
  return all;
}

std::vector<int32_t> random_tokens(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = std::uniform_int_distribution<int32_t>(3, 299)(rng);
  return t;
}

// The f16 copies and heavy hitters depend only on the queries' weights, accumulated in position
// order: a prompt split into uneven chunks gives the same decisions and logits, to the bit, as the
// prompt in one call; so does plain int8.
TEST(ContiguousKvCache, Int8AndInt8MixedDoNotDependOnChunking) {
  const auto m = synth_model();
  const ModelConfig& c = m->config();
  ThreadPool pool(2);
  const auto prompt = random_tokens(90, 1);
  KvCacheOptions int8;
  int8.type = KvType::Int8;
  for (const KvCacheOptions& o : {int8, mixed(4, 8, 0.2, {1})}) {
    ContiguousKvCache whole(c.kv_dims(), 160, o), chunked(c.kv_dims(), 160, o);
    const auto a = run(*m, whole, prompt, {90}, 40, pool);
    const auto b = run(*m, chunked, prompt, {7, 10, 1, 27}, 40, pool);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << o.describe();
    if (!o.mixed()) continue;
    int64_t heavy = 0;
    for (int64_t l : {0, 2})
      for (int64_t p = 0; p < whole.n_positions(); ++p) {
        ASSERT_EQ(whole.mixed()->kept(l, p), chunked.mixed()->kept(l, p)) << l << " " << p;
        heavy += whole.mixed()->kept(l, p) == Kept::Heavy;
      }
    EXPECT_GT(heavy, 0);
    EXPECT_EQ(whole.bytes_in_use(), chunked.bytes_in_use());
  }
}

// Batched with other sequences (forward_batch), every sequence gets its solo logits, in int8 and
// int8-mixed alike.
TEST(ContiguousKvCache, Int8AndInt8MixedBatchedEqualAlone) {
  const auto m = synth_model();
  const ModelConfig& c = m->config();
  const int64_t vocab = c.vocab_size;
  ThreadPool pool(2);
  KvCacheOptions int8;
  int8.type = KvType::Int8;
  for (const KvCacheOptions& o : {int8, mixed(2, 4, 0.3)}) {
    const std::vector<std::vector<int32_t>> prompts = {random_tokens(30, 2), random_tokens(5, 3),
                                                       random_tokens(52, 4)};
    std::vector<std::vector<float>> alone;
    for (const auto& p : prompts) {
      ContiguousKvCache kv(c.kv_dims(), 100, o);
      alone.push_back(run(*m, kv, p, {int64_t(p.size())}, 12, pool));
    }
    // Together: every step runs all three; prompts in chunks of 16, then decode.
    std::vector<std::unique_ptr<ContiguousKvCache>> kvs;
    std::vector<std::vector<int32_t>> tokens = prompts;
    std::vector<int64_t> done(3, 0);
    std::vector<std::vector<float>> together(3);
    for (int i = 0; i < 3; ++i)
      kvs.push_back(std::make_unique<ContiguousKvCache>(c.kv_dims(), 100, o));
    for (int iter = 0; iter < 200; ++iter) {
      std::vector<BatchSequence> batch;
      std::vector<int> who;
      for (int i = 0; i < 3; ++i) {
        const int64_t left = int64_t(tokens[size_t(i)].size()) - done[size_t(i)];
        if (int64_t(together[size_t(i)].size()) >= 12 * vocab || left == 0) continue;
        const int64_t n = std::min<int64_t>(16, left);
        const bool logits = done[size_t(i)] + n == int64_t(tokens[size_t(i)].size());
        batch.push_back({tokens[size_t(i)].data() + done[size_t(i)], n, done[size_t(i)],
                         kvs[size_t(i)].get(), logits ? 1 : 0});
        who.push_back(i);
      }
      if (batch.empty()) break;
      int64_t rows = 0;
      for (const auto& b : batch) rows += b.n_logits;
      std::vector<float> logits(size_t(std::max<int64_t>(1, rows) * vocab));
      m->forward_batch(batch.data(), int64_t(batch.size()), logits.data(), pool, invariant());
      for (size_t j = 0, r = 0; j < batch.size(); ++j) {
        const auto i = size_t(who[j]);
        done[i] += batch[j].n_tokens;
        if (batch[j].n_logits == 0) continue;
        const float* l = logits.data() + r++ * size_t(vocab);
        together[i].insert(together[i].end(), l, l + vocab);
        tokens[i].push_back(decode::argmax(l, vocab));
      }
    }
    for (size_t i = 0; i < 3; ++i) {
      ASSERT_EQ(together[i].size(), alone[i].size()) << i;
      EXPECT_EQ(0, std::memcmp(together[i].data(), alone[i].data(), alone[i].size() * 4))
          << o.describe() << " sequence " << i;
    }
  }
}

// What int8 costs on a real model. The text: stories260K's own greedy story from BOS, 400
// tokens, run token by token (as decoding reads the cache) with each cache type; every step's
// next-token distribution is compared with the f32 cache's. Also the quantisation error of the
// K/V rows themselves (the f32 run's rows, quantised).
TEST(ContiguousKvCache, Stories260KBytesPerTokenAndError) {
  SHRIKE_REQUIRE_SHARED("reference/stories260K/stories260K.gguf");
  const auto m = load_model(testing::shared_dir() + "/reference/stories260K/stories260K.gguf");
  const ModelConfig& c = m->config();
  ThreadPool pool(1);
  const int64_t n = 400;
  std::vector<int32_t> tokens{1};
  {
    ContiguousKvCache kv(c.n_layers, n, c.n_kv_heads, c.head_dim);
    std::vector<float> logits(size_t(c.vocab_size));
    for (int64_t p = 0; p + 1 < n; ++p) {
      m->forward(&tokens[size_t(p)], 1, p, kv, 1, logits.data(), pool);
      int32_t next = decode::argmax(logits.data(), c.vocab_size);
      if (next == 1 || next == 2) next = int32_t(3 + p % 400);  // keep going past the story's end
      tokens.push_back(next);
    }
  }
  // The f32 run: logits, and every stored K/V row quantised both ways.
  struct Capture final : KvCache {
    ContiguousKvCache inner;
    int64_t heads, row;
    double max_int8_vs_f16 = 0, se_int8 = 0, se_f16 = 0, ss = 0;
    Capture(const ModelConfig& c, int64_t n)
        : inner(c.n_layers, n, c.n_kv_heads, c.head_dim), heads(c.n_kv_heads), row(c.head_dim) {}
    int64_t capacity() const override { return inner.capacity(); }
    void store(int64_t layer, int64_t pos, const float* k, const float* v) override {
      inner.store(layer, pos, k, v);
      std::vector<int8_t> q(static_cast<size_t>(row));
      for (const float* x : {k, v})
        for (int64_t h = 0; h < heads; ++h) {
          const float* r = x + h * row;
          const float s = kernels::quantize_int8_row(r, row, q.data());
          for (int64_t i = 0; i < row; ++i) {
            const double f16 = fp16_to_fp32(fp32_to_fp16(r[i])), i8 = double(q[size_t(i)]) * s;
            max_int8_vs_f16 = std::max(max_int8_vs_f16, std::fabs(i8 - f16));
            se_int8 += (i8 - r[i]) * (i8 - r[i]);
            se_f16 += (f16 - r[i]) * (f16 - r[i]);
            ss += double(r[i]) * r[i];
          }
        }
    }
    kernels::KvRows keys(int64_t l) const override { return inner.keys(l); }
    kernels::KvRows values(int64_t l) const override { return inner.values(l); }
  };
  Capture capture(c, n);
  std::vector<float> ref(size_t(n * c.vocab_size));
  for (int64_t p = 0; p < n; ++p)
    m->forward(&tokens[size_t(p)], 1, p, capture, 1, ref.data() + p * c.vocab_size, pool);

  struct Result {
    double mean_kl = 0, agree = 0, bytes_per_token = 0;
  };
  const auto measure = [&](const KvCacheOptions& o) {
    ContiguousKvCache kv(c.kv_dims(), n, o);
    std::vector<float> logits(size_t(c.vocab_size));
    Result r;
    for (int64_t p = 0; p < n; ++p) {
      m->forward(&tokens[size_t(p)], 1, p, kv, 1, logits.data(), pool);
      const float* a = ref.data() + p * c.vocab_size;
      const auto log_softmax = [&](const float* x) {
        const double mx = *std::max_element(x, x + c.vocab_size);
        double z = 0;
        for (int64_t i = 0; i < c.vocab_size; ++i) z += std::exp(x[i] - mx);
        std::vector<double> out(size_t(c.vocab_size));
        for (int64_t i = 0; i < c.vocab_size; ++i) out[size_t(i)] = x[i] - mx - std::log(z);
        return out;
      };
      const auto la = log_softmax(a), lb = log_softmax(logits.data());
      for (int64_t i = 0; i < c.vocab_size; ++i)
        r.mean_kl += std::exp(la[size_t(i)]) * (la[size_t(i)] - lb[size_t(i)]);
      r.agree += decode::argmax(a, c.vocab_size) == decode::argmax(logits.data(), c.vocab_size);
    }
    r.mean_kl /= double(n);
    r.agree /= double(n);
    r.bytes_per_token = kv.bytes_per_token();
    std::printf("[ kv       ] %-58s %6.1f bytes/token, mean KL %.2e, top-1 agreement %.4f\n",
                o.describe().c_str(), r.bytes_per_token, r.mean_kl, r.agree);
    return r;
  };
  KvCacheOptions f32, f16, int8;
  f16.type = KvType::F16;
  int8.type = KvType::Int8;
  const Result r32 = measure(f32), r16 = measure(f16), r8 = measure(int8);
  const Result rmix = measure(mixed(4, 16, 0.1));
  measure(mixed(4, 16, 0.0));
  measure(mixed(0, 16, 0.0));
  measure(mixed(4, 0, 0.1));
  measure(mixed(4, 16, 0.1, {0}));
  std::printf(
      "[ kv       ] K/V rows of the f32 run: max |int8 - f16| %.3g; relative RMS error "
      "int8 %.2e, f16 %.2e\n",
      capture.max_int8_vs_f16, std::sqrt(capture.se_int8 / capture.ss),
      std::sqrt(capture.se_f16 / capture.ss));
  // 5 layers x 4 kv heads x 8 dims: K and V.
  EXPECT_DOUBLE_EQ(r32.bytes_per_token, 2 * 5 * 4 * 8 * 4);
  EXPECT_DOUBLE_EQ(r16.bytes_per_token, 2 * 5 * 4 * 8 * 2);
  EXPECT_DOUBLE_EQ(r8.bytes_per_token, 2 * 5 * 4 * (8 + 4));
  EXPECT_GT(rmix.bytes_per_token, r8.bytes_per_token);
  EXPECT_LT(rmix.bytes_per_token, r16.bytes_per_token);
  EXPECT_EQ(r32.mean_kl, 0.0);
  EXPECT_LT(r16.mean_kl, 1e-4);
  EXPECT_LT(r8.mean_kl, 2e-2);
  EXPECT_LT(rmix.mean_kl, r8.mean_kl / 4) << "the f16 positions must buy back most of the error";
  EXPECT_GT(rmix.agree, 0.98);
}

}  // namespace
}  // namespace shrike::kv
