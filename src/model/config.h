// Shape and hyper-parameters of a Llama-family decoder (Llama 2/3, Qwen2, Mistral, TinyLlama,
// SmolLM): everything the forward pass needs to know that is not a weight.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "kv/kv_cache.h"

namespace shrike::model {

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

  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }
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
