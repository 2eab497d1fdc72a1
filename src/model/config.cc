#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "model/rope.h"

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
  require(vocab_size > 0 && vocab_size <= kMaxVocab,
          "vocabulary size " + std::to_string(vocab_size));
  require(context_length > 0 && context_length <= (1 << 24),
          "context length " + std::to_string(context_length));
  require(rope_dims > 0 && rope_dims <= head_dim && rope_dims % 2 == 0,
          "rope dimension count " + std::to_string(rope_dims));
  require(rms_eps > 0 && rms_eps < 1, "rms epsilon");
  require(rope_theta > 0, "rope theta");
  require(rope_freq_factors.empty() || int64_t(rope_freq_factors.size()) == rope_dims / 2,
          "rope frequency factor count " + std::to_string(rope_freq_factors.size()));
  require(std::isfinite(embedding_scale) && embedding_scale > 0, "embedding scale");
  require(std::isfinite(attention_scale) && attention_scale >= 0, "attention scale");
  require(std::isfinite(attn_softcap) && attn_softcap >= 0, "attention logit soft-capping");
  require(std::isfinite(final_softcap) && final_softcap >= 0, "final logit soft-capping");
  require(sliding_window >= 0 && sliding_window <= (int64_t(1) << 24), "sliding window");
  require(sliding_pattern >= 0 && sliding_pattern <= n_layers, "sliding window pattern");
  require(std::isfinite(rope_theta_local) && rope_theta_local >= 0, "local rope theta");
  require(std::isfinite(rope_freq_scale) && rope_freq_scale > 0, "rope frequency scale");
  require(!rope_yarn || rope_original_context > 0, "yarn rope scaling without an original context");
  require(rope_long_factors.empty() ||
              (int64_t(rope_long_factors.size()) == rope_dims / 2 &&
               int64_t(rope_freq_factors.size()) == rope_dims / 2 && rope_original_context > 0),
          "longrope factors: " + std::to_string(rope_long_factors.size()) + " long, " +
              std::to_string(rope_freq_factors.size()) + " short for " +
              std::to_string(rope_dims / 2) + " rotated pairs");
  require(std::isfinite(rope_attn_factor) && rope_attn_factor > 0, "rope attention factor");
}

void ModelConfig::rope_table(float* cs, int64_t pos, bool local) const {
  if (local) {  // Gemma 3's sliding layers: their own base, no scaling (as llama.cpp)
    rope_cos_sin(cs, pos, rope_theta_local, rope_dims, {}, 1.0f);
    return;
  }
  // LongRoPE: the short factors within the original context, the long ones beyond it (per
  // position, so a sequence that fits the original context rotates exactly as transformers
  // rotates it).
  const std::vector<float>& factors = !rope_long_factors.empty() && pos >= rope_original_context
                                          ? rope_long_factors
                                          : rope_freq_factors;
  if (!rope_yarn) {
    rope_cos_sin(cs, pos, rope_theta, rope_dims, factors, rope_freq_scale);
    if (rope_attn_factor != 1.0f)
      for (int64_t i = 0; i < rope_dims; ++i) cs[i] *= rope_attn_factor;
    return;
  }
  // YaRN (ggml's rope_yarn): each pair's angle blends the interpolated (pos * freq_scale) and
  // the extrapolated angle by a ramp over the pairs between the correction dimensions, and cos
  // and sin grow by 1 + 0.1 ln(1 / freq_scale).
  const float n = float(rope_dims), base = rope_theta;
  auto corr_dim = [&](float n_rot) {
    return n * std::log(float(rope_original_context) / (n_rot * 2.0f * float(M_PI))) /
           (2.0f * std::log(base));
  };
  const float low = std::max(0.0f, std::floor(corr_dim(32.0f)));
  const float high = std::min(n - 1.0f, std::ceil(corr_dim(1.0f)));
  const float mscale = rope_attn_factor * (1.0f + 0.1f * std::log(1.0f / rope_freq_scale));
  for (int64_t i = 0; i < rope_dims / 2; ++i) {
    float freq = 1.0f / std::pow(base, float(2 * i) / n);
    if (!factors.empty()) freq /= factors[size_t(i)];
    const float extrap = float(pos) * freq, interp = rope_freq_scale * extrap;
    const float y = (float(i) - low) / std::max(0.001f, high - low);
    const float ramp = 1.0f - std::min(1.0f, std::max(0.0f, y));
    const float angle = interp * (1.0f - ramp) + extrap * ramp;
    cs[2 * i] = std::cos(angle) * mscale;
    cs[2 * i + 1] = std::sin(angle) * mscale;
  }
}

float ModelConfig::attention_scale_or_default() const {
  return attention_scale > 0 ? attention_scale : 1.0f / std::sqrt(float(head_dim));
}

std::string ModelConfig::departures() const {
  std::string s;
  auto add = [&](bool on, const char* what) {
    if (on) s += (s.empty() ? "" : ", ") + std::string(what);
  };
  add(qk_norm, "q/k norms");
  add(post_norms, "post-attention/FFN norms");
  add(ffn_activation != FfnActivation::Silu, "GELU gating");
  add(embedding_scale != 1.0f, "embedding scale");
  add(attention_scale > 0 && attention_scale != 1.0f / std::sqrt(float(head_dim)),
      "attention scale");
  add(attn_softcap > 0 || final_softcap > 0, "logit soft-capping");
  add(sliding_window > 0 && sliding_pattern > 0, "sliding-window attention");
  add(rope_theta_local > 0, "local rope base");
  add(rope_freq_scale != 1.0f && !rope_yarn, "linear rope scaling");
  add(rope_yarn, "yarn rope scaling");
  add(!rope_long_factors.empty(), "longrope scaling");
  add(rope_attn_factor != 1.0f, "rope attention factor");
  add(fused_qkv_ffn(), "Phi-3's fused q/k/v and gate/up tensors");
  return s;
}

bool ModelConfig::plain_llama_block() const {
  return departures().empty();
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
