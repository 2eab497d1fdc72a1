// Qwen3, Gemma 2 and Gemma 3 folders as transformers writes them, built here from synth GGUFs by
// the test's own writer (the published configs' fields, Hugging Face tensor names, Gemma's norms
// stored as weight - 1): the loader reads the configuration the architecture implies, the folder
// gives the synth GGUF's logits bit for bit, `convert` writes a GGUF with llama.cpp's keys and
// names that gives them too, and `export-hf` writes a folder that reads back the same. Whether
// those logits are right is checked against llama.cpp (bench/experiments/arch_crosscheck.sh).
#include <gtest/gtest.h>

#include <cmath>

#include "gguf/gguf.h"
#include "hf_test_util.h"
#include "kv/contiguous_kv.h"
#include "model/hf_model.h"
#include "model/model.h"
#include "model/synth.h"
#include "run_shrike.h"
#include "tokenizer/hf_tokenizer.h"

// A named namespace: this file shares a unity build with hf_model_test.cc (whose environment
// removes the scratch folders).
namespace shrike::hf_arch_test {

using hftest::json;

constexpr int64_t kWindow = 4;  // shorter than the prompt below, so sliding layers mask

// The tests' shape: 4 query heads over 2 KV heads, f32 weights, a 320-token vocabulary.
model::SynthOptions small_shape(int64_t layers, uint64_t seed) {
  model::SynthOptions o;
  o.dim = 64;
  o.n_layers = layers;
  o.n_heads = 4;
  o.n_kv_heads = 2;
  o.ffn_dim = 96;
  o.vocab = 320;
  o.context_length = 64;
  o.type = DType::F32;
  o.seed = seed;
  return o;
}

std::string synth(const std::string& arch, int64_t layers) {
  const std::string path = hftest::scratch("synth_" + arch) + "/m.gguf";
  model::SynthOptions o = small_shape(layers, 13);
  o.arch = arch;
  o.head_dim = arch == "phi3" ? 0 : 32;  // != dim / heads, as in Qwen3 and Gemma
  o.tied_output = arch != "phi3";
  o.sliding_window = kWindow;
  if (arch == "gemma3") o.rope_linear_factor = 8;
  model::write_synth_model(o, path);
  return path;
}

// The fields of the published configs (Qwen3-0.6B, gemma-2-2b, gemma-3-1b-pt), shrunk.
json config_for(const std::string& arch, const model::ModelConfig& c) {
  json j = {{"hidden_size", c.dim},
            {"num_hidden_layers", c.n_layers},
            {"num_attention_heads", c.n_heads},
            {"num_key_value_heads", c.n_kv_heads},
            {"head_dim", c.head_dim},
            {"intermediate_size", c.ffn_dim},
            {"vocab_size", c.vocab_size},
            {"max_position_embeddings", c.context_length},
            {"rms_norm_eps", c.rms_eps},
            {"rope_theta", c.rope_theta},
            {"attention_bias", false},
            {"attention_dropout", 0.0},
            {"bos_token_id", 1},
            {"eos_token_id", 2},
            {"torch_dtype", "float32"}};
  if (arch == "phi3") {  // Phi-3-mini-4k-instruct's
    j.erase("head_dim");
    j.update({{"architectures", {"Phi3ForCausalLM"}},
              {"model_type", "phi3"},
              {"hidden_act", "silu"},
              {"tie_word_embeddings", false},
              {"sliding_window", kWindow},
              {"original_max_position_embeddings", c.context_length},
              {"rope_scaling", nullptr},
              {"resid_pdrop", 0.0},
              {"embd_pdrop", 0.0}});
  } else if (arch == "qwen3") {
    j.update({{"architectures", {"Qwen3ForCausalLM"}},
              {"model_type", "qwen3"},
              {"hidden_act", "silu"},
              {"tie_word_embeddings", true},
              {"use_sliding_window", false},
              {"sliding_window", nullptr},
              {"max_window_layers", 28},
              {"rope_scaling", nullptr}});
  } else {
    j.update({{"hidden_activation", "gelu_pytorch_tanh"},
              {"query_pre_attn_scalar", c.head_dim},
              {"sliding_window", kWindow},
              {"pad_token_id", 0}});
    if (arch == "gemma2") {
      j.update({{"architectures", {"Gemma2ForCausalLM"}},
                {"model_type", "gemma2"},
                {"hidden_act", "gelu_pytorch_tanh"},
                {"attn_logit_softcapping", 50.0},
                {"final_logit_softcapping", 30.0},
                {"cache_implementation", "hybrid"}});
    } else {
      j.update({{"architectures", {"Gemma3ForCausalLM"}},
                {"model_type", "gemma3_text"},
                {"attn_logit_softcapping", nullptr},
                {"final_logit_softcapping", nullptr},
                {"rope_local_base_freq", 10000.0},
                {"sliding_window_pattern", 6},
                {"rope_scaling", {{"factor", 8.0}, {"rope_type", "linear"}}}});
    }
  }
  return j;
}

// The test's own GGUF -> Hugging Face writer for these families (no rotary permutation: they
// are NeoX in both; Gemma's norms minus one).
std::string hf_folder(const std::string& arch, const std::string& gguf_path) {
  const std::string dir = hftest::scratch("hf_" + arch);
  const auto f = gguf::GgufFile::open(gguf_path);
  const model::ModelConfig c = model::config_from_gguf(f);
  hftest::write_text(dir + "/config.json", config_for(arch, c).dump(2));
  hftest::write_hf_tokenizer(tokenizer::vocab_from_gguf(f), dir, "{{ messages }}");
  const bool gemma = arch == "gemma2" || arch == "gemma3";
  const bool phi3 = arch == "phi3";
  safetensors::Writer w;
  auto take = [&](const std::string& g, const std::string& h) {
    const auto& t = f.tensor(g);
    std::vector<float> v(size_t(t.elements()));
    dequantize_row(t.type, t.data, v.data(), t.elements());
    if (gemma && g.ends_with("norm.weight"))
      for (float& x : v) x -= 1.0f;
    const std::vector<int64_t> shape =
        t.dims.size() == 2 ? std::vector<int64_t>{t.dims[1], t.dims[0]} : t.dims;
    w.add(h, DType::F32, shape, v.data(), v.size() * 4);
  };
  take("token_embd.weight", "model.embed_tokens.weight");
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string g = "blk." + std::to_string(l) + ".";
    const std::string h = "model.layers." + std::to_string(l) + ".";
    take(g + "attn_norm.weight", h + "input_layernorm.weight");
    if (phi3) {
      take(g + "attn_qkv.weight", h + "self_attn.qkv_proj.weight");
    } else {
      for (const char* p : {"q", "k", "v"})
        take(g + "attn_" + p + ".weight", h + "self_attn." + p + "_proj.weight");
    }
    take(g + "attn_output.weight", h + "self_attn.o_proj.weight");
    if (arch == "qwen3" || arch == "gemma3") {
      take(g + "attn_q_norm.weight", h + "self_attn.q_norm.weight");
      take(g + "attn_k_norm.weight", h + "self_attn.k_norm.weight");
    }
    if (gemma) {
      take(g + "post_attention_norm.weight", h + "post_attention_layernorm.weight");
      take(g + "ffn_norm.weight", h + "pre_feedforward_layernorm.weight");
      take(g + "post_ffw_norm.weight", h + "post_feedforward_layernorm.weight");
    } else {
      take(g + "ffn_norm.weight", h + "post_attention_layernorm.weight");
    }
    if (phi3) {
      take(g + "ffn_up.weight", h + "mlp.gate_up_proj.weight");
    } else {
      take(g + "ffn_gate.weight", h + "mlp.gate_proj.weight");
      take(g + "ffn_up.weight", h + "mlp.up_proj.weight");
    }
    take(g + "ffn_down.weight", h + "mlp.down_proj.weight");
  }
  take("output_norm.weight", "model.norm.weight");
  if (phi3) take("output.weight", "lm_head.weight");
  w.write(dir + "/model.safetensors");
  return dir;
}

