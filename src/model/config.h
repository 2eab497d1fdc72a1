// Shape and hyper-parameters of a Llama-family decoder (Llama 2/3, Qwen2/3, Mistral, Gemma 2/3,
// TinyLlama, SmolLM): everything the forward pass needs to know that is not a weight.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "kv/kv_cache.h"

namespace shrike::model {

// The FFN's gating nonlinearity: SiLU (SwiGLU: Llama, Qwen, Mistral) or GELU with the tanh
// approximation (GeGLU: Gemma).
enum class FfnActivation { Silu, GeluTanh };

struct ModelConfig {
  std::string architecture = "llama";  // GGUF general.architecture
  int64_t dim = 0;                     // embedding width
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;  // grouped-query attention: n_heads % n_kv_heads == 0
  int64_t head_dim = 0;    // usually dim / n_heads, but any value is allowed
  int64_t ffn_dim = 0;
  int64_t vocab_size = 0;
  int64_t context_length = 2048;
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  int64_t rope_dims = 0;  // rotated dimensions per head (<= head_dim)
  kernels::RopeLayout rope_layout = kernels::RopeLayout::Adjacent;
  // Per-frequency divisors of the rotation frequency (Llama-3 scaling); empty = none.
  std::vector<float> rope_freq_factors;
  bool tied_output = false;  // output matrix is the token embedding
  bool qkv_bias = false;     // Qwen2
  int32_t bos_id = 1, eos_id = 2;
  bool add_bos = true;

  // Departures from the Llama block (all off for Llama, Qwen2, Mistral without a window):
  bool qk_norm = false;     // per-head RMSNorm of q and k before RoPE (Qwen3, Gemma 3)
  bool post_norms = false;  // RMSNorm of the attention and FFN outputs before each residual add
  FfnActivation ffn_activation = FfnActivation::Silu;
  float embedding_scale = 1.0f;  // token embeddings times this (Gemma: sqrt(dim))
  float attention_scale = 0.0f;  // q.k times this; 0: 1 / sqrt(head_dim)
  float attn_softcap = 0.0f;     // > 0: scores capped at cap * tanh(s / cap) (Gemma 2)
  float final_softcap = 0.0f;    // > 0: logits capped likewise (Gemma 2)
  // Sliding-window attention: on a sliding layer a query sees the keys less than sliding_window
  // positions before it. sliding_pattern 1: every layer slides (Mistral, Phi-3); k > 1: every
  // k-th layer (l % k == k - 1) is global, the others slide (Gemma 2: 2, Gemma 3: 6).
  int64_t sliding_window = 0;
  int64_t sliding_pattern = 0;
  float rope_theta_local = 0.0f;  // rope base of the sliding layers (Gemma 3: 10000); 0: rope_theta
  float rope_freq_scale = 1.0f;   // linear rope scaling: positions times this (1 / factor)
  // YaRN (Qwen2.5 / Qwen3 long context; rope_freq_scale = 1 / factor) and LongRoPE (Phi-3 128k:
  // rope_freq_factors are the short factors, rope_long_factors those for positions from
  // rope_original_context on), as ggml computes them. rope_attn_factor multiplies cos and sin.
  bool rope_yarn = false;
  int64_t rope_original_context = 0;
  std::vector<float> rope_long_factors;
  float rope_attn_factor = 1.0f;

  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }
  bool is_sliding(int64_t layer) const {
    if (sliding_window <= 0 || sliding_pattern <= 0) return false;
    return sliding_pattern == 1 || layer % sliding_pattern != sliding_pattern - 1;
  }
  float attention_scale_or_default() const;
  // Phi-3 files hold q/k/v as one matrix (attn_qkv) and gate/up as one (ffn_up, 2 x ffn rows).
  bool fused_qkv_ffn() const { return architecture == "phi3"; }
  // True when none of the departures above is used: the block the trainer, the pruner and
  // export-hf implement. The others refuse a model where this is false, naming the feature.
  bool plain_llama_block() const;
  // The rotation of position pos (model/rope.h's table: rope_dims / 2 pairs of cos, sin) with
  // every scaling this configuration has; local: a Gemma 3 sliding layer's own base.
  void rope_table(float* cs, int64_t pos, bool local = false) const;
  std::string departures() const;  // the features that make plain_llama_block() false
  // What one position stores in a KV cache.
  kv::KvDims kv_dims() const { return {n_layers, n_kv_heads, head_dim}; }
  // Checks that the numbers make sense together; throws std::invalid_argument naming the field.
  void validate() const;
};

// Llama-3.1 frequency scaling ("rope_type": "llama3"): one factor per rotated frequency pair,
// computed the way Meta's reference does (wavelength bands between low and high frequency).
std::vector<float> llama3_rope_factors(int64_t rope_dims, float theta, float factor,
                                       float low_freq_factor, float high_freq_factor,
                                       int64_t original_context);

}  // namespace shrike::model
