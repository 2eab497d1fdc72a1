// Hugging Face folders -> HfCheckpoint (config.json in GGUF terms, tensors under GGUF names) ->
// Model. Every field and tensor is checked before a byte of weight data is read.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "model/hf_model.h"
#include "model/model.h"
#include "model/weight_binding.h"

namespace shrike::model {
namespace {

using nlohmann::json;

std::string dims_string(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

json read_json(const std::string& path) {
  const MappedFile f = MappedFile::open(path);
  try {
    return json::parse(f.data(), f.data() + f.size());
  } catch (const json::exception& e) {
    std::string msg = e.what();
    for (char& c : msg)
      if (c == '\n') c = ' ';
    throw FileError(path + ": not valid JSON: " + msg);
  }
}

// Typed access to config.json with errors naming the file and key. null counts as absent
// (transformers writes "head_dim": null and the like).
class ConfigJson {
 public:
  ConfigJson(std::string path, json j) : path_(std::move(path)), j_(std::move(j)) {
    if (!j_.is_object()) throw FileError(path_ + ": not a JSON object");
  }
  const std::string& path() const { return path_; }
  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  const json& at(const char* key) const { return j_.at(key); }

  int64_t count(const char* key) const {
    if (!has(key)) throw FileError(path_ + ": '" + key + "' is missing");
    return count_value(key, j_[key]);
  }
  int64_t count_or(const char* key, int64_t def) const { return has(key) ? count(key) : def; }
  int64_t count_value(const std::string& key, const json& v) const {
    if (!v.is_number_integer())
      throw FileError(path_ + ": '" + key + "' is " + std::string(v.type_name()) +
                      ", expected an integer");
    if (!v.is_number_unsigned() || v.get<uint64_t>() > (uint64_t(1) << 40))
      throw FileError(path_ + ": '" + key + "' is " + v.dump() + ", outside 0.." +
                      std::to_string(uint64_t(1) << 40));
    return int64_t(v.get<uint64_t>());
  }
  double number_or(const char* key, double def) const { return number_in(j_, key, def); }
  double number_in(const json& obj, const char* key, double def) const {
    if (!obj.contains(key) || obj[key].is_null()) return def;
    if (!obj[key].is_number())
      throw FileError(path_ + ": '" + key + "' is " + std::string(obj[key].type_name()) +
                      ", expected a number");
    return obj[key].get<double>();
  }
  bool bool_or(const char* key, bool def) const {
    if (!has(key)) return def;
    if (!j_[key].is_boolean())
      throw FileError(path_ + ": '" + key + "' is " + std::string(j_[key].type_name()) +
                      ", expected true or false");
    return j_[key].get<bool>();
  }
  std::string string_or(const char* key, const std::string& def) const {
    if (!has(key)) return def;
    if (!j_[key].is_string())
      throw FileError(path_ + ": '" + key + "' is " + std::string(j_[key].type_name()) +
                      ", expected a string");
    return j_[key].get<std::string>();
  }
  // A token id: an integer, or a list of them (Llama-3.1's eos_token_id) whose first counts.
  int32_t token_id_or(const char* key, int32_t def) const {
    if (!has(key)) return def;
    const json& v = j_[key];
    if (v.is_array()) {
      if (v.empty()) return def;
      return int32_t(count_value(key, v[0]));
    }
    return int32_t(count_value(key, v));
  }

 private:
  std::string path_;
  json j_;
};

// Family of a config: "llama", "mistral", "qwen2", "qwen3", "gemma2" or "gemma3"
// (architectures[0] first, then model_type).
std::string family_of(const ConfigJson& c) {
  std::string arch;
  if (c.has("architectures")) {
    const json& a = c.at("architectures");
    if (!a.is_array() || (!a.empty() && !a[0].is_string()))
      throw FileError(c.path() + ": 'architectures' is not a list of strings");
    if (!a.empty()) arch = a[0].get<std::string>();
  }
  if (arch == "LlamaForCausalLM") return "llama";
  if (arch == "MistralForCausalLM") return "mistral";
  if (arch == "Qwen2ForCausalLM") return "qwen2";
  if (arch == "Qwen3ForCausalLM") return "qwen3";
  if (arch == "Gemma2ForCausalLM") return "gemma2";
  if (arch == "Gemma3ForCausalLM") return "gemma3";
  if (arch == "Phi3ForCausalLM") return "phi3";
  std::string type = c.string_or("model_type", "");
  if (type == "gemma3_text") type = "gemma3";
  if (arch.empty() && (type == "llama" || type == "mistral" || type == "qwen2" || type == "qwen3" ||
                       type == "gemma2" || type == "gemma3" || type == "phi3"))
    return type;
  if (arch == "Gemma3ForConditionalGeneration")
    throw FileError(c.path() +
                    ": Gemma3ForConditionalGeneration (text and vision) is not "
                    "supported; the text-only Gemma3ForCausalLM folders are");
  throw FileError(c.path() + ": unsupported architecture '" + (arch.empty() ? type : arch) +
                  "' (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                  "Qwen3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, Phi3ForCausalLM)");
}

// rope_scaling: absent, null or "default" -> none; "llama3" -> per-frequency divisors, computed
// as transformers and llama.cpp do. Other kinds change the rotation in ways the forward pass does
// not implement, so they are refused rather than silently ignored.
void read_rope_scaling(const ConfigJson& c, ModelConfig& m) {
  if (!c.has("rope_scaling")) return;
  const json& rs = c.at("rope_scaling");
  if (!rs.is_object()) throw FileError(c.path() + ": 'rope_scaling' is not an object");
  std::string type;
  for (const char* key : {"rope_type", "type"})
    if (rs.contains(key) && !rs[key].is_null()) {
      if (!rs[key].is_string())
        throw FileError(c.path() + ": rope_scaling '" + key + "' is not a string");
      type = rs[key].get<std::string>();
      break;
    }
  if (type.empty() || type == "default") return;
  if (type == "yarn") {  // Qwen2.5 / Qwen3 long context
    const double factor = c.number_in(rs, "factor", 1.0);
    const double original =
        c.number_in(rs, "original_max_position_embeddings",
                    c.number_or("original_max_position_embeddings", double(m.context_length)));
    if (!(factor >= 1 && factor < 1e6) || !(original >= 1 && original < 1e9))
      throw FileError(c.path() +
                      ": rope_scaling yarn needs factor >= 1 and "
                      "original_max_position_embeddings >= 1");
    // llama.cpp's files keep ggml's fixed ramp (beta_fast 32, beta_slow 1): other values would
    // convert to a model llama.cpp rotates differently.
    if (c.number_in(rs, "beta_fast", 32.0) != 32.0 || c.number_in(rs, "beta_slow", 1.0) != 1.0)
      throw FileError(c.path() +
                      ": rope_scaling yarn with beta_fast != 32 or beta_slow != 1 is "
                      "not supported");
    m.rope_yarn = true;
    m.rope_freq_scale = float(1.0 / factor);
    m.rope_original_context = int64_t(original);
    // transformers' attention_factor replaces 0.1 ln(factor) + 1, which ggml always applies.
    if (rs.contains("attention_factor") && !rs["attention_factor"].is_null())
      m.rope_attn_factor =
          float(c.number_in(rs, "attention_factor", 1.0) / (0.1 * std::log(factor) + 1.0));
    return;
  }
  if (type == "longrope" || type == "su") {  // Phi-3 / Phi-3.5 / Phi-4-mini long context
    const double original = c.number_or("original_max_position_embeddings", 0.0);
    if (!(original >= 1 && original < 1e9))
      throw FileError(c.path() + ": rope_scaling longrope needs original_max_position_embeddings");
    auto factors = [&](const char* key) {
      if (!rs.contains(key) || !rs[key].is_array() || int64_t(rs[key].size()) != m.rope_dims / 2)
        throw FileError(c.path() + ": rope_scaling '" + key + "' must be a list of " +
                        std::to_string(m.rope_dims / 2) + " numbers (rotated pairs per head)");
      std::vector<float> v;
      for (const json& x : rs[key]) {
        if (!x.is_number() || !(x.get<double>() > 0))
          throw FileError(c.path() + ": rope_scaling '" + key + "' holds a non-positive value");
        v.push_back(x.get<float>());
      }
      return v;
    };
    m.rope_freq_factors = factors("short_factor");
    m.rope_long_factors = factors("long_factor");
    m.rope_original_context = int64_t(original);
    const double scale = double(m.context_length) / original;
    m.rope_attn_factor =
        rs.contains("attention_factor") && !rs["attention_factor"].is_null()
            ? float(c.number_in(rs, "attention_factor", 1.0))
            : (scale > 1 ? float(std::sqrt(1 + std::log(scale) / std::log(original))) : 1.0f);
    return;
  }
  if (type == "linear") {
    const double factor = c.number_in(rs, "factor", 1.0);
    if (!(factor >= 1 && factor < 1e6))
      throw FileError(c.path() + ": rope_scaling linear needs a factor >= 1");
    m.rope_freq_scale = float(1.0 / factor);
    return;
  }
  if (type != "llama3")
    throw FileError(c.path() + ": unsupported rope_scaling type '" + type +
                    "' (supported: llama3, linear, yarn, longrope)");
  const double factor = c.number_in(rs, "factor", 8.0);
  const double low = c.number_in(rs, "low_freq_factor", 1.0);
  const double high = c.number_in(rs, "high_freq_factor", 4.0);
  const double original = c.number_in(rs, "original_max_position_embeddings", 8192.0);
  if (!(factor > 0) || !(low > 0) || !(high > low) || !(original >= 1 && original < 1e9))
    throw FileError(c.path() +
                    ": rope_scaling llama3 needs factor > 0, 0 < low_freq_factor < "
                    "high_freq_factor and original_max_position_embeddings >= 1");
  m.rope_freq_factors = llama3_rope_factors(m.rope_dims, m.rope_theta, float(factor), float(low),
                                            float(high), int64_t(original));
}

ModelConfig read_config(const ConfigJson& c) {
  const std::string family = family_of(c);
  ModelConfig m;
  m.architecture = family == "llama" || family == "mistral" ? "llama" : family;
  const bool gemma = family == "gemma2" || family == "gemma3";
  m.dim = c.count("hidden_size");
  m.n_layers = c.count("num_hidden_layers");
  m.n_heads = c.count("num_attention_heads");
  m.n_kv_heads = c.count_or("num_key_value_heads", m.n_heads);
  m.ffn_dim = c.count("intermediate_size");
  m.head_dim = c.count_or("head_dim", m.n_heads > 0 ? m.dim / m.n_heads : 0);
  m.rope_dims = m.head_dim;
  m.context_length = c.count_or("max_position_embeddings", 2048);
  m.rms_eps = float(c.number_or("rms_norm_eps", 1e-6));
  m.rope_theta = float(c.number_or("rope_theta", 10000.0));
  m.tied_output = c.bool_or("tie_word_embeddings", false);
  m.qkv_bias = family == "qwen2";
  m.qk_norm = family == "qwen3" || family == "gemma3";
  // Hugging Face's llama and mistral q/k rows are permuted to adjacent pairs on the way in (see
  // hf_model.h); the other families stay NeoX, as in llama.cpp's files.
  m.rope_layout = family == "llama" || family == "mistral" ? kernels::RopeLayout::Adjacent
                                                           : kernels::RopeLayout::NeoX;
  m.bos_id = c.token_id_or("bos_token_id", 1);
  m.eos_id = c.token_id_or("eos_token_id", 2);
  m.add_bos = family != "qwen2" && family != "qwen3";
  if (c.bool_or("attention_bias", false) && family != "qwen2")
    throw FileError(c.path() + ": attention_bias is not supported for " + family);
  if (c.bool_or("mlp_bias", false)) throw FileError(c.path() + ": mlp_bias is not supported");
  if (c.has("partial_rotary_factor") && c.number_or("partial_rotary_factor", 1.0) != 1.0)
    throw FileError(c.path() + ": partial_rotary_factor is not supported");
  // Gemma names its activation hidden_activation (hidden_act is the older key).
  const std::string act = c.string_or(
      "hidden_activation", c.string_or("hidden_act", gemma ? "gelu_pytorch_tanh" : "silu"));
  if (act == "gelu_pytorch_tanh" || (gemma && act == "gelu")) {
    m.ffn_activation = FfnActivation::GeluTanh;
  } else if (act != "silu" && act != "swish") {
    throw FileError(c.path() + ": hidden_act '" + act +
                    "' is not supported (silu, gelu_pytorch_tanh)");
  }
  if (c.has("sliding_window") && (c.bool_or("use_sliding_window", true) || gemma)) {
    m.sliding_window = c.count("sliding_window");
    m.sliding_pattern = m.sliding_window > 0 ? 1 : 0;
  }
  if (gemma) {
    m.post_norms = true;
    m.tied_output = true;  // Gemma has no lm_head
    m.embedding_scale = std::sqrt(float(m.dim));
    m.attention_scale =
        float(1.0 / std::sqrt(c.number_or("query_pre_attn_scalar", double(m.head_dim))));
    m.attn_softcap = float(c.number_or("attn_logit_softcapping", 0.0));
    m.final_softcap = float(c.number_or("final_logit_softcapping", 0.0));
    m.sliding_pattern = family == "gemma2" ? 2 : c.count_or("sliding_window_pattern", 6);
    if (family == "gemma3") {
      m.rope_theta_local = float(c.number_or("rope_local_base_freq", 10000.0));
      // llama.cpp's gemma3 has five sliding layers to one global, with a local base of 10000;
      // a folder that says otherwise would convert to a file llama.cpp runs differently.
      if (m.sliding_pattern != 6 || m.rope_theta_local != 10000.0f)
        throw FileError(c.path() + ": gemma3 with sliding_window_pattern " +
                        std::to_string(m.sliding_pattern) + " and rope_local_base_freq " +
                        std::to_string(m.rope_theta_local) +
                        " is not supported (llama.cpp's layout: 6 and 10000)");
    }
  }
  try {
    read_rope_scaling(c, m);
  } catch (const std::invalid_argument& e) {
    throw FileError(c.path() + ": " + e.what());
  }
  return m;
}

// Reorders the rows of each head from halves (x0..x{h/2-1}, y0..) to pairs (x0, y0, x1, y1, ...):
// llama.cpp's permute(), on rows of any byte width.
void permute_rows(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t heads, size_t row_bytes) {
  const int64_t per_head = rows / heads, half = per_head / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t to = h * per_head + 2 * i + j, from = h * per_head + j * half + i;
        std::memcpy(dst + size_t(to) * row_bytes, src + size_t(from) * row_bytes, row_bytes);
      }
}

}  // namespace

HfCheckpoint HfCheckpoint::open(const std::string& dir) {
  namespace fs = std::filesystem;
  HfCheckpoint ck;
  ck.dir_ = dir;
  const ConfigJson cj((fs::path(dir) / "config.json").string(),
                      read_json((fs::path(dir) / "config.json").string()));
  ck.config_ = read_config(cj);
  ModelConfig& c = ck.config_;
  ck.weights_ = safetensors::Checkpoint::open_dir(dir);

  // The embedding fixes the vocabulary size (config.json's vocab_size must agree).
  const safetensors::Tensor& embd = ck.weights_.get("model.embed_tokens.weight");
  if (embd.shape.size() != 2)
    throw FileError(ck.weights_.file_of(embd.name) + ": tensor '" + embd.name + "' has shape " +
                    dims_string(embd.shape) + ", expected 2 dimensions");
  c.vocab_size = embd.shape[0];
  if (cj.has("vocab_size") && cj.count("vocab_size") != c.vocab_size)
    throw FileError(cj.path() + ": vocab_size is " + std::to_string(cj.count("vocab_size")) +
                    " but model.embed_tokens.weight has " + std::to_string(c.vocab_size) + " rows");
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw FileError(cj.path() + ": " + e.what());
  }

