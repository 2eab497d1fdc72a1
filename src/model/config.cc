#include "model/config.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace shrike::model {
namespace {
void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("invalid model config: " + what);
}
}  // namespace

void ModelConfig::validate() const {
  // Bounds generous enough for any real model, tight enough that a corrupt header cannot make us
  // allocate terabytes.
  constexpr int64_t kMaxWidth = 1 << 17, kMaxLayers = 1024, kMaxVocab = 1 << 22;
  require(dim > 0 && dim <= kMaxWidth, "embedding width " + std::to_string(dim));
  require(n_layers > 0 && n_layers <= kMaxLayers, "layer count " + std::to_string(n_layers));
  require(n_heads > 0 && n_heads <= dim, "head count " + std::to_string(n_heads));
  require(n_kv_heads > 0 && n_kv_heads <= n_heads && n_heads % n_kv_heads == 0,
          "kv head count " + std::to_string(n_kv_heads) + " with " + std::to_string(n_heads) +
              " heads");
  require(head_dim > 0 && head_dim <= 1024 && head_dim % 2 == 0,
          "head dimension " + std::to_string(head_dim));
  require(ffn_dim > 0 && ffn_dim <= 8 * kMaxWidth, "ffn width " + std::to_string(ffn_dim));
  require(vocab_size > 0 && vocab_size <= kMaxVocab, "vocabulary size " + std::to_string(vocab_size));
  require(context_length > 0 && context_length <= (1 << 24),
          "context length " + std::to_string(context_length));
  require(rope_dims > 0 && rope_dims <= head_dim && rope_dims % 2 == 0,
          "rope dimension count " + std::to_string(rope_dims));
  require(rms_eps > 0 && rms_eps < 1, "rms epsilon");
  require(rope_theta > 0, "rope theta");
  require(rope_freq_factors.empty() || int64_t(rope_freq_factors.size()) == rope_dims / 2,
          "rope frequency factor count " + std::to_string(rope_freq_factors.size()));
}

std::vector<float> llama3_rope_factors(int64_t rope_dims, float theta, float factor,
                                       float low_freq_factor, float high_freq_factor,
                                       int64_t original_context) {
  const double low_wavelen = double(original_context) / low_freq_factor;
  const double high_wavelen = double(original_context) / high_freq_factor;
  std::vector<float> out;
  for (int64_t i = 0; i < rope_dims / 2; ++i) {
    const double freq = std::pow(double(theta), -2.0 * double(i) / double(rope_dims));
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(factor);
    } else {
      const double smooth = (double(original_context) / wavelen - low_freq_factor) /
                            (high_freq_factor - low_freq_factor);
      // scaled freq = (1 - smooth) * freq / factor + smooth * freq  =>  divisor:
      out.push_back(float(1.0 / ((1 - smooth) / factor + smooth)));
    }
  }
  return out;
}

}  // namespace shrike::model