std::vector<float> logits(const std::string& path) {
  const auto m = model::load_model(path);
  const std::vector<int32_t> prompt = {1, 300, 17, 42, 99, 260, 5, 311, 7, 8, 9, 10};
  ThreadPool pool(1);
  const auto& c = m->config();
  kv::ContiguousKvCache kv(c.n_layers, 16, c.n_kv_heads, c.head_dim);
  const int64_t n = int64_t(prompt.size());
  std::vector<float> out(size_t(n * c.vocab_size));
  m->forward(prompt.data(), n, 0, kv, n, out.data(), pool);
  return out;
}

std::string convert(const std::string& dir, const std::string& name) {
  const auto ck = model::HfCheckpoint::open(dir);
  const auto tok = tokenizer::load_hf_tokenizer(dir, ck.config().vocab_size);
  gguf::GgufWriter w;
  model::add_hf_model_to_gguf(ck, DType::F32, w);
  tokenizer::add_vocab_to_gguf(tok.vocab, tok.chat_template, w);
  const std::string out = hftest::scratch("conv_" + name) + "/out.gguf";
  w.write(out);
  return out;
}

void check_family(const std::string& arch, int64_t layers) {
  SCOPED_TRACE(arch);
  const std::string gguf = synth(arch, layers);
  const std::string dir = hf_folder(arch, gguf);
  const auto want = logits(gguf);
  EXPECT_EQ(logits(dir), want) << "the folder must give the GGUF's logits";
  const std::string conv = convert(dir, arch);
  EXPECT_EQ(logits(conv), want) << "the converted GGUF must too";
  const auto f = gguf::GgufFile::open(conv);
  EXPECT_EQ(f.get_string("general.architecture"), arch);
  const std::string exported = hftest::scratch("export_" + arch);
  model::write_hf_model(gguf::GgufFile::open(gguf), exported, DType::F32);
  EXPECT_EQ(logits(exported), want) << "export-hf must write a folder that reads back the same";
}

