#include "model/synth.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "gguf/gguf.h"
#include "model/config.h"
#include "model/model.h"

namespace shrike::model {
namespace {

// xorshift64*: fast and reproducible across platforms (std:: distributions are not).
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
  // Uniform in [-1, 1).
  float symmetric() {
    return float(int64_t(next() >> 11) - (int64_t(1) << 52)) / float(int64_t(1) << 52);
  }
};

void add_matrix(gguf::GgufWriter& w, const std::string& name, int64_t rows, int64_t cols,
                DType type, float stddev, Rng& rng, bool vector = false) {
  // Uniform on [-a, a] has standard deviation a / sqrt(3).
  const float a = stddev * std::sqrt(3.0f);
  std::vector<float> row(static_cast<size_t>(cols));
  const size_t row_bytes = size_t(dtype_row_bytes(type, cols));
  std::vector<uint8_t> data(size_t(rows) * row_bytes);
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& x : row) x = a * rng.symmetric();
    quantize_row(type, row.data(), data.data() + size_t(r) * row_bytes, cols);
  }
  if (vector) {
    w.add_tensor(name, type, {cols}, data.data(), data.size());
  } else {
    w.add_tensor(name, type, {cols, rows}, data.data(), data.size());
  }
}

void add_ones(gguf::GgufWriter& w, const std::string& name, int64_t n) {
  std::vector<float> ones(static_cast<size_t>(n), 1.0f);
  w.add_tensor(name, DType::F32, {n}, ones.data(), ones.size() * 4);
}

// Norm weights 1 +- 0.25, so that a norm applied in the wrong place shows in the logits.
void add_norm(gguf::GgufWriter& w, const std::string& name, int64_t n, Rng& rng) {
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = 1.0f + 0.25f * rng.symmetric();
  w.add_tensor(name, DType::F32, {n}, v.data(), v.size() * 4);
}

// A SentencePiece-style vocabulary of exactly n pieces: <unk>, <s>, </s>, the 256 byte pieces,
// then made-up lowercase words with and without the word-start mark, scored by length so that
// the tokenizer merges them.
void add_synthetic_vocab(gguf::GgufWriter& w, int64_t n) {
  if (n < 3 + 256 + 1) throw std::invalid_argument("synth: --vocab must be at least 260");
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  static const char* kHex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
    types.push_back(6);
  }
  const std::string mark = "\xE2\x96\x81";  // U+2581, SentencePiece's space
  tokens.push_back(mark);
  types.push_back(1);
  for (int64_t i = 0; int64_t(tokens.size()) < n; ++i) {
    std::string word;  // bijective base-26: a..z, aa..zz, ...
    for (int64_t k = i + 1; k > 0; k = (k - 1) / 26)
      word.insert(word.begin(), char('a' + (k - 1) % 26));
    tokens.push_back(mark + word);
    types.push_back(1);
    if (int64_t(tokens.size()) < n) {
      tokens.push_back(word);
      types.push_back(1);
    }
  }
  std::vector<float> scores;
  for (size_t i = 0; i < tokens.size(); ++i) scores.push_back(i < 259 ? 0.0f : -float(i));
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_float32_array("tokenizer.ggml.scores", scores);
  w.set_int32_array("tokenizer.ggml.token_type", types);
  w.set_uint32("tokenizer.ggml.bos_token_id", 1);
  w.set_uint32("tokenizer.ggml.eos_token_id", 2);
  w.set_uint32("tokenizer.ggml.unknown_token_id", 0);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
}

// GPT-2's byte-to-unicode map: printable Latin-1 bytes stand for themselves, the others for
// U+0100 upwards in byte order (so a space is "Ġ", U+0120).
std::string byte_symbol(int b) {
  const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  int cp = b;
  if (!printable) {
    int n = 0;
    for (int x = 0; x < b; ++x)
      if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) ++n;
    cp = 256 + n;
  }
  std::string out;
  if (cp < 0x80) {
    out += char(cp);
  } else {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  }
  return out;
}

