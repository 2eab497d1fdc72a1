// Planted outlier key channels: the full-precision model computes the same logits, and an int8
// KV cache (one scale per position and head, set by the outlier pair) loses far more than on the
// original model, which is what the tool is for; bad arguments and files are errors.
#include "tools/key_outliers.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "core/file_buffer.h"
#include "core/thread_pool.h"
#include "kv/contiguous_kv.h"
#include "model/model.h"
#include "model/synth.h"
#include "shared_data.h"

namespace shrike::tools {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("shrike_key_outliers_" + std::to_string(getpid()) + "_" + name))
      .string();
}

std::string synth_f32(const std::string& path) {
  model::SynthOptions o;
  o.dim = 64;
  o.n_layers = 2;
  o.n_heads = 4;
  o.n_kv_heads = 2;
  o.ffn_dim = 96;
  o.vocab = 300;
  o.context_length = 256;
  o.type = DType::F32;
  o.seed = 4;
  model::write_synth_model(o, path);
  return path;
}

// Logits of every position of a fixed random prompt, run token by token through a cache of `type`.
std::vector<float> logits(const model::Model& m, kv::KvType type) {
  const model::ModelConfig& c = m.config();
  const int64_t n = 120;
  kv::KvCacheOptions o;
  o.type = type;
  kv::ContiguousKvCache kv(c.kv_dims(), n, o);
  ThreadPool pool(1);
  std::mt19937 rng(11);
  std::vector<float> all(size_t(n * c.vocab_size));
  for (int64_t p = 0; p < n; ++p) {
    const int32_t t = std::uniform_int_distribution<int32_t>(3, int32_t(c.vocab_size) - 1)(rng);
    m.forward(&t, 1, p, kv, 1, all.data() + p * c.vocab_size, pool);
  }
  return all;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, double(std::fabs(a[i] - b[i])));
  return d;
}

double rms_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i] - b[i]) * double(a[i] - b[i]);
  return std::sqrt(s / double(a.size()));
}

// stories260K (trained, so its attention is sharp, unlike a random model's): planted x64, the f32
// logits stay the same and an int8 cache's error grows by more than 8x (14.6x here).
TEST(KeyOutliers, SameFunctionAtFullPrecisionAndAHarderInt8Cache) {
  SHRIKE_REQUIRE_SHARED("reference/stories260K/stories260K.gguf");
  const std::string in = testing::shared_dir() + "/reference/stories260K/stories260K.gguf";
  const std::string out = temp_path("planted.gguf");
  plant_key_outliers(in, out, 64.0);
  const auto original = model::load_model(in), planted = model::load_model(out);
  std::filesystem::remove(out);
  const auto ref = logits(*original, kv::KvType::F32);
  const auto planted_f32 = logits(*planted, kv::KvType::F32);
  double scale = 0;
  for (float x : ref) scale = std::max(scale, double(std::fabs(x)));
  EXPECT_LT(max_abs_diff(ref, planted_f32), 1e-4 * scale);

  const double original_int8 = rms_diff(ref, logits(*original, kv::KvType::Int8));
  const double planted_int8 = rms_diff(planted_f32, logits(*planted, kv::KvType::Int8));
  EXPECT_GT(planted_int8, 8 * original_int8)
      << "original int8 error " << original_int8 << ", planted " << planted_int8;
}

TEST(KeyOutliers, BadArgumentsAndFilesAreErrors) {
  const std::string in = synth_f32(temp_path("in2.gguf")), out = temp_path("out2.gguf");
  EXPECT_THROW(plant_key_outliers(in, out, 0.0), std::invalid_argument);
  EXPECT_THROW(plant_key_outliers(in, out, 8.0, 8), std::invalid_argument);  // head_dim 16: 8 pairs
  EXPECT_THROW(plant_key_outliers(temp_path("missing.gguf"), out, 8.0), FileError);
  model::SynthOptions o;
  o.dim = 64;
  o.n_layers = 1;
  o.n_heads = 4;
  o.n_kv_heads = 2;
  o.ffn_dim = 64;
  o.vocab = 300;
  o.type = DType::Q8_0;
  const std::string q8 = temp_path("q8.gguf");
  model::write_synth_model(o, q8);
  EXPECT_THROW(plant_key_outliers(q8, out, 8.0), std::invalid_argument);
  EXPECT_FALSE(std::filesystem::exists(out));
  for (const auto& p : {in, q8}) std::filesystem::remove(p);
}

}  // namespace
}  // namespace shrike::tools