TEST(HfArch, Qwen3ReadsItsQkNormsAndRunsLikeItsGguf) {
  check_family("qwen3", 2);
  const auto c = model::HfCheckpoint::open(hf_folder("qwen3", synth("qwen3", 2))).config();
  EXPECT_EQ(c.architecture, "qwen3");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.add_bos);
  EXPECT_EQ(c.rope_layout, kernels::RopeLayout::NeoX);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.sliding_window, 0) << "use_sliding_window false";
}

TEST(HfArch, Gemma2ReadsWhatTheConfigAndArchitectureImply) {
  check_family("gemma2", 4);
  const auto c = model::HfCheckpoint::open(hf_folder("gemma2", synth("gemma2", 4))).config();
  EXPECT_EQ(c.architecture, "gemma2");
  EXPECT_TRUE(c.post_norms);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.ffn_activation, model::FfnActivation::GeluTanh);
  EXPECT_FLOAT_EQ(c.embedding_scale, 8.0f);
  EXPECT_FLOAT_EQ(c.attn_softcap, 50.0f);
  EXPECT_FLOAT_EQ(c.final_softcap, 30.0f);
  EXPECT_EQ(c.sliding_window, kWindow);
  EXPECT_TRUE(c.is_sliding(0));
  EXPECT_FALSE(c.is_sliding(1));
  EXPECT_TRUE(c.tied_output);
  // The GGUF holds 1 + the folder's norm weights, as llama.cpp's converter writes them.
  const std::string conv = convert(hf_folder("gemma2", synth("gemma2", 4)), "gemma2_norms");
  const auto f = gguf::GgufFile::open(conv);
  const auto& norm = f.tensor("blk.0.attn_norm.weight");
  const float* v = reinterpret_cast<const float*>(norm.data);
  EXPECT_GT(v[0], 0.7f);
  EXPECT_LT(v[0], 1.3f);
  EXPECT_EQ(f.get_uint("gemma2.attention.sliding_window"), uint64_t(kWindow));
  EXPECT_FLOAT_EQ(float(f.get_float("gemma2.attn_logit_softcapping")), 50.0f);
}

// A query_pre_attn_scalar llama.cpp's rule would not give (it keys the scale on the 27B depths)
// survives conversion under gemma2.attention.scale: the converted file runs like the folder.
TEST(HfArch, Gemma2QueryPreAttnScalarSurvivesConversion) {
  const std::string dir = hf_folder("gemma2", synth("gemma2", 4));
  json config = json::parse(hftest::read_text(dir + "/config.json"));
  config["query_pre_attn_scalar"] = 24;
  hftest::write_text(dir + "/config.json", config.dump());
  EXPECT_FLOAT_EQ(model::HfCheckpoint::open(dir).config().attention_scale, 1.0f / std::sqrt(24.0f));
  const std::string conv = convert(dir, "gemma2_scalar");
  EXPECT_FLOAT_EQ(float(gguf::GgufFile::open(conv).get_float("gemma2.attention.scale")),
                  1.0f / std::sqrt(24.0f));
  EXPECT_EQ(logits(conv), logits(dir));
  EXPECT_NE(logits(conv), logits(synth("gemma2", 4))) << "the scale must matter";
}

TEST(HfArch, Gemma3HasFiveSlidingLayersOfSixWithALocalRopeBase) {
  check_family("gemma3", 7);
  const auto c = model::HfCheckpoint::open(hf_folder("gemma3", synth("gemma3", 7))).config();
  EXPECT_EQ(c.architecture, "gemma3");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.post_norms);
  EXPECT_EQ(c.attn_softcap, 0.0f);
  EXPECT_FLOAT_EQ(c.rope_theta_local, 10000.0f);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 0.125f);
  for (int64_t l = 0; l < 7; ++l) EXPECT_EQ(c.is_sliding(l), l != 5) << l;
}