// A byte-level BPE vocabulary of exactly n tokens: the 256 byte symbols, then lowercase words in
// bijective base-26 order with and without a leading space, each made by one merge of its
// prefix (already a token) and its last letter, then the family's special tokens.
void add_synthetic_bpe_vocab(gguf::GgufWriter& w, int64_t n, const std::string& pre) {
  const std::vector<std::string> specials =
      pre == "qwen2"
          ? std::vector<std::string>{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}
          : std::vector<std::string>{"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"};
  if (n < 256 + 2 * 26 + int64_t(specials.size()))
    throw std::invalid_argument("synth: a byte-level vocabulary needs at least 311 tokens");
  std::vector<std::string> tokens, merges;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_symbol(b));
  const std::string space = byte_symbol(' ');
  const int64_t words = n - int64_t(specials.size());
  for (int64_t i = 0; int64_t(tokens.size()) < words; ++i) {
    std::string word;  // bijective base-26: a..z, aa..zz, ...
    for (int64_t k = i + 1; k > 0; k = (k - 1) / 26)
      word.insert(word.begin(), char('a' + (k - 1) % 26));
    const std::string last(1, word.back()), prefix = word.substr(0, word.size() - 1);
    for (const std::string& lead : {space, std::string()}) {
      if (int64_t(tokens.size()) >= words) break;
      if (lead.empty() && word.size() == 1) continue;  // a single letter is a byte symbol
      merges.push_back((prefix.empty() ? lead : lead + prefix) + " " + last);
      tokens.push_back(lead + word);
    }
  }
  std::vector<int32_t> types(tokens.size(), 1);
  for (const std::string& sp : specials) {
    tokens.push_back(sp);
    types.push_back(3);
  }
  const int64_t first_special = int64_t(tokens.size() - specials.size());
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", pre);
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_int32_array("tokenizer.ggml.token_type", types);
  w.set_string_array("tokenizer.ggml.merges", merges);
  // Qwen2: no BOS is added, <|endoftext|> ends; Llama-3: <|begin_of_text|> starts every prompt.
  w.set_uint32("tokenizer.ggml.bos_token_id", uint32_t(first_special));
  w.set_uint32("tokenizer.ggml.eos_token_id", uint32_t(first_special + (pre == "qwen2" ? 0 : 1)));
  w.set_bool("tokenizer.ggml.add_bos_token", pre != "qwen2");
  w.set_bool("tokenizer.ggml.add_eos_token", false);
}

// Copies the tokenizer keys of another GGUF; returns its vocabulary size.
int64_t copy_vocab(gguf::GgufWriter& w, const std::string& path) {
  const auto f = gguf::GgufFile::open(path);
  const std::string model = f.get_string("tokenizer.ggml.model");
  const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  w.set_string("tokenizer.ggml.model", model);
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  if (f.has("tokenizer.ggml.scores")) {
    std::vector<float> scores;
    for (double s : f.get_float_array("tokenizer.ggml.scores")) scores.push_back(float(s));
    w.set_float32_array("tokenizer.ggml.scores", scores);
  }
  if (f.has("tokenizer.ggml.token_type")) {
    std::vector<int32_t> types;
    for (int64_t t : f.get_int_array("tokenizer.ggml.token_type")) types.push_back(int32_t(t));
    w.set_int32_array("tokenizer.ggml.token_type", types);
  }
  if (f.has("tokenizer.ggml.merges"))
    w.set_string_array("tokenizer.ggml.merges", f.get_string_array("tokenizer.ggml.merges"));
  if (f.has("tokenizer.ggml.pre"))
    w.set_string("tokenizer.ggml.pre", f.get_string("tokenizer.ggml.pre"));
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"})
    if (f.has(key)) w.set_uint32(key, uint32_t(f.get_uint(key)));
  for (const char* key : {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
                          "tokenizer.ggml.add_space_prefix"})
    if (f.has(key)) w.set_bool(key, f.get_bool(key));
  return int64_t(tokens.size());
}

}  // namespace

