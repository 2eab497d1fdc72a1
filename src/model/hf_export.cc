// GGUF model -> Hugging Face folder (config.json + model.safetensors): the inverse of
// HfCheckpoint, so that HfCheckpoint::open of the result gives the GGUF's configuration and
// weights back (bit for bit at F32, or when the GGUF already holds `type`).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "gguf/gguf.h"
#include "model/hf_model.h"
#include "model/model.h"
#include "safetensors/safetensors.h"

namespace shrike::model {
namespace {

using nlohmann::json;

struct Llama3Scaling {
  double factor, low, high;
  int64_t original;
};

// The llama3 rope_scaling that gives exactly these per-frequency divisors. GGUF keeps only the
// divisors (rope_freqs.weight); config.json wants the parameters, so the published settings
// (factor = the largest divisor; low/high frequency factors and original context among the
// values Meta's checkpoints use and their neighbours) are tried until one reproduces every
// divisor.
std::optional<Llama3Scaling> fit_llama3(const ModelConfig& c) {
  const std::vector<float>& f = c.rope_freq_factors;
  const double factor = *std::max_element(f.begin(), f.end());
  for (double low : {1.0, 0.5, 2.0})
    for (double high : {4.0, 2.0, 8.0, 1.0})
      for (int64_t original = 16; original <= (int64_t(1) << 22); original *= 2) {
        if (high <= low) continue;
        const auto g = llama3_rope_factors(c.rope_dims, c.rope_theta, float(factor), float(low),
                                           float(high), original);
        bool same = true;
        for (size_t i = 0; i < f.size() && same; ++i)
          same = std::fabs(g[i] - f[i]) <= 1e-6f * std::max(1.0f, std::fabs(f[i]));
        if (same) return Llama3Scaling{factor, low, high, original};
      }
  return std::nullopt;
}

// The shortest decimal that reads back as the same float (1e-05, not 9.999999747378752e-06).
double shortest(float x) {
  for (int digits = 6; digits < 9; ++digits) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*g", digits, double(x));
    if (std::strtof(buf, nullptr) == x) return std::strtod(buf, nullptr);
  }
  return double(x);
}

// Qwen2 in Hugging Face terms: a qwen2 GGUF, or a llama GGUF with q/k/v biases (what
// train::save_model writes for a Qwen2 model pruned to n_heads * head_dim != dim, and the only
// llama-with-biases transformers has without an o_proj bias).
bool hf_qwen2(const ModelConfig& c) {
  return c.architecture == "qwen2" || c.qkv_bias;
}

bool gemma_arch(const ModelConfig& c) {
  return c.architecture == "gemma2" || c.architecture == "gemma3";
}

// transformers' class and model_type for the configuration.
std::pair<const char*, const char*> hf_class(const ModelConfig& c) {
  if (c.architecture == "qwen3") return {"Qwen3ForCausalLM", "qwen3"};
  if (c.architecture == "gemma2") return {"Gemma2ForCausalLM", "gemma2"};
  if (c.architecture == "gemma3") return {"Gemma3ForCausalLM", "gemma3_text"};
  if (c.architecture == "phi3") return {"Phi3ForCausalLM", "phi3"};
  if (c.architecture == "llama" && c.sliding_window > 0 && !c.qkv_bias)
    return {"MistralForCausalLM", "mistral"};
  if (hf_qwen2(c)) return {"Qwen2ForCausalLM", "qwen2"};
  return {"LlamaForCausalLM", "llama"};
}

json config_json(const ModelConfig& c, DType type, const std::string& path) {
  const bool qwen2 = hf_qwen2(c) && (c.architecture == "qwen2" || c.architecture == "llama");
  const auto [cls, model_type] = hf_class(c);
  json j = {{"architectures", {cls}},
            {"model_type", model_type},
            {"hidden_size", c.dim},
            {"intermediate_size", c.ffn_dim},
            {"num_hidden_layers", c.n_layers},
            {"num_attention_heads", c.n_heads},
            {"num_key_value_heads", c.n_kv_heads},
            {"max_position_embeddings", c.context_length},
            {"rms_norm_eps", shortest(c.rms_eps)},
            {"rope_theta", shortest(c.rope_theta)},
            {"tie_word_embeddings", c.tied_output},
            {"vocab_size", c.vocab_size},
            {"bos_token_id", c.bos_id},
            {"eos_token_id", c.eos_id},
            {"hidden_act", "silu"},
            {"torch_dtype", type == DType::BF16  ? "bfloat16"
                            : type == DType::F16 ? "float16"
                                                 : "float32"}};
  if (c.head_dim * c.n_heads != c.dim) j["head_dim"] = c.head_dim;  // e.g. after head pruning
  if (c.architecture == "qwen3") {  // the fields of Qwen3's published configs
    j["head_dim"] = c.head_dim;
    j["attention_bias"] = false;
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["rope_scaling"] = nullptr;
  } else if (gemma_arch(c)) {  // and of Gemma 2's and Gemma 3's
    j.erase("hidden_act");
    j["hidden_activation"] = "gelu_pytorch_tanh";
    j["head_dim"] = c.head_dim;
    j["attention_bias"] = false;
    const float scale = c.attention_scale_or_default();
    j["query_pre_attn_scalar"] = std::lround(1.0 / (double(scale) * double(scale)));
    j["sliding_window"] = c.sliding_window;
    j["attn_logit_softcapping"] = c.attn_softcap > 0 ? json(shortest(c.attn_softcap)) : json();
    j["final_logit_softcapping"] = c.final_softcap > 0 ? json(shortest(c.final_softcap)) : json();
    if (c.architecture == "gemma3") {
      j["rope_local_base_freq"] = shortest(c.rope_theta_local);
      j["sliding_window_pattern"] = c.sliding_pattern;
      j["rope_scaling"] =
          c.rope_freq_scale != 1.0f
              ? json{{"rope_type", "linear"}, {"factor", shortest(1.0f / c.rope_freq_scale)}}
              : json();
    }
  } else if (qwen2) {
    j["use_sliding_window"] = false;
  } else {
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
  }
  if (c.rope_yarn) {
    j["rope_scaling"] = {{"rope_type", "yarn"},
                         {"factor", shortest(1.0f / c.rope_freq_scale)},
                         {"original_max_position_embeddings", c.rope_original_context}};
    if (c.rope_attn_factor != 1.0f)
      j["rope_scaling"]["attention_factor"] =
          shortest(c.rope_attn_factor * (0.1f * std::log(1.0f / c.rope_freq_scale) + 1.0f));
  } else if (c.rope_freq_scale != 1.0f && c.architecture != "gemma3") {
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", shortest(1.0f / c.rope_freq_scale)}};
  }
  if (c.sliding_window > 0 && !gemma_arch(c)) {
    j["sliding_window"] = c.sliding_window;
    j["use_sliding_window"] = true;
  }
  if (!c.rope_long_factors.empty()) {
    auto list = [](const std::vector<float>& v) {
      json a = json::array();
      for (float x : v) a.push_back(shortest(x));
      return a;
    };
    j["original_max_position_embeddings"] = c.rope_original_context;
    j["rope_scaling"] = {{"type", "longrope"},
                         {"short_factor", list(c.rope_freq_factors)},
                         {"long_factor", list(c.rope_long_factors)},
                         {"attention_factor", shortest(c.rope_attn_factor)}};
  } else if (!c.rope_freq_factors.empty()) {
    const auto s = fit_llama3(c);
    if (!s)
      throw FileError(path +
                      ": rope_freqs.weight matches no llama3 rope_scaling, so config.json "
                      "cannot describe it");
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", s->factor},
                         {"low_freq_factor", s->low},
                         {"high_freq_factor", s->high},
                         {"original_max_position_embeddings", s->original}};
  }
  return j;
}