  const bool permute = c.architecture == "llama";
  // Gemma's RMSNorm multiplies by (1 + weight); llama.cpp's files (and shrike) hold 1 + weight.
  const bool gemma = c.architecture == "gemma2" || c.architecture == "gemma3";
  auto add = [&](const std::string& name, const std::string& hf_name,
                 std::vector<int64_t> gguf_dims, int64_t permute_heads = 0, bool plus_one = false) {
    const safetensors::Tensor& t = ck.weights_.get(hf_name);
    const std::string& file = ck.weights_.file_of(hf_name);
    const std::vector<int64_t> hf_shape(gguf_dims.rbegin(), gguf_dims.rend());
    if (t.shape != hf_shape)
      throw FileError(file + ": tensor '" + hf_name + "' has shape " + dims_string(t.shape) +
                      ", expected " + dims_string(hf_shape));
    if (!t.type)
      throw FileError(file + ": tensor '" + hf_name + "' has dtype " + t.dtype +
                      " (supported: F32, F16, BF16)");
    ck.tensors_.push_back({name, hf_name, plus_one ? DType::F32 : *t.type, std::move(gguf_dims),
                           permute_heads, plus_one ? *t.type : DType::F32, plus_one});
  };
  auto norm = [&](const std::string& name, const std::string& hf_name, int64_t n) {
    add(name, hf_name, {n}, 0, gemma);
  };
  const int64_t D = c.dim, F = c.ffn_dim, Q = c.q_dim(), KV = c.kv_dim();
  add("token_embd.weight", "model.embed_tokens.weight", {D, c.vocab_size});
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const std::string h = "model.layers." + std::to_string(l) + ".";
    norm(p + "attn_norm.weight", h + "input_layernorm.weight", D);
    if (c.fused_qkv_ffn()) {
      add(p + "attn_qkv.weight", h + "self_attn.qkv_proj.weight", {D, Q + 2 * KV});
    } else {
      add(p + "attn_q.weight", h + "self_attn.q_proj.weight", {D, Q}, permute ? c.n_heads : 0);
      add(p + "attn_k.weight", h + "self_attn.k_proj.weight", {D, KV}, permute ? c.n_kv_heads : 0);
      add(p + "attn_v.weight", h + "self_attn.v_proj.weight", {D, KV});
    }
    if (c.qkv_bias) {
      add(p + "attn_q.bias", h + "self_attn.q_proj.bias", {Q});
      add(p + "attn_k.bias", h + "self_attn.k_proj.bias", {KV});
      add(p + "attn_v.bias", h + "self_attn.v_proj.bias", {KV});
    }
    if (c.qk_norm) {
      norm(p + "attn_q_norm.weight", h + "self_attn.q_norm.weight", c.head_dim);
      norm(p + "attn_k_norm.weight", h + "self_attn.k_norm.weight", c.head_dim);
    }
    add(p + "attn_output.weight", h + "self_attn.o_proj.weight", {Q, D});
    if (c.post_norms) {  // Gemma: the norm Llama calls post_attention is the FFN's input norm
      norm(p + "post_attention_norm.weight", h + "post_attention_layernorm.weight", D);
      norm(p + "ffn_norm.weight", h + "pre_feedforward_layernorm.weight", D);
    } else {
      add(p + "ffn_norm.weight", h + "post_attention_layernorm.weight", {D});
    }
    if (c.fused_qkv_ffn()) {
      add(p + "ffn_up.weight", h + "mlp.gate_up_proj.weight", {D, 2 * F});
    } else {
      add(p + "ffn_gate.weight", h + "mlp.gate_proj.weight", {D, F});
      add(p + "ffn_up.weight", h + "mlp.up_proj.weight", {D, F});
    }
    add(p + "ffn_down.weight", h + "mlp.down_proj.weight", {F, D});
    if (c.post_norms) norm(p + "post_ffw_norm.weight", h + "post_feedforward_layernorm.weight", D);
  }
  norm("output_norm.weight", "model.norm.weight", D);
  if (!c.tied_output) add("output.weight", "lm_head.weight", {D, c.vocab_size});
  return ck;
}

