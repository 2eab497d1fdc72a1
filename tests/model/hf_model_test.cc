// Hugging Face folders written from synth models: loaded directly they give the synth GGUF's logits
// bit for bit (so the q/k permutation is right); `convert` gives the same logits (exactly for a
// type the folder already has, within a stated tolerance for narrower types); the converted GGUF
// carries the tokenizer and chat template. Bad config.json / tensors give one-line FileErrors.
#include "model/hf_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "gguf/gguf.h"
#include "hf_test_util.h"
#include "kv/contiguous_kv.h"
#include "model/model.h"
#include "model/synth.h"
#include "run_shrike.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace shrike {
namespace {

using hftest::HfOptions;
using hftest::json;

::testing::Environment* const cleanup =
    ::testing::AddGlobalTestEnvironment(new hftest::ScratchCleanup);

// GQA (4 query heads over 2 kv heads) so both permutations are exercised; ffn a multiple of 32 so
// Q8_0 applies to every matrix.
std::string synth_gguf(const std::string& name, bool tied = false) {
  const std::string path = hftest::scratch("synth_" + name) + "/synth.gguf";
  model::SynthOptions o;
  o.dim = 64;
  o.n_layers = 2;
  o.n_heads = 4;
  o.n_kv_heads = 2;
  o.ffn_dim = 96;
  o.vocab = 320;
  o.context_length = 64;
  o.type = DType::F32;
  o.seed = 11;
  o.tied_output = tied;
  model::write_synth_model(o, path);
  return path;
}

std::string hf_dir(const std::string& name, const std::string& gguf, const HfOptions& o = {}) {
  const std::string dir = hftest::scratch("hf_" + name);
  hftest::write_hf_from_gguf(gguf, dir, o);
  return dir;
}

// Logits of every position of a fixed prompt.
std::vector<float> logits(const model::Model& m) {
  const std::vector<int32_t> prompt = {1, 300, 17, 42, 99, 260, 5, 311, 7, 8, 9, 10};
  ThreadPool pool(1);
  const auto& c = m.config();
  kv::ContiguousKvCache kv(c.n_layers, 16, c.n_kv_heads, c.head_dim);
  const int64_t n = int64_t(prompt.size());
  std::vector<float> out(size_t(n * c.vocab_size));
  m.forward(prompt.data(), n, 0, kv, n, out.data(), pool);
  return out;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

float max_abs(const std::vector<float>& a) {
  float m = 0;
  for (float x : a) m = std::max(m, std::fabs(x));
  return m;
}

std::string convert(const std::string& dir, DType type, const std::string& name) {
  const auto ck = model::HfCheckpoint::open(dir);
  const auto tok = tokenizer::load_hf_tokenizer(dir, ck.config().vocab_size);
  gguf::GgufWriter w;
  model::add_hf_model_to_gguf(ck, type, w);
  tokenizer::add_vocab_to_gguf(tok.vocab, tok.chat_template, w);
  const std::string out = hftest::scratch("conv_" + name) + "/out.gguf";
  w.write(out);
  return out;
}

std::vector<float> logits_of(const std::string& path) {
  return logits(*model::load_model(path));
}

TEST(HfModel, LoadsWithTheSynthGgufsLogitsBitForBit) {
  const std::string gguf = synth_gguf("exact");
  const std::string dir = hf_dir("exact", gguf);
  const auto m = model::load_model(dir);
  EXPECT_EQ(m->config().architecture, "llama");
  EXPECT_EQ(m->config().rope_layout, kernels::RopeLayout::Adjacent);
  EXPECT_EQ(m->config().n_kv_heads, 2);
  EXPECT_FALSE(m->config().tied_output);
  const auto want = logits_of(gguf);
  EXPECT_EQ(logits(*m), want);
  EXPECT_GT(max_abs(want), 0.1f);
}

TEST(HfModel, ConvertToF32GivesTheSameLogitsBitForBit) {
  const std::string gguf = synth_gguf("conv32");
  const std::string dir = hf_dir("conv32", gguf);
  const std::string out = convert(dir, DType::F32, "f32");
  EXPECT_EQ(logits_of(out), logits_of(gguf));
  const auto f = gguf::GgufFile::open(out);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_uint("general.file_type"), 0u);
  EXPECT_EQ(f.get_uint("llama.block_count"), 2u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(f.get_uint("llama.context_length"), 64u);
  EXPECT_EQ(f.tensor("blk.1.attn_k.weight").dims, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(f.tensor("blk.0.attn_norm.weight").type, DType::F32);
  // The permuted rows are the synth file's own rows.
  const auto original = gguf::GgufFile::open(gguf);
  const auto& a = original.tensor("blk.0.attn_q.weight");
  const auto& b = f.tensor("blk.0.attn_q.weight");
  ASSERT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(std::memcmp(a.data, b.data, a.bytes), 0);
}

TEST(HfModel, HalfPrecisionFoldersConvertBitForBitToTheirOwnType) {
  const std::string gguf = synth_gguf("half");
  for (DType t : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    HfOptions o;
    o.type = t;
    const std::string dir = hf_dir(std::string("half_") + std::string(dtype_name(t)), gguf, o);
    const auto direct = logits_of(dir);
    EXPECT_EQ(logits_of(convert(dir, t, std::string(dtype_name(t)))), direct);
    // Rounding the weights to 16 bits moves logits a little, no more.
    const auto exact = logits_of(gguf);
    EXPECT_LT(max_abs_diff(direct, exact), 0.02f * max_abs(exact));
  }
}

// Stated tolerances, relative to the largest logit: f16 weights 0.2%, bf16 2%, q8_0 3%.
TEST(HfModel, ConvertToNarrowerTypesStaysWithinTolerance) {
  const std::string gguf = synth_gguf("narrow");
  const std::string dir = hf_dir("narrow", gguf);
  const auto want = logits_of(dir);
  const float scale = max_abs(want);
  const std::pair<DType, float> cases[] = {
      {DType::F16, 0.002f}, {DType::BF16, 0.02f}, {DType::Q8_0, 0.03f}};
  for (auto [type, tol] : cases) {
    const std::string out =
        convert(dir, type, std::string("narrow_") + std::string(dtype_name(type)));
    const float d = max_abs_diff(logits_of(out), want);
    std::printf(
        "[ tolerance] convert --type %s: max |logit diff| %.2e (%.3f%% of max |logit| %.2f)\n",
        std::string(dtype_name(type)).c_str(), d, 100 * d / scale, scale);
    EXPECT_LT(d, tol * scale) << dtype_name(type);
    EXPECT_GT(d, 0.0f) << "the narrower type must change something";
    const auto f = gguf::GgufFile::open(out);
    EXPECT_EQ(f.tensor("blk.0.ffn_down.weight").type, type);
    EXPECT_EQ(f.tensor("output_norm.weight").type, DType::F32);
  }
}

TEST(HfModel, ShardedFolderEqualsSingleFile) {
  const std::string gguf = synth_gguf("shards");
  HfOptions o;
  o.shards = 3;
  const std::string dir = hf_dir("shards", gguf, o);
  ASSERT_TRUE(std::filesystem::exists(dir + "/model.safetensors.index.json"));
  ASSERT_TRUE(std::filesystem::exists(dir + "/model-00003-of-00003.safetensors"));
  EXPECT_EQ(logits_of(dir), logits_of(gguf));
}

TEST(HfModel, TiedEmbeddingsAndMistral) {
  const std::string gguf = synth_gguf("tied", /*tied=*/true);
  HfOptions o;
  o.model_type = "mistral";
  const std::string dir = hf_dir("tied", gguf, o);
  ASSERT_FALSE(model::HfCheckpoint::open(dir).find("output.weight"));
  const auto m = model::load_model(dir);
  EXPECT_TRUE(m->config().tied_output);
  EXPECT_EQ(logits(*m), logits_of(gguf));
  const std::string out = convert(dir, DType::F32, "tied");
  EXPECT_EQ(gguf::GgufFile::open(out).find_tensor("output.weight"), nullptr);
  EXPECT_EQ(gguf::GgufFile::open(out).get_string("general.architecture"), "llama");
  EXPECT_EQ(logits_of(out), logits_of(gguf));
}

// transformers runs llama and qwen2 with the same rotate_half RoPE, so the same Hugging Face
// weights (with zero biases) are the same function under either name. shrike loads qwen2 without
// permuting (NeoX kernel) and llama permuted (adjacent kernel): agreement checks both paths.
TEST(HfModel, Qwen2WithZeroBiasesMatchesLlama) {
  const std::string gguf = synth_gguf("qwen2");
  HfOptions o;
  o.model_type = "qwen2";
  const std::string dir = hf_dir("qwen2", gguf, o);
  const auto m = model::load_model(dir);
  EXPECT_EQ(m->config().architecture, "qwen2");
  EXPECT_EQ(m->config().rope_layout, kernels::RopeLayout::NeoX);
  EXPECT_TRUE(m->config().qkv_bias);
  const auto want = logits_of(gguf);
  EXPECT_LT(max_abs_diff(logits(*m), want), 1e-4f * max_abs(want));
}

TEST(HfModel, Qwen2WithBiasesConvertsBitForBit) {
  const std::string gguf = synth_gguf("qwen2b");
  HfOptions o;
  o.model_type = "qwen2";
  o.bias = 0.5f;
  const std::string dir = hf_dir("qwen2b", gguf, o);
  const auto direct = logits_of(dir);
  EXPECT_GT(max_abs_diff(direct, logits_of(gguf)), 1e-3f) << "biases must matter";
  const std::string out = convert(dir, DType::F32, "qwen2b");
  EXPECT_EQ(logits_of(out), direct);
  const auto f = gguf::GgufFile::open(out);
  EXPECT_EQ(f.get_string("general.architecture"), "qwen2");
  EXPECT_EQ(f.get_uint("qwen2.embedding_length"), 64u);
  EXPECT_NE(f.find_tensor("blk.1.attn_v.bias"), nullptr);
}

TEST(HfModel, Llama3RopeScalingBecomesRopeFreqs) {
  const std::string gguf = synth_gguf("rope");
  HfOptions o;
  o.extra_config = {{"rope_theta", 500000.0},
                    {"rope_scaling",
                     {{"rope_type", "llama3"},
                      {"factor", 8.0},
                      {"low_freq_factor", 1.0},
                      {"high_freq_factor", 4.0},
                      {"original_max_position_embeddings", 8}}}};
  const std::string dir = hf_dir("rope", gguf, o);
  const auto ck = model::HfCheckpoint::open(dir);
  EXPECT_EQ(ck.config().rope_freq_factors, model::llama3_rope_factors(16, 500000.0f, 8, 1, 4, 8));
  EXPECT_EQ(ck.config().rope_freq_factors.size(), 8u);
  const auto direct = logits_of(dir);
  const std::string out = convert(dir, DType::F32, "rope");
  EXPECT_EQ(gguf::GgufFile::open(out).tensor("rope_freqs.weight").dims, std::vector<int64_t>{8});
  EXPECT_EQ(logits_of(out), direct);

  o.extra_config.erase("rope_scaling");
  EXPECT_NE(logits_of(hf_dir("norope", gguf, o)), direct) << "the scaling must change something";
}

TEST(HfModel, ConvertedGgufCarriesTheTokenizerAndChatTemplate) {
  const std::string gguf = synth_gguf("tok");
  HfOptions o;
  o.chat_template = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}";
  const std::string dir = hf_dir("tok", gguf, o);
  const std::string out = convert(dir, DType::F16, "tok");
  const auto f = gguf::GgufFile::open(out);
  EXPECT_EQ(f.get_string("tokenizer.chat_template"), o.chat_template);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.get_uint("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(f.get_uint("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_bos_token"));

  // Same ids from the synth GGUF's own vocabulary, the folder and the converted file.
  const tokenizer::Tokenizer original(tokenizer::vocab_from_gguf(gguf::GgufFile::open(gguf)));
  const tokenizer::Tokenizer from_dir(tokenizer::load_hf_tokenizer(dir).vocab);
  const tokenizer::Tokenizer converted(tokenizer::vocab_from_gguf(f));
  EXPECT_EQ(converted.vocab().pieces, original.vocab().pieces);
  EXPECT_EQ(converted.vocab().types, original.vocab().types);
  for (const char* text : {"hello world", " abc def  ghi", "zzz\nq\xC3\xA9", "", "<s>ab</s>"}) {
    const auto want = original.encode(text, true);
    EXPECT_EQ(from_dir.encode(text, true), want) << text;
    EXPECT_EQ(converted.encode(text, true), want) << text;
  }
}

// ---- bad folders ----

void expect_load_error(const std::string& dir, const std::string& file, const std::string& phrase) {
  try {
    model::load_model(dir);
    FAIL() << "loaded " << dir << " without error; expected: " << phrase;
  } catch (const FileError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(file), std::string::npos) << msg;
    EXPECT_NE(msg.find(phrase), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

class HfBadFolder : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gguf_ = new std::string(synth_gguf("bad")); }
  static void TearDownTestSuite() { delete gguf_; }
  // A good folder whose config.json gets `edit` applied.
  std::string folder(const std::string& name, const std::function<void(json&)>& edit = {}) {
    const std::string dir = hf_dir("bad_" + name, *gguf_);
    json c = json::parse(hftest::read_text(dir + "/config.json"));
    if (edit) edit(c);
    hftest::write_text(dir + "/config.json", c.dump());
    return dir;
  }
  static std::string* gguf_;
};
std::string* HfBadFolder::gguf_ = nullptr;

TEST_F(HfBadFolder, ConfigFields) {
  expect_load_error(folder("nohidden", [](json& c) { c.erase("hidden_size"); }), "config.json",
                    "'hidden_size' is missing");
  expect_load_error(folder("strlayers", [](json& c) { c["num_hidden_layers"] = "2"; }),
                    "config.json", "'num_hidden_layers' is string, expected an integer");
  expect_load_error(folder("neg", [](json& c) { c["num_attention_heads"] = -4; }), "config.json",
                    "'num_attention_heads' is -4");
  expect_load_error(folder("eps", [](json& c) { c["rms_norm_eps"] = "small"; }), "config.json",
                    "'rms_norm_eps' is string, expected a number");
  expect_load_error(folder("arch", [](json& c) { c["architectures"] = {"GPT2LMHeadModel"}; }),
                    "config.json", "unsupported architecture 'GPT2LMHeadModel'");
  expect_load_error(folder("dynamic",
                           [](json& c) {
                             c["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
                           }),
                    "config.json", "unsupported rope_scaling type 'dynamic'");
  expect_load_error(folder("yarn_beta",
                           [](json& c) {
                             c["rope_scaling"] = {{"type", "yarn"},
                                                  {"factor", 4.0},
                                                  {"original_max_position_embeddings", 32},
                                                  {"beta_fast", 16}};
                           }),
                    "config.json", "beta_fast != 32");
  expect_load_error(folder("longrope_short",
                           [](json& c) {
                             c["original_max_position_embeddings"] = 32;
                             c["rope_scaling"] = {{"type", "longrope"},
                                                  {"short_factor", {1.0, 2.0}},
                                                  {"long_factor", {1.0, 2.0}}};
                           }),
                    "config.json", "must be a list of");
  expect_load_error(folder("vocab", [](json& c) { c["vocab_size"] = 999; }), "config.json",
                    "vocab_size is 999 but model.embed_tokens.weight has 320 rows");
  expect_load_error(folder("heads", [](json& c) { c["num_key_value_heads"] = 3; }), "config.json",
                    "kv head count 3");
  const std::string dir = folder("notjson");
  hftest::write_text(dir + "/config.json", "{\"hidden_size\": 64,");
  expect_load_error(dir, "config.json", "not valid JSON");
  std::filesystem::remove(dir + "/config.json");
  expect_load_error(dir, "config.json", "cannot open");
}

TEST_F(HfBadFolder, TensorShapeDtypeAndPresence) {
  // More heads than the weights were written for: q_proj has the wrong shape.
  expect_load_error(folder("shape",
                           [](json& c) {
                             c["num_attention_heads"] = 8;
                             c["head_dim"] = 16;
                           }),
                    "model.safetensors",
                    "tensor 'model.layers.0.self_attn.q_proj.weight' has shape [64, 64], expected "
                    "[128, 64]");
  expect_load_error(folder("tied", [](json& c) { c["num_hidden_layers"] = 3; }),
                    "model.safetensors", "missing tensor 'model.layers.2.input_layernorm.weight'");

  // An integer tensor where a weight belongs.
  const std::string dir = folder("dtype");
  auto f = safetensors::SafetensorsFile::open(dir + "/model.safetensors");
  safetensors::Writer w;
  for (const auto& t : f.tensors())
    if (t.name != "model.norm.weight") w.add(t.name, *t.type, t.shape, t.data, t.bytes);
  w.write(dir + "/model.safetensors.tmp");
  std::string bytes = hftest::read_text(dir + "/model.safetensors.tmp");
  // Append model.norm.weight as I32 by rewriting the header by hand.
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | uint8_t(bytes[size_t(i)]);
  json header = json::parse(bytes.substr(8, n));
  std::string data = bytes.substr(8 + n);
  header["model.norm.weight"] = {
      {"dtype", "I32"}, {"shape", {64}}, {"data_offsets", {data.size(), data.size() + 256}}};
  data.append(256, '\0');
  std::string text = header.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char(uint64_t(text.size()) >> (8 * i));
  hftest::write_text(dir + "/model.safetensors", out + text + data);
  expect_load_error(dir, "model.safetensors",
                    "tensor 'model.norm.weight' has dtype I32 (supported: F32, F16, BF16)");
}

TEST_F(HfBadFolder, DamagedSafetensorsNamesTheFile) {
  const std::string dir = folder("damaged");
  std::string bytes = hftest::read_text(dir + "/model.safetensors");
  bytes.resize(bytes.size() - 4);
  hftest::write_text(dir + "/model.safetensors", bytes);
  expect_load_error(dir, "model.safetensors", "run past the end of the data");
}

// ---- the command line ----

TEST(HfCli, ConvertThenGenerate) {
  const std::string gguf = synth_gguf("cli");
  const std::string dir = hf_dir("cli", gguf);
  const std::string out = hftest::scratch("cli_out") + "/m.gguf";
  auto r = testing::run_shrike("convert " + dir + " -o " + out + " --type q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("wrote " + out), std::string::npos) << r.err;
  EXPECT_EQ(gguf::GgufFile::open(out).tensor("blk.0.attn_q.weight").type, DType::Q8_0);

  // generate straight from the folder and from the f32 conversion: the same greedy ids.
  const std::string out32 = hftest::scratch("cli_out32") + "/m.gguf";
  ASSERT_EQ(testing::run_shrike("convert " + dir + " -o " + out32 + " --type f32").exit_code, 0);
  const std::string args = " -p 'once upon a time' -n 8 --temp 0 --ids -t 1";
  const auto from_dir = testing::run_shrike("generate -m " + dir + args);
  const auto from_gguf = testing::run_shrike("generate -m " + out32 + args);
  ASSERT_EQ(from_dir.exit_code, 0) << from_dir.err;
  ASSERT_EQ(from_gguf.exit_code, 0) << from_gguf.err;
  EXPECT_FALSE(from_dir.out.empty());
  EXPECT_EQ(from_dir.out, from_gguf.out);
}

TEST(HfCli, ConvertErrorsExitWith2AndNameTheFile) {
  const std::string missing = hftest::scratch("cli_missing") + "/nothing";
  auto r = testing::run_shrike("convert " + missing + " -o /dev/null");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;

  const std::string dir = hf_dir("cli_notok", synth_gguf("cli_notok"));
  std::filesystem::remove(dir + "/tokenizer.json");
  r = testing::run_shrike("convert " + dir + " -o " + dir + "/x.gguf");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("tokenizer.json"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.gguf"));

  EXPECT_EQ(testing::run_shrike("convert " + dir + " -o x.gguf --type q4_0").exit_code, 1);
}

}  // namespace
}  // namespace shrike
