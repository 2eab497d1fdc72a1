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

// ---- tokenizer.json from a Vocab ----

// Splits a UTF-8 string at code point boundaries (HF's Python works on code points).
inline std::vector<size_t> char_boundaries(const std::string& s) {
  std::vector<size_t> b;
  for (size_t i = 1; i < s.size(); ++i)
    if ((uint8_t(s[i]) & 0xC0) != 0x80) b.push_back(i);
  return b;
}

// transformers' SentencePieceExtractor: every split of a piece into two pieces is a merge,
// ordered by the merged piece's score (stable: pairs of one piece by their ids).
inline json spm_merges(const tokenizer::Vocab& v) {
  std::unordered_map<std::string, int32_t> id;
  for (int32_t i = 0; i < v.size(); ++i) id.emplace(v.pieces[i], i);
  struct M {
    int32_t l, r;
    float score;
  };
  std::vector<M> all;
  for (int32_t i = 0; i < v.size(); ++i) {
    if (v.types[i] != tokenizer::TokenType::Normal) continue;
    const std::string& p = v.pieces[i];
    std::vector<M> local;
    for (size_t k : char_boundaries(p)) {
      auto l = id.find(p.substr(0, k)), r = id.find(p.substr(k));
      if (l != id.end() && r != id.end()) local.push_back({l->second, r->second, v.scores[i]});
    }
    std::sort(local.begin(), local.end(),
              [](const M& a, const M& b) { return a.l != b.l ? a.l < b.l : a.r < b.r; });
    all.insert(all.end(), local.begin(), local.end());
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const M& a, const M& b) { return a.score > b.score; });
  json out = json::array();
  for (const M& m : all) out.push_back({v.pieces[m.l], v.pieces[m.r]});
  return out;
}

inline json added_token(int32_t id, const std::string& content, bool special) {
  return {{"id", id},        {"content", content},     {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", !special}, {"special", special}};
}

inline json template_processing(const std::vector<std::string>& before,
                                const std::vector<std::string>& after) {
  json single = json::array();
  for (const auto& s : before) single.push_back({{"SpecialToken", {{"id", s}, {"type_id", 0}}}});
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  for (const auto& s : after) single.push_back({{"SpecialToken", {{"id", s}, {"type_id", 0}}}});
  return {{"type", "TemplateProcessing"},
          {"single", single},
          {"pair", json::array()},
          {"special_tokens", json::object()}};
}

inline json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", true},
          {"use_regex", use_regex}};
}

inline json split_regex(const std::string& re) {
  return {
      {"type", "Split"}, {"pattern", {{"Regex", re}}}, {"behavior", "Isolated"}, {"invert", false}};
}

