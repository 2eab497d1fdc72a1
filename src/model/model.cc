// The Llama-family forward pass (pre-norm decoder blocks: RMSNorm -> attention with RoPE and
// grouped-query heads -> residual; RMSNorm -> SwiGLU FFN -> residual).
#include "model/model.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "kernels/ops.h"

namespace shrike::model {
namespace {

void resize(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// Runs fn(t) for each token; across the pool only when there is more than one token, since a
// single token's element-wise work is cheaper than waking the workers.
template <typename F>
void for_each_token(int64_t n, ThreadPool& pool, F&& fn) {
  if (n == 1) {
    fn(int64_t{0});
    return;
  }
  pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) fn(t);
  });
}

void add_in_place(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace

Model::Model(ModelConfig config, ModelWeights weights)
    : config_(std::move(config)), weights_(std::move(weights)) {
  config_.validate();
}

const kernels::PackedMatrix& Model::output_matrix() const {
  return config_.tied_output ? weights_.token_embedding : weights_.output;
}

size_t Model::decode_weight_bytes() const {
  size_t bytes = output_matrix().weight_bytes();
  for (const auto& l : weights_.layers) {
    for (const auto* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      bytes += m->weight_bytes();
    bytes += (l.attn_norm.size() + l.ffn_norm.size() + l.bq.size() + l.bk.size() + l.bv.size()) * 4;
  }
  return bytes + weights_.output_norm.size() * 4;
}

size_t Model::total_weight_bytes() const {
  size_t bytes = decode_weight_bytes();
  if (!config_.tied_output) bytes += weights_.token_embedding.weight_bytes();
  return bytes;
}

int64_t Model::parameter_count() const {
  const auto& c = config_;
  int64_t per_layer = 2 * c.dim + c.q_dim() * c.dim * 2 + c.kv_dim() * c.dim * 2 + 3 * c.ffn_dim * c.dim;
  if (c.qkv_bias) per_layer += c.q_dim() + 2 * c.kv_dim();
  int64_t total = c.n_layers * per_layer + c.dim + c.vocab_size * c.dim;
  if (!c.tied_output) total += c.vocab_size * c.dim;
  return total;
}

std::string Model::describe() const {
  const auto& c = config_;
  std::ostringstream s;
  s << c.architecture << ": " << double(parameter_count()) / 1e6 << "M params, dim " << c.dim
    << ", " << c.n_layers << " layers, " << c.n_heads << " heads (" << c.n_kv_heads
    << " kv), head dim " << c.head_dim << ", ffn " << c.ffn_dim << ", vocab " << c.vocab_size
    << ", weights " << dtype_name(weights_.layers.front().wq.type()) << " "
    << double(total_weight_bytes()) / 1e6 << " MB" << (c.tied_output ? ", tied output" : "");
  return s.str();
}

void Model::ensure_scratch(int64_t n) const {
  const auto& c = config_;
  const size_t un = size_t(n);
  resize(scratch_.x, un * size_t(c.dim));
  resize(scratch_.xn, un * size_t(std::max(c.dim, c.q_dim())));
  resize(scratch_.q, un * size_t(c.q_dim()));
  resize(scratch_.k, un * size_t(c.kv_dim()));
  resize(scratch_.v, un * size_t(c.kv_dim()));
  resize(scratch_.att, un * size_t(c.q_dim()));
  resize(scratch_.gate, un * size_t(c.ffn_dim));
  resize(scratch_.up, un * size_t(c.ffn_dim));
  resize(scratch_.rope_table, un * size_t(c.rope_dims));
}

void Model::forward(const int32_t* tokens, int64_t n, int64_t pos0, KvCache& kv, int64_t n_logits,
                    float* logits, ThreadPool& pool) const {
  const auto& c = config_;
  if (n <= 0) return;
  if (pos0 < 0 || pos0 + n > kv.capacity() || pos0 + n > c.context_length)
    throw std::out_of_range("positions " + std::to_string(pos0) + ".." + std::to_string(pos0 + n) +
                            " exceed the context (" + std::to_string(std::min(kv.capacity(), c.context_length)) + ")");
  for (int64_t t = 0; t < n; ++t)
    if (tokens[t] < 0 || tokens[t] >= c.vocab_size)
      throw std::out_of_range("token id " + std::to_string(tokens[t]) + " outside the vocabulary");
  if (n_logits < 0 || n_logits > n) throw std::out_of_range("n_logits outside 0..n");
  ensure_scratch(n);

  // Rotation angles for these positions, computed in float like the reference implementations
  // (llama2.c, ggml) so that logits agree to the last bits that matter.
  const int64_t half = c.rope_dims / 2;
  for_each_token(n, pool, [&](int64_t t) {
    float* cs = scratch_.rope_table.data() + t * c.rope_dims;
    const float pos = float(pos0 + t);
    for (int64_t i = 0; i < half; ++i) {
      float freq = 1.0f / std::pow(c.rope_theta, float(2 * i) / float(c.rope_dims));
      if (!c.rope_freq_factors.empty()) freq /= c.rope_freq_factors[size_t(i)];
      const float angle = pos * freq;
      cs[2 * i] = std::cos(angle);
      cs[2 * i + 1] = std::sin(angle);
    }
    weights_.token_embedding.dequantize_row(tokens[t], scratch_.x.data() + t * c.dim);
  });

  for (int64_t l = 0; l < c.n_layers; ++l) {
    attention_block(l, n, pos0, kv, pool);
    ffn_block(l, n, pool);
  }

  if (n_logits == 0) return;
  const int64_t first = n - n_logits;
  for_each_token(n_logits, pool, [&](int64_t i) {
    kernels::rmsnorm(scratch_.xn.data() + i * c.dim, scratch_.x.data() + (first + i) * c.dim,
                     weights_.output_norm.data(), c.dim, c.rms_eps);
  });
  kernels::matmul(output_matrix(), scratch_.xn.data(), n_logits, logits, pool);
}

void Model::attention_block(int64_t layer, int64_t n, int64_t pos0, KvCache& kv,
                            ThreadPool& pool) const {
  const auto& c = config_;
  const auto& w = weights_.layers[size_t(layer)];
  float* x = scratch_.x.data();
  float* xn = scratch_.xn.data();
  float* q = scratch_.q.data();
  float* k = scratch_.k.data();
  float* v = scratch_.v.data();

  for_each_token(n, pool, [&](int64_t t) {
    kernels::rmsnorm(xn + t * c.dim, x + t * c.dim, w.attn_norm.data(), c.dim, c.rms_eps);
  });
  kernels::matmul(w.wq, xn, n, q, pool);
  kernels::matmul(w.wk, xn, n, k, pool);
  kernels::matmul(w.wv, xn, n, v, pool);

  for_each_token(n, pool, [&](int64_t t) {
    float* qt = q + t * c.q_dim();
    float* kt = k + t * c.kv_dim();
    float* vt = v + t * c.kv_dim();
    if (c.qkv_bias) {
      add_in_place(qt, w.bq.data(), c.q_dim());
      add_in_place(kt, w.bk.data(), c.kv_dim());
      add_in_place(vt, w.bv.data(), c.kv_dim());
    }
    const float* cs = scratch_.rope_table.data() + t * c.rope_dims;
    kernels::rope(qt, c.n_heads, c.head_dim, c.rope_dims, cs, c.rope_layout);
    kernels::rope(kt, c.n_kv_heads, c.head_dim, c.rope_dims, cs, c.rope_layout);
    kv.store(layer, pos0 + t, kt, vt);
  });

  const kernels::AttentionShape shape{n, pos0, c.n_heads, c.n_kv_heads, c.head_dim,
                                      1.0f / std::sqrt(float(c.head_dim))};
  kernels::attention(shape, q, kv.keys(layer), kv.values(layer), scratch_.att.data(), pool);

  kernels::matmul(w.wo, scratch_.att.data(), n, xn, pool);
  add_in_place(x, xn, n * c.dim);
}

void Model::ffn_block(int64_t layer, int64_t n, ThreadPool& pool) const {
  const auto& c = config_;
  const auto& w = weights_.layers[size_t(layer)];
  float* x = scratch_.x.data();
  float* xn = scratch_.xn.data();
  float* gate = scratch_.gate.data();
  float* up = scratch_.up.data();

  for_each_token(n, pool, [&](int64_t t) {
    kernels::rmsnorm(xn + t * c.dim, x + t * c.dim, w.ffn_norm.data(), c.dim, c.rms_eps);
  });
  kernels::matmul(w.w_gate, xn, n, gate, pool);
  kernels::matmul(w.w_up, xn, n, up, pool);
  for_each_token(n, pool, [&](int64_t t) {
    kernels::silu_mul(gate + t * c.ffn_dim, gate + t * c.ffn_dim, up + t * c.ffn_dim, c.ffn_dim);
  });
  kernels::matmul(w.w_down, gate, n, xn, pool);
  add_in_place(x, xn, n * c.dim);
}

}  // namespace shrike::model
