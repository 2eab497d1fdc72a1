// Scalar references of the element-wise and attention kernels: plain loops, checkable by eye.
#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "kernels/ops.h"
#include "kernels/ops_internal.h"

namespace shrike::kernels::reference {
namespace {

// Element i of kv head kv_head at position p as f32: f16 widened (exactly), int8 times its row's
// scale, or the position's f16 copy when it has one.
float kv_at(const KvRows& r, int64_t p, int64_t kv_head, int64_t i) {
  switch (r.format()) {
    case KvFormat::F16:
      return fp16_to_fp32(r.half_head(p, kv_head)[i]);
    case KvFormat::Int8:
      if (const uint16_t* copy = r.f16_copy(p, kv_head)) return fp16_to_fp32(copy[i]);
      return float(r.int8_head(p, kv_head)[i]) * r.scale(p, kv_head);
    case KvFormat::F32:
      break;
  }
  return r.head(p, kv_head)[i];
}

}  // namespace

float rms_inverse(const float* x, int64_t n, float eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  return 1.0f / std::sqrt(float(ss / double(n)) + eps);
}

void rmsnorm(float* out, const float* x, const float* weight, int64_t n, float eps) {
  const float inv = rms_inverse(x, n, eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv * weight[i];
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dims, const float* cos_sin,
          RopeLayout layout) {
  const int64_t half = rot_dims / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
      const int64_t a = layout == RopeLayout::Adjacent ? 2 * i : i;
      const int64_t b = layout == RopeLayout::Adjacent ? 2 * i + 1 : i + half;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

void silu_mul(float* out, const float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void softmax(float* x, int64_t n) {
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = std::max(max, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = float(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void attention(const AttentionShape& s, const float* q, const KvRows& k, const KvRows& v,
               float* out) {
  const int64_t group = s.n_heads / s.n_kv_heads;
  const int64_t dim = s.n_heads * s.head_dim;
  std::vector<float> scores(static_cast<size_t>(s.pos0 + s.n_tokens));
  for (int64_t t = 0; t < s.n_tokens; ++t) {
    const int64_t n_keys = s.pos0 + t + 1;  // causal: keys up to and including this position
    for (int64_t h = 0; h < s.n_heads; ++h) {
      const float* qh = q + t * dim + h * s.head_dim;
      const int64_t kv_head = h / group;
      for (int64_t p = 0; p < n_keys; ++p) {
        float dot = 0;
        for (int64_t i = 0; i < s.head_dim; ++i) dot += qh[i] * kv_at(k, p, kv_head, i);
        scores[size_t(p)] = dot * s.scale;
      }
      detail::scores_to_weights(scores.data(), n_keys, s.softcap, s.window, softmax);
      float* oh = out + t * dim + h * s.head_dim;
      for (int64_t i = 0; i < s.head_dim; ++i) oh[i] = 0;
      for (int64_t p = 0; p < n_keys; ++p) {
        const float w = scores[size_t(p)];
        for (int64_t i = 0; i < s.head_dim; ++i) oh[i] += w * kv_at(v, p, kv_head, i);
      }
    }
  }
}

}  // namespace shrike::kernels::reference
