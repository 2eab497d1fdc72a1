// Model files -> Model: GGUF (any supported weight type) and llama2.c .bin (f32). Every shape is
// checked against the configuration before a byte of tensor data is read.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>

#include "core/file_buffer.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "model/weight_binding.h"

namespace shrike::model {
namespace {

// A tensor as a file holds it: GGUF dimension order (dims[0] innermost).
struct TensorRef {
  DType type = DType::F32;
  std::vector<int64_t> dims;
  const void* data = nullptr;
};

std::string dims_string(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// Looks tensors up by GGUF name and checks their shapes, with errors naming the file.
class TensorTable {
 public:
  TensorTable(std::string path, std::map<std::string, TensorRef> tensors)
      : path_(std::move(path)), tensors_(std::move(tensors)) {}

  bool has(const std::string& name) const { return tensors_.count(name) != 0; }

  const TensorRef& get(const std::string& name, const std::vector<int64_t>& dims) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) throw FileError(path_ + ": missing tensor '" + name + "'");
    if (it->second.dims != dims)
      throw FileError(path_ + ": tensor '" + name + "' has shape " + dims_string(it->second.dims) +
                      ", expected " + dims_string(dims));
    return it->second;
  }

  // A weight matrix [rows][cols] (GGUF dims {cols, rows}), repacked for the kernels.
  kernels::PackedMatrix matrix(const std::string& name, int64_t rows, int64_t cols) const {
    const TensorRef& t = get(name, {cols, rows});
    const float* scales = nullptr;
    if (dtype_has_row_scale(t.type)) {  // shrike's per-row types keep their scales beside
      const std::string scale_name = name + ".scale";
      if (!has(scale_name))
        throw FileError(path_ + ": tensor '" + name + "' of type " +
                        std::string(dtype_name(t.type)) + " needs '" + scale_name + "'");
      const TensorRef& s = get(scale_name, {rows});
      if (s.type != DType::F32)
        throw FileError(path_ + ": tensor '" + scale_name + "' must be f32");
      scales = static_cast<const float*>(s.data);
    }
    try {
      return kernels::PackedMatrix::pack(t.type, rows, cols, t.data, scales);
    } catch (const std::invalid_argument& e) {
      throw FileError(path_ + ": tensor '" + name + "': " + e.what());
    }
  }

  // A vector of n values (norm weights, biases), converted to f32.
  std::vector<float> vector(const std::string& name, int64_t n) const {
    const TensorRef& t = get(name, {n});
    if (n % dtype_block_elems(t.type) != 0 || dtype_has_row_scale(t.type))
      throw FileError(path_ + ": tensor '" + name + "' cannot be of type " +
                      std::string(dtype_name(t.type)));
    std::vector<float> out(static_cast<size_t>(n));
    dequantize_row(t.type, t.data, out.data(), n);
    return out;
  }

 private:
  std::string path_;
  std::map<std::string, TensorRef> tensors_;
};

std::unique_ptr<Model> make_model(const std::string& path, ModelConfig c, const TensorTable& t) {
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw FileError(path + ": " + e.what());
  }
  const WeightSource src{
      [&](const std::string& n, int64_t rows, int64_t cols) { return t.matrix(n, rows, cols); },
      [&](const std::string& n, int64_t len) { return t.vector(n, len); }};
  return std::make_unique<Model>(c, bind_weights(c, src));
}

// ---- GGUF ----

}  // namespace

// llama.cpp's gemma2 / gemma3 attention scale, which no GGUF key carries: 1 / sqrt(dim / heads)
// for the 27B models (46 and 62 layers: query_pre_attn_scalar 144 and 168), 1 / sqrt(head_dim)
// for the others (query_pre_attn_scalar = head_dim).
static float gemma_default_attention_scale(const ModelConfig& c) {
  if ((c.architecture == "gemma2" && c.n_layers == 46) ||
      (c.architecture == "gemma3" && c.n_layers == 62))
    return 1.0f / std::sqrt(float(c.dim / c.n_heads));
  return 1.0f / std::sqrt(float(c.head_dim));
}

