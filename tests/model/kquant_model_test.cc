// A whole model stored in k-quants (every matrix and the token embedding Q4_K, Q5_K or Q6_K)
// loads and runs: its next-token distributions stay close to those of the same random weights
// in f32, closer with more bits. (The layouts themselves are checked against llama.cpp on the
// same files by bench/experiments/kquant_crosscheck.sh.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kv/contiguous_kv.h"
#include "model/model.h"
#include "model/synth.h"

namespace shrike {
namespace {

// bf16_dot: the model is loaded with kernels::set_bf16_dot on (F16 / BF16 weights as BF16 pairs).
std::vector<float> kquant_model_logits(DType type, int64_t* vocab, bool bf16_dot = false) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("shrike_kquant_" + std::to_string(getpid()) + "_" +
                                                 std::string(dtype_name(type)) + ".gguf"))
          .string();
  model::SynthOptions o;
  o.dim = 256;
  o.n_layers = 2;
  o.n_heads = 4;
  o.n_kv_heads = 2;
  o.ffn_dim = 512;
  o.vocab = 512;
  o.context_length = 64;
  o.type = type;
  o.seed = 5;
  model::write_synth_model(o, path);
  kernels::set_bf16_dot(bf16_dot);
  const auto m = model::load_model(path);
  kernels::set_bf16_dot(false);
  std::filesystem::remove(path);
  const auto& c = m->config();
  const std::vector<int32_t> prompt = {1, 300, 17, 42, 99, 260, 5, 311, 7, 8, 9, 10, 400, 77};
  const int64_t n = int64_t(prompt.size());
  ThreadPool pool(2);
  kv::ContiguousKvCache kv(c.n_layers, n, c.n_kv_heads, c.head_dim);
  std::vector<float> out(size_t(n * c.vocab_size));
  m->forward(prompt.data(), n, 0, kv, n, out.data(), pool);
  *vocab = c.vocab_size;
  return out;
}

// Mean KL(p || q) over positions of the softmaxes of two logit arrays.
double mean_kl(const std::vector<float>& p, const std::vector<float>& q, int64_t v) {
  const int64_t n = int64_t(p.size()) / v;
  double kl = 0;
  for (int64_t t = 0; t < n; ++t) {
    auto log_norm = [&](const std::vector<float>& x) {
      double mx = -1e30, s = 0;
      for (int64_t i = 0; i < v; ++i) mx = std::max(mx, double(x[size_t(t * v + i)]));
      for (int64_t i = 0; i < v; ++i) s += std::exp(double(x[size_t(t * v + i)]) - mx);
      return mx + std::log(s);
    };
    const double lp = log_norm(p), lq = log_norm(q);
    for (int64_t i = 0; i < v; ++i) {
      const double a = double(p[size_t(t * v + i)]) - lp, b = double(q[size_t(t * v + i)]) - lq;
      kl += std::exp(a) * (a - b);
    }
  }
  return kl / double(n);
}

TEST(KQuantModel, RunsCloseToF32AndCloserWithMoreBits) {
  int64_t v = 0;
  const std::vector<float> ref = kquant_model_logits(DType::F32, &v);
  double spread = 0;
  for (float x : ref) spread = std::max(spread, double(std::fabs(x)));
  ASSERT_GT(spread, 0.01) << "logits should not be trivially zero";
  double kl[3];
  int i = 0;
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    int64_t vt = 0;
    const std::vector<float> got = kquant_model_logits(t, &vt);
    ASSERT_EQ(vt, v);
    ASSERT_EQ(got.size(), ref.size());
    kl[i] = mean_kl(ref, got, v);
    EXPECT_LT(kl[i], 0.01) << dtype_name(t);
    EXPECT_GT(kl[i], 0.0) << dtype_name(t) << ": a quantised model cannot be exact";
    ++i;
  }
  EXPECT_LT(kl[1], kl[0]);
  EXPECT_LT(kl[2], kl[1]);
}

// The whole forward pass (fused Q/K/V and gate/up stacks included) on BF16-pair matrices: close
// to the exact F16 products, and not bit for bit (the flag reached the matrices).
TEST(Bf16DotModel, AnF16ModelRunsCloseToItsExactProducts) {
  if (!kernels::bf16_dot_supported())
    GTEST_SKIP() << "this CPU has no AVX512_BF16: the BF16 dot-product path cannot run here";
  int64_t v = 0, vb = 0;
  const std::vector<float> exact = kquant_model_logits(DType::F16, &v);
  const std::vector<float> pairs = kquant_model_logits(DType::F16, &vb, true);
  ASSERT_EQ(vb, v);
  ASSERT_EQ(pairs.size(), exact.size());
  const double kl = mean_kl(exact, pairs, v);
  EXPECT_LT(kl, 1e-3);
  EXPECT_GT(kl, 0.0) << "the logits are bit for bit the exact ones: were the pairs used?";
}

}  // namespace
}  // namespace shrike