TEST(HfArch, Phi3ReadsItsFusedTensorsAndSlidesEveryLayer) {
  check_family("phi3", 2);
  const auto c = model::HfCheckpoint::open(hf_folder("phi3", synth("phi3", 2))).config();
  EXPECT_EQ(c.architecture, "phi3");
  EXPECT_TRUE(c.fused_qkv_ffn());
  EXPECT_EQ(c.rope_layout, kernels::RopeLayout::NeoX);
  EXPECT_EQ(c.sliding_window, kWindow);
  EXPECT_TRUE(c.is_sliding(0));
  EXPECT_TRUE(c.is_sliding(1));
  EXPECT_FALSE(c.tied_output);
  const auto m = model::load_model(hf_folder("phi3", synth("phi3", 2)));
  EXPECT_GT(m->weights().layers[0].wqkv.rows(), 0);
  EXPECT_EQ(m->weights().layers[0].w_gate_up.rows(), 2 * c.ffn_dim);
}

// Mistral's sliding_window (Mistral-7B-v0.1 has 4096) is honoured, not dropped: a window
// shorter than the prompt changes the logits, survives conversion, and a window wider than the
// prompt masks nothing.
TEST(HfArch, MistralSlidingWindowIsHonoured) {
  const model::SynthOptions o = small_shape(2, 3);
  const std::string gguf = hftest::scratch("mistral_synth") + "/m.gguf";
  model::write_synth_model(o, gguf);
  const auto plain = logits(gguf);
  hftest::HfOptions h;
  h.model_type = "mistral";
  h.extra_config = {{"sliding_window", kWindow}};
  const std::string dir = hftest::scratch("mistral_window");
  hftest::write_hf_from_gguf(gguf, dir, h);
  EXPECT_EQ(model::HfCheckpoint::open(dir).config().sliding_window, kWindow);
  EXPECT_NE(logits(dir), plain);
  // The window survives conversion (llama.attention.sliding_window) and export.
  EXPECT_EQ(logits(convert(dir, "mistral_window")), logits(dir));
  h.extra_config = {{"sliding_window", 1000}};
  const std::string wide = hftest::scratch("mistral_wide");
  hftest::write_hf_from_gguf(gguf, wide, h);
  EXPECT_EQ(logits(wide), plain) << "a window wider than the prompt masks nothing";
}

// The windows and caps change the logits (a forward pass that ignored them would not pass the
// tests above by accident): the same file with a key left out or widened.
TEST(HfArch, WindowsAndCapsMatter) {
  const std::string gguf = synth("gemma2", 4);
  const auto base = logits(gguf);
  const auto f = gguf::GgufFile::open(gguf);
  auto without = [&](const std::string& dropped, const std::string& name) {
    gguf::GgufWriter w;
    for (const std::string& key : f.keys())
      if (key != dropped) w.set_value(key, *f.find(key));
    if (dropped == "gemma2.attention.sliding_window")
      w.set_uint32(dropped, 1000);  // wider than the prompt
    for (const auto& t : f.tensors()) w.add_tensor(t.name, t.type, t.dims, t.data, t.bytes);
    const std::string path = hftest::scratch("variant_" + name) + "/m.gguf";
    w.write(path);
    return logits(path);
  };
  EXPECT_NE(without("gemma2.attention.sliding_window", "window"), base);
  EXPECT_NE(without("gemma2.attn_logit_softcapping", "attn_cap"), base);
  EXPECT_NE(without("gemma2.final_logit_softcapping", "final_cap"), base);
  EXPECT_EQ(without("general.name", "same"), base) << "the control: an unrelated key";
}

TEST(HfArch, UnsupportedVariantsAreRefusedByName) {
  const std::string dir = hf_folder("gemma3", synth("gemma3", 7));
  json config = json::parse(hftest::read_text(dir + "/config.json"));
  config["sliding_window_pattern"] = 4;
  hftest::write_text(dir + "/config.json", config.dump());
  try {
    model::HfCheckpoint::open(dir);
    FAIL() << "a gemma3 pattern llama.cpp cannot run was accepted";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("sliding_window_pattern 4"), std::string::npos)
        << e.what();
  }
  config["sliding_window_pattern"] = 6;
  config["architectures"] = {"Gemma3ForConditionalGeneration"};
  hftest::write_text(dir + "/config.json", config.dump());
  EXPECT_THROW(model::HfCheckpoint::open(dir), FileError);
  // The trainer's block is Llama's: distilling from a Gemma teacher is refused, not mangled.
  const std::string calib = hftest::scratch("calib") + "/c.jsonl";
  hftest::write_text(calib, R"({"text": "where is my order", "intent": "track_order"})"
                            "\n");
  const auto r = testing::run_shrike("prune " + hf_folder("gemma2", synth("gemma2", 4)) +
                                     " -o /dev/null --layers 1 --calib " + calib);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("cannot be trained, pruned or distilled"), std::string::npos) << r.err;
}

}  // namespace shrike::hf_arch_test