ModelConfig config_from_gguf(const gguf::GgufFile& f) {
  const std::string& path = f.path();
  ModelConfig c;
  c.architecture = f.get_string("general.architecture");
  const std::string& a = c.architecture;
  if (a != "llama" && a != "qwen2" && a != "mistral" && a != "qwen3" && a != "gemma2" &&
      a != "gemma3" && a != "phi3")
    throw FileError(path + ": unsupported architecture '" + a +
                    "' (supported: llama, mistral, qwen2, qwen3, gemma2, gemma3, phi3)");
  auto key = [&](const char* suffix) { return a + "." + suffix; };
  auto count = [&](const char* suffix) {
    const uint64_t v = f.get_uint(key(suffix));
    if (v > (uint64_t(1) << 40))
      throw FileError(path + ": metadata '" + key(suffix) + "' is absurd");
    return int64_t(v);
  };
  c.dim = count("embedding_length");
  c.n_layers = count("block_count");
  c.ffn_dim = count("feed_forward_length");
  c.n_heads = count("attention.head_count");
  c.n_kv_heads =
      f.has(key("attention.head_count_kv")) ? count("attention.head_count_kv") : c.n_heads;
  c.head_dim = f.has(key("attention.key_length")) ? count("attention.key_length")
                                                  : (c.n_heads > 0 ? c.dim / c.n_heads : 0);
  c.context_length = f.has(key("context_length")) ? count("context_length") : 2048;
  c.rms_eps = float(f.get_float_or(key("attention.layer_norm_rms_epsilon"), 1e-5));
  c.rope_theta = float(f.get_float_or(key("rope.freq_base"), 10000.0));
  c.rope_dims = f.has(key("rope.dimension_count")) ? count("rope.dimension_count") : c.head_dim;
  const bool gemma = a == "gemma2" || a == "gemma3";
  // llama.cpp rotates these architectures' pairs as halves of each head (NeoX); llama and
  // mistral files hold q/k rows permuted to adjacent pairs.
  c.rope_layout = a == "qwen2" || a == "qwen3" || a == "phi3" || gemma
                      ? kernels::RopeLayout::NeoX
                      : kernels::RopeLayout::Adjacent;
  c.qkv_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.qk_norm = f.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  c.tied_output = f.find_tensor("output.weight") == nullptr;
  c.bos_id = int32_t(f.get_uint_or("tokenizer.ggml.bos_token_id", 1));
  c.eos_id = int32_t(f.get_uint_or("tokenizer.ggml.eos_token_id", 2));
  c.add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", a != "qwen2" && a != "qwen3");
  if (f.has(key("rope.scaling.type"))) {
    const std::string type = f.get_string(key("rope.scaling.type"));
    const double factor = f.get_float_or(key("rope.scaling.factor"), 1.0);
    if (type == "linear" || type == "yarn") {
      if (!(factor >= 1 && factor < 1e6))
        throw FileError(path + ": metadata '" + key("rope.scaling.factor") + "' must be >= 1");
      c.rope_freq_scale = float(1.0 / factor);
      if (type == "yarn") {
        c.rope_yarn = true;
        if (!f.has(key("rope.scaling.original_context_length")))
          throw FileError(path + ": yarn rope scaling needs '" +
                          key("rope.scaling.original_context_length") + "'");
      }
    } else if (type != "none") {
      throw FileError(path + ": rope scaling type '" + type + "' is not supported (linear, yarn)");
    }
  }
  if (f.has(key("rope.scaling.original_context_length")))
    c.rope_original_context = count("rope.scaling.original_context_length");
  c.rope_attn_factor = float(f.get_float_or(key("rope.scaling.attn_factor"), 1.0));
  // LongRoPE (Phi-3 128k): both factor sets as tensors, as llama.cpp's converter writes them.
  const gguf::TensorInfo* long_factors = f.find_tensor("rope_factors_long.weight");
  const gguf::TensorInfo* short_factors = f.find_tensor("rope_factors_short.weight");
  if (long_factors || short_factors) {
    for (const gguf::TensorInfo* t : {long_factors, short_factors})
      if (!t || t->type != DType::F32 || t->dims != std::vector<int64_t>{c.rope_dims / 2})
        throw FileError(path +
                        ": longrope needs rope_factors_long.weight and "
                        "rope_factors_short.weight, f32 of " +
                        std::to_string(c.rope_dims / 2) + " values each");
    const float* l = reinterpret_cast<const float*>(long_factors->data);
    const float* s = reinterpret_cast<const float*>(short_factors->data);
    c.rope_long_factors.assign(l, l + c.rope_dims / 2);
    c.rope_freq_factors.assign(s, s + c.rope_dims / 2);
    if (c.rope_original_context <= 0)
      throw FileError(path + ": longrope needs '" + key("rope.scaling.original_context_length") +
                      "'");
  }
  if (gemma) {
    // What llama.cpp's gemma2 / gemma3 graphs do without keys for it: embeddings times
    // sqrt(dim), GeGLU, norms after attention and FFN, every other (gemma2) or five of six
    // (gemma3) layers sliding, the 27B models' attention scale from dim / heads.
    c.post_norms = true;
    c.ffn_activation = FfnActivation::GeluTanh;
    c.embedding_scale = std::sqrt(float(c.dim));
    c.sliding_pattern = a == "gemma2" ? 2 : 6;
    c.sliding_window = f.has(key("attention.sliding_window")) ? count("attention.sliding_window")
                                                              : (a == "gemma2" ? 4096 : 0);
    if (a == "gemma3") c.rope_theta_local = 10000.0f;
    c.attention_scale = gemma_default_attention_scale(c);
    // A scale llama.cpp's rule does not give (a pruned 27B's query_pre_attn_scalar, say) is kept
    // under the key llama.cpp uses for other families' attention scale.
    if (f.has(key("attention.scale")))
      c.attention_scale = float(f.get_float_or(key("attention.scale"), 0.0));
    c.attn_softcap = float(f.get_float_or(key("attn_logit_softcapping"), 0.0));
    c.final_softcap = float(f.get_float_or(key("final_logit_softcapping"), 0.0));
  } else if (f.has(key("attention.sliding_window"))) {
    c.sliding_window = count("attention.sliding_window");
    c.sliding_pattern = c.sliding_window > 0 ? 1 : 0;
  }

  // Llama-3 rope scaling lives in a tensor, not a key: part of the configuration all the same,
  // so every reader of the file (inference, training, pruning) rotates alike.
  if (const gguf::TensorInfo* freqs = f.find_tensor("rope_freqs.weight")) {
    if (freqs->type != DType::F32 || freqs->dims != std::vector<int64_t>{c.rope_dims / 2})
      throw FileError(path + ": tensor 'rope_freqs.weight' must be f32 of " +
                      std::to_string(c.rope_dims / 2) + " values (rope dimensions / 2)");
    const float* v = reinterpret_cast<const float*>(freqs->data);
    c.rope_freq_factors.assign(v, v + c.rope_dims / 2);
  }

  const auto& embd = f.tensor("token_embd.weight");
  if (embd.dims.size() != 2)
    throw FileError(path + ": tensor 'token_embd.weight' must have 2 dimensions");
  c.vocab_size = embd.dims[1];
  if (f.has("tokenizer.ggml.tokens")) {
    const auto* tokens = f.find("tokenizer.ggml.tokens");
    if (tokens->array_size != uint64_t(c.vocab_size))
      throw FileError(path + ": tokenizer has " + std::to_string(tokens->array_size) +
                      " tokens but token_embd.weight has " + std::to_string(c.vocab_size) +
                      " rows");
  }

  return c;
}

