// Helpers for the Hugging Face tests (tests/model, tests/tokenizer, tests/safetensors): a scratch
// folder, and writers that turn a GGUF (a synth model or a reference vocabulary) into the files a
// Hugging Face folder holds: config.json, safetensors (q/k rows back in Hugging Face's half-split
// rotary order), tokenizer.json and tokenizer_config.json, the way transformers and tokenizers
// write them.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "gguf/gguf.h"
#include "safetensors/safetensors.h"
#include "tokenizer/hf_tokenizer_writer.h"
#include "tokenizer/vocab.h"

namespace shrike::hftest {

using nlohmann::json;

inline std::filesystem::path scratch_root() {
  return std::filesystem::temp_directory_path() / ("shrike_hf_test_" + std::to_string(::getpid()));
}

// A fresh folder under the per-process scratch root (removed by ScratchCleanup at exit).
inline std::string scratch(const std::string& name) {
  const auto p = scratch_root() / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(scratch_root(), ec);
  }
};

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// ---- tokenizer.json from a Vocab: the library's writer (tokenizer/hf_tokenizer_writer.h) ----

using tokenizer::hf_json::added_token;
using tokenizer::hf_json::byte_level;
using tokenizer::hf_json::family_pre_tokenizer;
using tokenizer::hf_json::hf_tokenizer_config;
using tokenizer::hf_json::hf_tokenizer_json;
using tokenizer::hf_json::split_regex;
using tokenizer::hf_json::template_processing;

inline void write_hf_tokenizer(const tokenizer::Vocab& v, const std::string& dir,
                               const std::string& chat_template = "") {
  tokenizer::write_hf_tokenizer(v, dir, chat_template);
}

// ---- model folders from a GGUF ----

struct HfOptions {
  DType type = DType::F32;           // safetensors dtype of every tensor
  std::string model_type = "llama";  // llama, mistral or qwen2
  int shards = 1;                    // > 1: model.safetensors.index.json and that many files
  float bias = 0;                    // qwen2: biases are bias * sin(i) (0: all zero)
  json extra_config = json::object();
  std::string chat_template = "{{ messages }}";
};

// GGUF rows (adjacent rotary pairs) back to Hugging Face's half-split order: the inverse of
// llama.cpp's permute().
inline std::vector<float> unpermute(const std::vector<float>& w, int64_t rows, int64_t cols,
                                    int64_t heads) {
  std::vector<float> out(w.size());
  const int64_t per_head = rows / heads, half = per_head / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j)
        std::memcpy(&out[size_t((h * per_head + j * half + i) * cols)],
                    &w[size_t((h * per_head + 2 * i + j) * cols)], size_t(cols) * sizeof(float));
  return out;
}