const HfCheckpoint::TensorInfo* HfCheckpoint::find(const std::string& gguf_name) const {
  for (const auto& t : tensors_)
    if (t.name == gguf_name) return &t;
  return nullptr;
}

const uint8_t* HfCheckpoint::data(const TensorInfo& t, std::vector<uint8_t>& scratch) const {
  const safetensors::Tensor& src = weights_.get(t.hf_name);
  if (t.plus_one) {  // a Gemma norm: f32 of 1 + weight
    const int64_t n = t.dims[0];
    scratch.resize(size_t(n) * sizeof(float));
    float* out = reinterpret_cast<float*>(scratch.data());
    dequantize_row(t.file_type, src.data, out, n);
    for (int64_t i = 0; i < n; ++i) out[i] += 1.0f;
    return scratch.data();
  }
  const size_t elem = size_t(dtype_block_bytes(t.type));
  const bool aligned = reinterpret_cast<uintptr_t>(src.data) % elem == 0;
  if (t.permute_heads == 0 && aligned) return src.data;
  scratch.resize(src.bytes);
  if (t.permute_heads == 0) {
    std::memcpy(scratch.data(), src.data, src.bytes);
  } else {
    const int64_t rows = t.dims.size() == 2 ? t.dims[1] : t.dims[0];
    const size_t row_bytes = size_t(src.bytes / uint64_t(rows));
    permute_rows(src.data, scratch.data(), rows, t.permute_heads, row_bytes);
  }
  return scratch.data();
}

std::unique_ptr<Model> load_hf_model(const std::string& dir) {
  const HfCheckpoint ck = HfCheckpoint::open(dir);
  const ModelConfig& c = ck.config();
  std::vector<uint8_t> scratch;
  auto info = [&](const std::string& name) -> const HfCheckpoint::TensorInfo& {
    const auto* t = ck.find(name);
    if (!t) throw std::logic_error("hf loader: no tensor " + name);  // open() listed them all
    return *t;
  };
  // Shapes were checked against the configuration when the checkpoint was opened.
  const WeightSource src{[&](const std::string& name, int64_t rows, int64_t cols) {
                           return kernels::PackedMatrix::pack(info(name).type, rows, cols,
                                                              ck.data(info(name), scratch));
                         },
                         [&](const std::string& name, int64_t n) {
                           std::vector<float> out(static_cast<size_t>(n));
                           dequantize_row(info(name).type, ck.data(info(name), scratch), out.data(),
                                          n);
                           return out;
                         }};
  ModelWeights w = bind_weights(c, src);
  return std::make_unique<Model>(c, std::move(w));
}

}  // namespace shrike::model