void add_config_to_gguf(const ModelConfig& c, gguf::GgufWriter& w) {
  const std::string& a = c.architecture;
  w.set_string("general.architecture", a);
  w.set_uint32(a + ".vocab_size", uint32_t(c.vocab_size));
  w.set_uint32(a + ".context_length", uint32_t(c.context_length));
  w.set_uint32(a + ".embedding_length", uint32_t(c.dim));
  w.set_uint32(a + ".block_count", uint32_t(c.n_layers));
  w.set_uint32(a + ".feed_forward_length", uint32_t(c.ffn_dim));
  w.set_uint32(a + ".attention.head_count", uint32_t(c.n_heads));
  w.set_uint32(a + ".attention.head_count_kv", uint32_t(c.n_kv_heads));
  w.set_float32(a + ".rope.freq_base", c.rope_theta);
  w.set_float32(a + ".attention.layer_norm_rms_epsilon", c.rms_eps);
  w.set_uint32(a + ".rope.dimension_count", uint32_t(c.rope_dims));
  if (c.head_dim * c.n_heads != c.dim) {  // e.g. after head pruning
    w.set_uint32(a + ".attention.key_length", uint32_t(c.head_dim));
    w.set_uint32(a + ".attention.value_length", uint32_t(c.head_dim));
  }
  if (!c.rope_long_factors.empty()) {
    w.add_tensor("rope_factors_long.weight", DType::F32, {int64_t(c.rope_long_factors.size())},
                 c.rope_long_factors.data(), c.rope_long_factors.size() * sizeof(float));
    w.add_tensor("rope_factors_short.weight", DType::F32, {int64_t(c.rope_freq_factors.size())},
                 c.rope_freq_factors.data(), c.rope_freq_factors.size() * sizeof(float));
  } else if (!c.rope_freq_factors.empty()) {
    w.add_tensor("rope_freqs.weight", DType::F32, {int64_t(c.rope_freq_factors.size())},
                 c.rope_freq_factors.data(), c.rope_freq_factors.size() * sizeof(float));
  }
  if (c.rope_freq_scale != 1.0f || c.rope_yarn) {
    w.set_string(a + ".rope.scaling.type", c.rope_yarn ? "yarn" : "linear");
    w.set_float32(a + ".rope.scaling.factor", 1.0f / c.rope_freq_scale);
  }
  if (c.rope_original_context > 0)
    w.set_uint32(a + ".rope.scaling.original_context_length", uint32_t(c.rope_original_context));
  if (c.rope_attn_factor != 1.0f)
    w.set_float32(a + ".rope.scaling.attn_factor", c.rope_attn_factor);
  if (c.sliding_window > 0)
    w.set_uint32(a + ".attention.sliding_window", uint32_t(c.sliding_window));
  if (c.attn_softcap > 0) w.set_float32(a + ".attn_logit_softcapping", c.attn_softcap);
  if ((a == "gemma2" || a == "gemma3") &&
      c.attention_scale_or_default() != gemma_default_attention_scale(c))
    w.set_float32(a + ".attention.scale", c.attention_scale_or_default());
  if (c.final_softcap > 0) w.set_float32(a + ".final_logit_softcapping", c.final_softcap);
  // The rest of Gemma's and Qwen3's departures follow from the architecture name and the
  // tensors present (config_from_gguf); a configuration that has them under another name
  // could not be read back the same, so it is refused.
  const bool gemma = a == "gemma2" || a == "gemma3";
  if (!gemma && (c.post_norms || c.ffn_activation != FfnActivation::Silu ||
                 c.embedding_scale != 1.0f || c.rope_theta_local > 0 || c.attn_softcap > 0 ||
                 c.final_softcap > 0 || c.sliding_pattern > 1))
    throw std::invalid_argument("a " + a + " GGUF cannot describe " + c.departures());
}