// Writes dir/{config.json, safetensors, tokenizer.json, tokenizer_config.json} holding the GGUF
// llama model's weights and vocabulary.
inline void write_hf_from_gguf(const std::string& gguf_path, const std::string& dir,
                               const HfOptions& o = {}) {
  const auto f = gguf::GgufFile::open(gguf_path);
  const auto u = [&](const std::string& k) { return int64_t(f.get_uint("llama." + k)); };
  const int64_t dim = u("embedding_length"), layers = u("block_count");
  const int64_t heads = u("attention.head_count"), kv_heads = u("attention.head_count_kv");
  const int64_t head_dim = dim / heads;
  const auto& embd = f.tensor("token_embd.weight");
  const bool tied = f.find_tensor("output.weight") == nullptr;

  json config = {{"architectures",
                  {o.model_type == "llama"     ? "LlamaForCausalLM"
                   : o.model_type == "mistral" ? "MistralForCausalLM"
                                               : "Qwen2ForCausalLM"}},
                 {"model_type", o.model_type},
                 {"hidden_size", dim},
                 {"num_hidden_layers", layers},
                 {"num_attention_heads", heads},
                 {"num_key_value_heads", kv_heads},
                 {"intermediate_size", u("feed_forward_length")},
                 {"vocab_size", embd.dims[1]},
                 {"max_position_embeddings", u("context_length")},
                 {"rms_norm_eps", f.get_float("llama.attention.layer_norm_rms_epsilon")},
                 {"rope_theta", f.get_float("llama.rope.freq_base")},
                 {"tie_word_embeddings", tied},
                 {"hidden_act", "silu"},
                 {"bos_token_id", 1},
                 {"eos_token_id", 2},
                 {"torch_dtype", "float32"}};
  config.update(o.extra_config);
  write_text(dir + "/config.json", config.dump(2));

  // Every tensor as f32 rows in HF naming and orientation.
  std::vector<std::pair<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>> out;
  auto take = [&](const std::string& gguf_name, const std::string& hf_name, int64_t permute) {
    const auto& t = f.tensor(gguf_name);
    const int64_t cols = t.dims[0], rows = t.dims.size() > 1 ? t.dims[1] : 1;
    std::vector<float> w(size_t(cols * rows));
    const size_t row_bytes = size_t(dtype_row_bytes(t.type, cols));
    for (int64_t r = 0; r < rows; ++r)
      dequantize_row(t.type, t.data + size_t(r) * row_bytes, &w[size_t(r * cols)], cols);
    if (permute) w = unpermute(w, rows, cols, permute);
    std::vector<int64_t> shape =
        t.dims.size() > 1 ? std::vector<int64_t>{rows, cols} : std::vector<int64_t>{cols};
    out.push_back({hf_name, {shape, std::move(w)}});
  };
  take("token_embd.weight", "model.embed_tokens.weight", 0);
  for (int64_t l = 0; l < layers; ++l) {
    const std::string g = "blk." + std::to_string(l) + ".";
    const std::string h = "model.layers." + std::to_string(l) + ".";
    take(g + "attn_norm.weight", h + "input_layernorm.weight", 0);
    take(g + "attn_q.weight", h + "self_attn.q_proj.weight", heads);
    take(g + "attn_k.weight", h + "self_attn.k_proj.weight", kv_heads);
    take(g + "attn_v.weight", h + "self_attn.v_proj.weight", 0);
    take(g + "attn_output.weight", h + "self_attn.o_proj.weight", 0);
    take(g + "ffn_norm.weight", h + "post_attention_layernorm.weight", 0);
    take(g + "ffn_gate.weight", h + "mlp.gate_proj.weight", 0);
    take(g + "ffn_up.weight", h + "mlp.up_proj.weight", 0);
    take(g + "ffn_down.weight", h + "mlp.down_proj.weight", 0);
    if (o.model_type == "qwen2")
      for (auto [name, n] :
           {std::pair{"q_proj", heads}, {"k_proj", kv_heads}, {"v_proj", kv_heads}}) {
        std::vector<float> b(size_t(n * head_dim));
        for (size_t i = 0; i < b.size(); ++i) b[i] = o.bias * std::sin(float(i) + float(l));
        out.push_back({h + "self_attn." + name + ".bias", {{int64_t(b.size())}, b}});
      }
  }
  take("output_norm.weight", "model.norm.weight", 0);
  if (!tied) take("output.weight", "lm_head.weight", 0);

  std::vector<safetensors::Writer> writers(size_t(std::max(o.shards, 1)));
  std::map<std::string, std::string> weight_map;
  for (size_t i = 0; i < out.size(); ++i) {
    const auto& [name, st] = out[i];
    const auto& [shape, w] = st;
    std::vector<uint8_t> bytes(w.size() * size_t(dtype_block_bytes(o.type)));
    quantize_row(o.type, w.data(), bytes.data(), int64_t(w.size()));
    const size_t shard = i * writers.size() / out.size();
    writers[shard].add(name, o.type, shape, bytes.data(), bytes.size());
    char file[64];
    std::snprintf(file, sizeof file, "model-%05zu-of-%05zu.safetensors", shard + 1, writers.size());
    weight_map[name] = file;
  }
  if (writers.size() == 1) {
    writers[0].set_metadata("format", "pt");
    writers[0].write(dir + "/model.safetensors");
  } else {
    for (size_t s = 0; s < writers.size(); ++s) {
      char file[64];
      std::snprintf(file, sizeof file, "model-%05zu-of-%05zu.safetensors", s + 1, writers.size());
      writers[s].write(dir + "/" + file);
    }
    safetensors::write_index(dir + "/model.safetensors.index.json", weight_map);
  }
  tokenizer::write_hf_tokenizer(tokenizer::vocab_from_gguf(f), dir, o.chat_template);
}

}  // namespace shrike::hftest
