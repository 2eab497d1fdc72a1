// Speculative sampling through the engine keeps the target's distribution (issue 16, acceptance
// 2): 100,000 requests with a fixed prompt and their own seeds sample their first three tokens
// (the first from the prompt's row, the second and third through draft-model speculation with
// rejection sampling), and a chi-square test compares the counts of each (t1, t2, t3) with the
// exact joint distribution of direct sampling, computed from the target's logits with the same
// sampler processing. Once with a good draft (the target's own weights rounded to Q8_0: mostly
// accepted, some rejections) and once with a deliberately bad one (the target with its logits
// scaled by 0.2: often rejected, its residual max(0, p - q) far from p). A tiny random
// model (one layer, 260 tokens) keeps 100,000 requests within seconds; top-k 8 keeps the joint to
// at most 512 outcomes. Plain sampling through the engine is the control.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <tuple>

#include "core/sanitizers.h"
#include "core/thread_pool.h"
#include "decode/chi_square.h"
#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "engine/stream_output.h"
#include "gguf/gguf.h"
#include "kv/contiguous_kv.h"
#include "model/synth.h"

namespace shrike::engine {
namespace {

using Triple = std::tuple<int32_t, int32_t, int32_t>;

// The acceptance count in the normal build. Sanitizer builds (several times slower, and there to
// find memory errors and races, not to measure) draw fewer: still enough bins for the test.
#if defined(SHRIKE_SANITIZED)
constexpr int64_t kSamples = 40000;
#else
constexpr int64_t kSamples = 100000;
#endif

// output_scale multiplies the output matrix: logits scaled, the same ranking, another
// distribution (a scale above 1 makes an overconfident copy of the model).
test_util::Loaded tiny(uint64_t seed, DType type, float output_scale = 1) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("shrike_spec_dist_" + std::to_string(getpid()) + "_" + std::to_string(seed) +
                     "_" + std::to_string(int(type)) + ".gguf");
  model::SynthOptions o;
  o.dim = 32;
  o.n_layers = 1;
  o.n_heads = 2;
  o.n_kv_heads = 2;
  o.ffn_dim = 64;
  o.vocab = 260;
  o.context_length = 64;
  o.type = type;
  o.seed = seed;
  model::write_synth_model(o, path.string());
  if (output_scale != 1) {
    const std::string copy = path.string() + ".scaled";
    {
      const gguf::GgufFile f = gguf::GgufFile::open(path.string());
      gguf::GgufWriter w;
      for (const std::string& key : f.keys()) w.set_value(key, *f.find(key));
      for (const gguf::TensorInfo& t : f.tensors()) {
        std::vector<uint8_t> data(t.data, t.data + t.bytes);
        if (t.name == "output.weight") {
          EXPECT_EQ(t.type, DType::F32);
          float* x = reinterpret_cast<float*>(data.data());
          for (size_t i = 0; i < data.size() / sizeof(float); ++i) x[i] *= output_scale;
        }
        w.add_tensor(t.name, t.type, t.dims, data.data(), data.size());
      }
      w.write(copy);
    }
    std::filesystem::rename(copy, path);
  }
  test_util::Loaded l = test_util::load_gguf(path.string());
  std::filesystem::remove(path);
  return l;
}

decode::SamplerParams params(uint64_t seed) {
  decode::SamplerParams p;
  p.temperature = 0.03f;
  p.top_k = 8;
  p.seed = seed;
  return p;
}

const std::vector<int32_t> kPrompt = {1, 70, 71, 72, 70, 71};

// The processed distribution (Sampler::probabilities) after prompt + output, from the target's
// logits over an f32 cache (the engine's cache is f32 here too).
std::vector<decode::TokenProb> direct(const model::Model& m, const std::vector<int32_t>& output) {
  std::vector<int32_t> seq = kPrompt;
  seq.insert(seq.end(), output.begin(), output.end());
  const auto& c = m.config();
  kv::ContiguousKvCache kv(c.n_layers, int64_t(seq.size()), c.n_kv_heads, c.head_dim);
  std::vector<float> logits(size_t(c.vocab_size));
  ThreadPool pool(1);
  model::ForwardOptions opt;
  opt.matmul.batch_invariant = true;  // the engine's products, as it speculates with f32 weights
  m.forward(seq.data(), int64_t(seq.size()), 0, kv, 1, logits.data(), pool, opt);
  decode::Sampler s(params(0));
  std::vector<decode::TokenProb> p;
  s.probabilities(logits.data(), c.vocab_size, kPrompt, output, &p);
  return p;
}

// The exact joint distribution of the first three tokens under direct sampling.
std::map<Triple, double> exact_joint(const model::Model& m) {
  std::map<Triple, double> joint;
  for (const auto& a : direct(m, {}))
    for (const auto& b : direct(m, {a.token}))
      for (const auto& c : direct(m, {a.token, b.token}))
        joint[{a.token, b.token, c.token}] += a.prob * b.prob * c.prob;
  return joint;
}

struct Counts {
  std::map<Triple, int64_t> joint;
  int64_t proposed = 0, accepted = 0;
};

Counts sample_through_engine(const test_util::Loaded& target, const model::Model* draft) {
  EngineConfig c;
  c.threads = 1;  // microsecond steps: waking pool workers would cost more than the work
  c.kv = kv::KvCacheOptions{kv::KvType::F32};
  c.batch_invariant = true;
  // A wave of requests is admitted in one step: speculation stands aside while requests wait.
  c.scheduler.max_seqs = 512;
  c.scheduler.max_batch_tokens = 4096;
  c.spec.mode = draft ? SpecMode::Draft : SpecMode::Off;
  c.spec.draft = draft;
  c.spec.max_k = 2;
  c.spec.max_batch_tokens = 100000;  // every step speculates, however many sequences run
  c.spec.cost_aware = false;  // a draft as costly as the target would otherwise stop drafting
  Engine e(*target.model, *target.tok, c);
  Counts counts;
  constexpr int64_t kWave = 500;
  for (int64_t from = 0; from < kSamples; from += kWave) {
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (int64_t i = from; i < from + kWave; ++i) {
      GenerationRequest r;
      r.prompt = kPrompt;
      r.max_tokens = 3;
      r.ignore_eos = true;
      r.sampling = params(uint64_t(i) + 5000001);
      const auto s = e.submit(r);
      EXPECT_EQ(s.status, SubmitStatus::Accepted) << s.message;
      streams.push_back(s.stream);
    }
    for (auto& s : streams) {
      const test_util::Output o = test_util::collect(*s);
      EXPECT_EQ(o.tokens.size(), 3u);
      if (o.tokens.size() != 3) continue;
      ++counts.joint[{o.tokens[0], o.tokens[1], o.tokens[2]}];
      counts.proposed += o.last.spec_proposed;
      counts.accepted += o.last.spec_accepted;
    }
  }
  EXPECT_EQ(e.gauges().kv_blocks_used, 0);
  return counts;
}

testing::ChiSquare test_against(const std::map<Triple, double>& exact, const Counts& counts) {
  std::vector<int64_t> observed;
  std::vector<double> expected;
  for (const auto& [t, p] : exact) {
    const auto it = counts.joint.find(t);
    observed.push_back(it == counts.joint.end() ? 0 : it->second);
    expected.push_back(p);
  }
  int64_t outside = 0;  // outcomes direct sampling never produces
  for (const auto& [t, n] : counts.joint)
    if (!exact.count(t)) outside += n;
  observed.push_back(outside);
  expected.push_back(0);
  return testing::chi_square(observed, expected);
}

void check(const char* name, const test_util::Loaded& target, const model::Model* draft,
           double min_acceptance, double max_acceptance) {
  const auto exact = exact_joint(*target.model);
  const Counts counts = sample_through_engine(target, draft);
  const testing::ChiSquare r = test_against(exact, counts);
  const double acceptance = double(counts.accepted) / double(std::max<int64_t>(1, counts.proposed));
  std::printf(
      "%s draft: %zu outcomes, chi-square %.1f, df %lld, p = %.3f; %lld drafts, %.1f%% "
      "accepted\n",
      name, exact.size(), r.statistic, (long long)r.df, r.p_value, (long long)counts.proposed,
      100 * acceptance);
  EXPECT_EQ(r.impossible, 0);
  EXPECT_GT(r.df, 50);
  EXPECT_GT(r.p_value, 0.01);
  if (draft == nullptr) return;
  // Nearly every request speculated, and the draft does what its name says: mostly accepted or
  // mostly rejected (both paths are taken either way).
  EXPECT_GE(counts.proposed, kSamples);
  EXPECT_GT(acceptance, min_acceptance);
  EXPECT_LT(acceptance, max_acceptance);
}

// The control: plain sampling through the engine against the same exact joint.
TEST(SpeculativeDistribution, WithoutSpeculationTheEngineMatchesTheExactJoint) {
  const auto target = tiny(5, DType::F32);
  check("no", target, nullptr, 0, 0);
}

TEST(SpeculativeDistribution, GoodDraftKeepsTheTargetsJointOfThreeTokens) {
  const auto target = tiny(5, DType::F32);
  const auto good = tiny(5, DType::Q8_0);  // the same weights, rounded
  check("good", target, good.model.get(), 0.5, 0.999);
}

TEST(SpeculativeDistribution, BadDraftKeepsTheTargetsJointOfThreeTokens) {
  const auto target = tiny(5, DType::F32);
  // The target made unsure (logits scaled by 0.2): the same candidates, but its less likely ones
  // drawn far more often than the target would (an unrelated model would share no candidates
  // under top-k, so every draft would fall outside p and the residual would be p itself).
  const auto bad = tiny(5, DType::F32, 0.2f);
  check("bad", target, bad.model.get(), 0.05, 0.8);
}

}  // namespace
}  // namespace shrike::engine