namespace {

std::unique_ptr<Model> load_gguf(const std::string& path) {
  const auto f = gguf::GgufFile::open(path);
  ModelConfig c = config_from_gguf(f);
  std::map<std::string, TensorRef> tensors;
  for (const auto& t : f.tensors()) tensors[t.name] = TensorRef{t.type, t.dims, t.data};
  TensorTable table(path, std::move(tensors));
  return make_model(path, std::move(c), table);
}

// ---- llama2.c ----

// llama2.c checkpoints: 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
// seq_len; a negative vocab_size means a separate classifier), then f32 arrays (see
// shared/reference/stories260K/README.md).
std::unique_ptr<Model> load_llama2c(const std::string& path, const MappedFile& file) {
  if (file.size() < 28) throw FileError(path + ": truncated: llama2.c header needs 28 bytes");
  int32_t h[7];
  std::memcpy(h, file.data(), sizeof h);
  for (int i = 0; i < 7; ++i)
    if (h[i] == 0 || (h[i] < 0 && i != 5) || h[i] > (1 << 24) || h[i] < -(1 << 24))
      throw FileError(path + ": not a model file (neither GGUF nor a plausible llama2.c header)");
  ModelConfig c;
  c.dim = h[0];
  c.ffn_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  c.vocab_size = h[5] < 0 ? -int64_t(h[5]) : h[5];
  c.tied_output = h[5] > 0;
  c.context_length = h[6];
  c.head_dim = c.dim % c.n_heads == 0 ? c.dim / c.n_heads : 0;
  c.rope_dims = c.head_dim;
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw FileError(path + ": " + e.what());
  }

  const int64_t L = c.n_layers, D = c.dim, F = c.ffn_dim, KV = c.kv_dim(), V = c.vocab_size;
  // Element counts in file order; the two freq_cis tables are skipped (we compute RoPE).
  const int64_t freq_cis = c.context_length * c.head_dim;  // real + imag halves
  const int64_t floats = V * D + L * D + L * D * D + 2 * L * KV * D + L * D * D + L * D +
                         3 * L * F * D + D + freq_cis + (c.tied_output ? 0 : V * D);
  const uint64_t need = 28 + uint64_t(floats) * 4;
  if (file.size() != need)
    throw FileError(path + ": llama2.c file is " + std::to_string(file.size()) +
                    " bytes but its header implies " + std::to_string(need));