void write_synth_model(const SynthOptions& opt, const std::string& path) {
  ModelConfig c;
  c.dim = opt.dim;
  c.n_layers = opt.n_layers;
  c.n_heads = opt.n_heads;
  c.n_kv_heads = opt.n_kv_heads;
  c.head_dim = opt.head_dim > 0                                ? opt.head_dim
               : opt.n_heads > 0 && opt.dim % opt.n_heads == 0 ? opt.dim / opt.n_heads
                                                               : 0;
  c.rope_dims = c.head_dim;
  c.ffn_dim = opt.ffn_dim;
  c.vocab_size = opt.vocab;
  c.context_length = opt.context_length;
  const std::string& a = opt.arch;
  if (a != "llama" && a != "qwen2" && a != "qwen3" && a != "gemma2" && a != "gemma3" && a != "phi3")
    throw std::invalid_argument(
        "synth: --arch must be llama, qwen2, qwen3, gemma2, gemma3 or phi3");
  c.architecture = a;
  c.qkv_bias = a == "qwen2";
  c.rope_theta = opt.rope_theta;
  const bool gemma = a == "gemma2" || a == "gemma3";
  const bool random_norms = a == "qwen3" || a == "phi3" || gemma;
  if (a == "phi3") {  // every layer slides (llama.cpp needs the key: 2047 is Phi-3-mini-4k's)
    c.sliding_window = opt.sliding_window > 0 ? opt.sliding_window : 2047;
    c.sliding_pattern = 1;
  }
  // The features the file's architecture implies (config_from_gguf reads them back the same).
  c.qk_norm = a == "qwen3" || a == "gemma3";
  if (gemma) {
    c.post_norms = true;
    c.ffn_activation = FfnActivation::GeluTanh;
    c.embedding_scale = std::sqrt(float(c.dim));
    c.sliding_pattern = a == "gemma2" ? 2 : 6;
    c.sliding_window = opt.sliding_window > 0 ? opt.sliding_window : (a == "gemma2" ? 4096 : 512);
    if (a == "gemma2") {
      c.attn_softcap = 50.0f;
      c.final_softcap = 30.0f;
    } else {
      c.rope_theta_local = 10000.0f;
    }
  }
  if (opt.rope_linear_factor > 0) c.rope_freq_scale = 1.0f / opt.rope_linear_factor;
  if (opt.yarn_factor > 0 || opt.longrope) {
    if (opt.rope_original <= 0)
      throw std::invalid_argument("synth: yarn and longrope need --rope-original");
    c.rope_original_context = opt.rope_original;
  }
  if (opt.yarn_factor > 0) {
    c.rope_yarn = true;
    c.rope_freq_scale = 1.0f / opt.yarn_factor;
  }
  if (opt.longrope) {  // Phi-3-128k-like factors: near 1 for fast pairs, growing for slow ones
    Rng factors_rng(opt.seed ^ 0x5eedu);
    for (int64_t i = 0; i < c.rope_dims / 2; ++i) {
      const float slow = float(i) / float(c.rope_dims / 2);
      c.rope_freq_factors.push_back(1.0f + slow * (1.0f + 0.5f * factors_rng.symmetric()));
      c.rope_long_factors.push_back(1.0f + 8.0f * slow * (1.0f + 0.5f * factors_rng.symmetric()));
    }
    const double scale = double(c.context_length) / double(opt.rope_original);
    c.rope_attn_factor =
        scale > 1 ? float(std::sqrt(1 + std::log(scale) / std::log(double(opt.rope_original))))
                  : 1.0f;
  }
  if (opt.llama3_factor > 0)
    c.rope_freq_factors = llama3_rope_factors(c.rope_dims, c.rope_theta, opt.llama3_factor, 1.0f,
                                              4.0f, opt.llama3_original);
  if (opt.n_heads <= 0 || (opt.head_dim <= 0 && opt.dim % opt.n_heads != 0))
    throw std::invalid_argument("synth: --dim must be a multiple of --heads");
  const int64_t block = dtype_block_elems(opt.type);
  if (opt.dim % block != 0 || opt.ffn_dim % block != 0)
    throw std::invalid_argument("synth: --dim and --ffn must be multiples of " +
                                std::to_string(block) + " for " +
                                std::string(dtype_name(opt.type)));

  gguf::GgufWriter w;
  w.set_string("general.name", "shrike-synth");
  // llama.cpp's file-type numbering (LLAMA_FTYPE_*): all f32 0, mostly f16 1, q4_0 2, q8_0 7,
  // q4_K_S 14, q5_K_S 16 (every matrix one k-quant), q6_K 18, bf16 32.
  const uint32_t ftype = opt.type == DType::F32    ? 0
                         : opt.type == DType::F16  ? 1
                         : opt.type == DType::Q4_0 ? 2
                         : opt.type == DType::Q8_0 ? 7
                         : opt.type == DType::Q4_K ? 14
                         : opt.type == DType::Q5_K ? 16
                         : opt.type == DType::Q6_K ? 18
                                                   : 32;
  w.set_uint32("general.file_type", ftype);
  if (!opt.vocab_from.empty()) {
    c.vocab_size = copy_vocab(w, opt.vocab_from);
  } else if (opt.vocab_type == "spm") {
    add_synthetic_vocab(w, opt.vocab);
  } else if (opt.vocab_type == "qwen2" || opt.vocab_type == "llama-bpe") {
    add_synthetic_bpe_vocab(w, opt.vocab, opt.vocab_type);
  } else {
    throw std::invalid_argument("synth: --vocab-type must be spm, qwen2 or llama-bpe");
  }
  c.validate();

  add_config_to_gguf(c, w);

  Rng rng(opt.seed);
  const float sd = 0.02f;
  // Gemma scales embeddings by sqrt(dim) and ties its output to them: rows of norm ~1 keep
  // both the residual stream and the logits at the real models' scale.
  add_matrix(w, "token_embd.weight", c.vocab_size, c.dim, opt.type,
             gemma ? 1.0f / std::sqrt(float(c.dim)) : 1.0f, rng);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    auto norm = [&](const std::string& name, int64_t n) {
      if (random_norms)
        add_norm(w, p + name, n, rng);
      else
        add_ones(w, p + name, n);
    };
    norm("attn_norm.weight", c.dim);
    if (c.fused_qkv_ffn()) {
      add_matrix(w, p + "attn_qkv.weight", c.q_dim() + 2 * c.kv_dim(), c.dim, opt.type, sd, rng);
    } else {
      add_matrix(w, p + "attn_q.weight", c.q_dim(), c.dim, opt.type, sd, rng);
      add_matrix(w, p + "attn_k.weight", c.kv_dim(), c.dim, opt.type, sd, rng);
      add_matrix(w, p + "attn_v.weight", c.kv_dim(), c.dim, opt.type, sd, rng);
    }
    add_matrix(w, p + "attn_output.weight", c.dim, c.q_dim(), opt.type, sd, rng);
    if (c.qkv_bias) {
      add_matrix(w, p + "attn_q.bias", 1, c.q_dim(), DType::F32, 10 * sd, rng, true);
      add_matrix(w, p + "attn_k.bias", 1, c.kv_dim(), DType::F32, 10 * sd, rng, true);
      add_matrix(w, p + "attn_v.bias", 1, c.kv_dim(), DType::F32, 10 * sd, rng, true);
    }
    if (c.qk_norm) {
      norm("attn_q_norm.weight", c.head_dim);
      norm("attn_k_norm.weight", c.head_dim);
    }
    if (c.post_norms) norm("post_attention_norm.weight", c.dim);
    norm("ffn_norm.weight", c.dim);
    if (c.fused_qkv_ffn()) {
      add_matrix(w, p + "ffn_up.weight", 2 * c.ffn_dim, c.dim, opt.type, sd, rng);
    } else {
      add_matrix(w, p + "ffn_gate.weight", c.ffn_dim, c.dim, opt.type, sd, rng);
      add_matrix(w, p + "ffn_up.weight", c.ffn_dim, c.dim, opt.type, sd, rng);
    }
    add_matrix(w, p + "ffn_down.weight", c.dim, c.ffn_dim, opt.type, sd, rng);
    if (c.post_norms) norm("post_ffw_norm.weight", c.dim);
  }
  if (random_norms)
    add_norm(w, "output_norm.weight", c.dim, rng);
  else
    add_ones(w, "output_norm.weight", c.dim);
  if (!opt.tied_output && !gemma)
    add_matrix(w, "output.weight", c.vocab_size, c.dim, opt.type, sd, rng);
  w.write(path);
}

}  // namespace shrike::model