// The pre_tokenizer of each byte-level family's tokenizer.json, keyed by tokenizer.ggml.pre.
inline json family_pre_tokenizer(const std::string& pre) {
  const std::string cjk = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+";
  auto seq = [](json list) { return json{{"type", "Sequence"}, {"pretokenizers", list}}; };
  if (pre == "gpt-2" || pre == "mpt") return byte_level(true);
  if (pre == "llama-bpe")
    return seq({split_regex("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
                            "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                            "\\s+(?!\\S)|\\s+"),
                byte_level(false)});
  if (pre == "qwen2")
    return seq({split_regex("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
                            " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
                byte_level(false)});
  if (pre == "starcoder" || pre == "refact")
    return seq({{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)});
  if (pre == "falcon")
    return seq({{{"type", "Punctuation"}, {"behavior", "Contiguous"}},
                byte_level(true),
                {{"type", "Digits"}, {"individual_digits", false}},
                split_regex("[0-9][0-9][0-9]")});
  if (pre == "deepseek-coder")
    return seq({split_regex("[\r\n]"),
                split_regex("\\s?\\p{L}+"),
                split_regex("\\s?\\p{P}+"),
                split_regex(cjk),
                {{"type", "Digits"}, {"individual_digits", true}},
                byte_level(false)});
  if (pre == "deepseek-llm")
    return seq(
        {split_regex("[\r\n]"),
         split_regex(
             "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293"
             "\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c"
             "\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5"
             "\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77"
             "\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57"
             "\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4"
             "\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc"
             "\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d"
             "\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b"
             "\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f"
             "\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a"
             "\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb"
             "\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df"
             "\U0001e900-\U0001e943]+"),
         split_regex("\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+"),
         split_regex("\\s+$"),
         split_regex(cjk),
         {{"type", "Digits"}, {"individual_digits", false}},
         byte_level(false)});
  ADD_FAILURE() << "no pre_tokenizer for " << pre;
  return json();
}

// tokenizer.json for a vocabulary, as tokenizers' converters write it.
inline json hf_tokenizer_json(const tokenizer::Vocab& v) {
  using tokenizer::TokenType;
  using tokenizer::VocabKind;
  const std::string marker = "\xE2\x96\x81";
  json vocab = json::object(), added = json::array();
  for (int32_t i = 0; i < v.size(); ++i) {
    const TokenType t = v.types[i];
    std::string p = v.pieces[i];
    if (t == TokenType::Control || t == TokenType::Unknown || t == TokenType::UserDefined)
      added.push_back(added_token(i, p, t != TokenType::UserDefined));
    if (t == TokenType::UserDefined) continue;                 // lives in added_tokens only
    if (v.kind == VocabKind::Wpm && t == TokenType::Normal) {  // undo the phantom space
      if (p.compare(0, marker.size(), marker) == 0)
        p.erase(0, marker.size());
      else
        p = "##" + p;
    }
    vocab[p] = i;
  }
  auto piece = [&](int32_t id) { return id >= 0 ? v.pieces[size_t(id)] : std::string(); };
  json j = {
      {"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added}};
  if (v.kind == VocabKind::Spm) {
    json norm = json::array();
    if (v.add_space_prefix) norm.push_back({{"type", "Prepend"}, {"prepend", marker}});
    norm.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", marker}});
    j["normalizer"] = {{"type", "Sequence"}, {"normalizers", norm}};
    j["pre_tokenizer"] = nullptr;
    j["post_processor"] = template_processing(
        v.add_bos ? std::vector<std::string>{piece(v.bos_id)} : std::vector<std::string>{}, {});
    j["model"] = {{"type", "BPE"},
                  {"dropout", nullptr},
                  {"unk_token", piece(v.unk_id)},
                  {"continuing_subword_prefix", nullptr},
                  {"end_of_word_suffix", nullptr},
                  {"fuse_unk", true},
                  {"byte_fallback", true},
                  {"ignore_merges", false},
                  {"vocab", vocab},
                  {"merges", spm_merges(v)}};
  } else if (v.kind == VocabKind::Bpe) {
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = family_pre_tokenizer(v.pre);
    j["post_processor"] =
        v.add_bos
            ? json{{"type", "Sequence"},
                   {"processors", {byte_level(true), template_processing({piece(v.bos_id)}, {})}}}
            : byte_level(true);
    j["model"] = {{"type", "BPE"},
                  {"dropout", nullptr},
                  {"unk_token", nullptr},
                  {"byte_fallback", false},
                  {"ignore_merges", v.pre == "llama-bpe"},
                  {"vocab", vocab},
                  {"merges", v.merges}};
  } else {
    j["normalizer"] = {{"type", "BertNormalizer"},
                       {"clean_text", true},
                       {"handle_chinese_chars", true},
                       {"strip_accents", nullptr},
                       {"lowercase", true}};
    j["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
    j["post_processor"] = template_processing({piece(v.bos_id)}, {piece(v.eos_id)});
    j["model"] = {{"type", "WordPiece"},
                  {"unk_token", piece(v.unk_id)},
                  {"continuing_subword_prefix", "##"},
                  {"max_input_chars_per_word", 100},
                  {"vocab", vocab}};
  }
  j["decoder"] = nullptr;
  return j;
}

inline json hf_tokenizer_config(const tokenizer::Vocab& v, const std::string& chat_template) {
  auto piece = [&](int32_t id) -> json { return id >= 0 ? json(v.pieces[size_t(id)]) : json(); };
  const bool wpm = v.kind == tokenizer::VocabKind::Wpm;
  json c = {{wpm ? "cls_token" : "bos_token", piece(v.bos_id)},
            {wpm ? "sep_token" : "eos_token", {{"content", piece(v.eos_id)}, {"special", true}}},
            {"add_bos_token", v.add_bos},
            {"add_eos_token", v.add_eos}};
  if (!chat_template.empty()) c["chat_template"] = chat_template;
  return c;
}

inline void write_hf_tokenizer(const tokenizer::Vocab& v, const std::string& dir,
                               const std::string& chat_template = "") {
  write_text(dir + "/tokenizer.json", hf_tokenizer_json(v).dump(1));
  write_text(dir + "/tokenizer_config.json", hf_tokenizer_config(v, chat_template).dump(1));
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
  write_hf_tokenizer(tokenizer::vocab_from_gguf(f), dir, o.chat_template);
}

}  // namespace shrike::hftest