  const float* p = reinterpret_cast<const float*>(file.data() + 28);
  std::map<std::string, TensorRef> t;
  auto take = [&](const std::string& name, std::vector<int64_t> dims) {
    t[name] = TensorRef{DType::F32, dims, p};
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    p += n;
  };
  // Per-kind arrays hold all layers back to back: register each layer's slice in turn.
  auto take_layers = [&](const std::string& suffix, std::vector<int64_t> dims) {
    for (int64_t l = 0; l < L; ++l) take("blk." + std::to_string(l) + "." + suffix, dims);
  };
  take("token_embd.weight", {D, V});
  take_layers("attn_norm.weight", {D});
  take_layers("attn_q.weight", {D, D});
  take_layers("attn_k.weight", {D, KV});
  take_layers("attn_v.weight", {D, KV});
  take_layers("attn_output.weight", {D, D});
  take_layers("ffn_norm.weight", {D});
  take_layers("ffn_gate.weight", {D, F});  // w1
  take_layers("ffn_down.weight", {F, D});  // w2
  take_layers("ffn_up.weight", {D, F});    // w3
  take("output_norm.weight", {D});
  p += freq_cis;
  if (!c.tied_output) take("output.weight", {D, V});
  return make_model(path, std::move(c), TensorTable(path, std::move(t)));
}

}  // namespace

ModelWeights bind_weights(const ModelConfig& c, const WeightSource& t) {
  ModelWeights w;
  w.token_embedding = t.matrix("token_embd.weight", c.vocab_size, c.dim);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights lw;
    lw.attn_norm = t.vector(p + "attn_norm.weight", c.dim);
    if (c.fused_qkv_ffn()) {
      lw.wqkv = t.matrix(p + "attn_qkv.weight", c.q_dim() + 2 * c.kv_dim(), c.dim);
    } else {
      lw.wq = t.matrix(p + "attn_q.weight", c.q_dim(), c.dim);
      lw.wk = t.matrix(p + "attn_k.weight", c.kv_dim(), c.dim);
      lw.wv = t.matrix(p + "attn_v.weight", c.kv_dim(), c.dim);
    }
    lw.wo = t.matrix(p + "attn_output.weight", c.dim, c.q_dim());
    if (c.qkv_bias) {
      lw.bq = t.vector(p + "attn_q.bias", c.q_dim());
      lw.bk = t.vector(p + "attn_k.bias", c.kv_dim());
      lw.bv = t.vector(p + "attn_v.bias", c.kv_dim());
    }
    if (c.qk_norm) {
      lw.q_norm = t.vector(p + "attn_q_norm.weight", c.head_dim);
      lw.k_norm = t.vector(p + "attn_k_norm.weight", c.head_dim);
    }
    if (c.post_norms) {
      lw.attn_post_norm = t.vector(p + "post_attention_norm.weight", c.dim);
      lw.ffn_post_norm = t.vector(p + "post_ffw_norm.weight", c.dim);
    }
    lw.ffn_norm = t.vector(p + "ffn_norm.weight", c.dim);
    if (c.fused_qkv_ffn()) {  // gate rows first, then up (llama.cpp's swiglu split)
      lw.w_gate_up = t.matrix(p + "ffn_up.weight", 2 * c.ffn_dim, c.dim);
    } else {
      lw.w_gate = t.matrix(p + "ffn_gate.weight", c.ffn_dim, c.dim);
      lw.w_up = t.matrix(p + "ffn_up.weight", c.ffn_dim, c.dim);
    }
    lw.w_down = t.matrix(p + "ffn_down.weight", c.dim, c.ffn_dim);
    w.layers.push_back(std::move(lw));
  }
  w.output_norm = t.vector("output_norm.weight", c.dim);
  if (!c.tied_output) w.output = t.matrix("output.weight", c.vocab_size, c.dim);
  fuse_projections(w);
  return w;
}

std::unique_ptr<Model> load_model(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return load_hf_model(path);
  MappedFile file = MappedFile::open(path);
  if (file.size() >= 4 && std::memcmp(file.data(), "GGUF", 4) == 0) {
    file = MappedFile();  // GgufFile maps it again itself
    return load_gguf(path);
  }
  return load_llama2c(path, file);
}

}  // namespace shrike::model