// Hugging Face's name for a GGUF tensor, and for q/k of llama the heads to un-permute ("" for a
// tensor config.json carries instead, such as rope_freqs). minus_one: a Gemma norm, stored by
// Hugging Face as weight - 1.
std::string hf_name(const std::string& name, const ModelConfig& c, int64_t& unpermute_heads,
                    bool& minus_one) {
  unpermute_heads = 0;
  minus_one = gemma_arch(c) && name.ends_with("norm.weight");
  if (name == "token_embd.weight") return "model.embed_tokens.weight";
  if (name == "output_norm.weight") return "model.norm.weight";
  if (name == "output.weight") return "lm_head.weight";
  if (!name.starts_with("blk.")) return "";
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos) return "";
  const std::string layer = name.substr(4, dot - 4), rest = name.substr(dot + 1);
  const std::string h = "model.layers." + layer + ".";
  // GGUF llama rows are in adjacent-pair order, Hugging Face's (both families) in halves.
  const bool llama = c.architecture == "llama";
  if (rest == "attn_q.weight" || rest == "attn_q.bias") unpermute_heads = llama ? c.n_heads : 0;
  if (rest == "attn_k.weight" || rest == "attn_k.bias") unpermute_heads = llama ? c.n_kv_heads : 0;
  static const std::pair<const char*, const char*> kNames[] = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_q.bias", "self_attn.q_proj.bias"},
      {"attn_k.bias", "self_attn.k_proj.bias"},
      {"attn_v.bias", "self_attn.v_proj.bias"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"attn_qkv.weight", "self_attn.qkv_proj.weight"},
      {"attn_q_norm.weight", "self_attn.q_norm.weight"},
      {"attn_k_norm.weight", "self_attn.k_norm.weight"},
      {"post_attention_norm.weight", "post_attention_layernorm.weight"},
      {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"}};
  if (rest == "ffn_up.weight" && c.fused_qkv_ffn()) return h + "mlp.gate_up_proj.weight";
  if (rest == "ffn_norm.weight")  // Gemma's FFN input norm; Llama's post-attention one
    return h +
           (gemma_arch(c) ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight");
  for (const auto& [g, hf] : kNames)
    if (rest == g) return h + hf;
  return "";
}

// GGUF rows (adjacent rotary pairs) back to Hugging Face's half-split order per head: the inverse
// of llama.cpp's permute() and of HfCheckpoint::data().
std::vector<float> unpermute(const std::vector<float>& w, int64_t rows, int64_t cols,
                             int64_t heads) {
  std::vector<float> out(w.size());
  const int64_t per_head = rows / heads, half = per_head / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j)
        std::copy_n(&w[size_t((h * per_head + 2 * i + j) * cols)], cols,
                    &out[size_t((h * per_head + j * half + i) * cols)]);
  return out;
}

}  // namespace

void write_hf_model(const gguf::GgufFile& f, const std::string& dir, DType type) {
  if (type != DType::F32 && type != DType::F16 && type != DType::BF16)
    throw std::invalid_argument("export: Hugging Face weights are f32, f16 or bf16, not " +
                                std::string(dtype_name(type)));
  const ModelConfig c = config_from_gguf(f);
  if (c.rope_dims != c.head_dim)
    throw FileError(f.path() + ": partial rotary embeddings have no Hugging Face llama/qwen2 form");
  std::filesystem::create_directories(dir);
  const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
  const json config = config_json(c, type, f.path());

  safetensors::Writer w;
  w.set_metadata("format", "pt");
  std::vector<float> values;
  std::vector<uint8_t> bytes;
  for (const gguf::TensorInfo& t : f.tensors()) {
    int64_t heads = 0;
    bool minus_one = false;
    const std::string name = hf_name(t.name, c, heads, minus_one);
    if (name.empty()) continue;  // rope_freqs (in config.json), row scales (applied below)
    const int64_t cols = t.dims[0], rows = t.elements() / cols;
    const float* scales = nullptr;
    if (dtype_has_row_scale(t.type)) {
      const gguf::TensorInfo* s = f.find_tensor(t.name + ".scale");
      if (!s || s->type != DType::F32 || s->elements() != rows)
        throw FileError(f.path() + ": tensor '" + t.name + "' needs '" + t.name +
                        ".scale' (f32, one per row)");
      scales = reinterpret_cast<const float*>(s->data);
    }
    values.resize(size_t(rows * cols));
    const size_t row_bytes = size_t(dtype_row_bytes(t.type, cols));
    for (int64_t r = 0; r < rows; ++r)
      dequantize_row(t.type, t.data + size_t(r) * row_bytes, values.data() + r * cols, cols,
                     scales ? scales[r] : 1.0f);
    if (minus_one)
      for (float& v : values) v -= 1.0f;
    if (heads > 0) {
      const bool vector = t.dims.size() == 1;  // a bias: one value per row of its matrix
      values = unpermute(values, vector ? cols : rows, vector ? 1 : cols, heads);
    }
    // Every tensor in the one dtype, as transformers' save_pretrained writes them.
    const DType to = type;
    bytes.resize(size_t(dtype_row_bytes(to, rows * cols)));
    quantize_row(to, values.data(), bytes.data(), rows * cols);
    const std::vector<int64_t> shape =
        t.dims.size() == 1 ? std::vector<int64_t>{cols} : std::vector<int64_t>{rows, cols};
    w.add(name, to, shape, bytes.data(), bytes.size());
  }
  w.write((std::filesystem::path(dir) / "model.safetensors").string());
  std::ofstream out(config_path, std::ios::binary | std::ios::trunc);
  out << config.dump(2) << "\n";
  if (!out) throw FileError(config_path + ": cannot write");
}

}  // namespace shrike::model
