// The Llama-family forward pass (pre-norm decoder blocks: RMSNorm -> attention with RoPE and
// grouped-query heads -> residual; RMSNorm -> SwiGLU FFN -> residual), with the departures of
// Qwen3 and Gemma 2 / 3 (q/k norms, post norms, GeGLU, soft-capping, sliding windows) where the
// configuration asks for them.
#include "model/model.h"

#include <chrono>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "kernels/ops.h"
#include "model/rope.h"

namespace shrike::model {
namespace {

void resize(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// Runs fn(t) for each token; across the pool only for more than kInlineTokens tokens. A few
// tokens' element-wise work (norms, RoPE, SiLU: microseconds) costs less than waking the workers,
// four times per layer, which on a busy machine is what made a 5-token verification step 1.4x a
// one-token step at Q8_0 (docs/ARCHITECTURE.md, "Speculative decoding").
constexpr int64_t kInlineTokens = 8;

template <typename F>
void for_each_token(int64_t n, ThreadPool& pool, F&& fn) {
  if (n <= kInlineTokens) {
    for (int64_t t = 0; t < n; ++t) fn(t);
    return;
  }
  pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) fn(t);
  });
}

// The weight type a norm's output is prepared for (kernels::NormedInput): the products' type
// when all of them are quantised or all are float; F32 (plain f32 rows) when they mix.
DType normed_type(std::initializer_list<const kernels::PackedMatrix*> parts) {
  const DType first = (*parts.begin())->type();
  for (const kernels::PackedMatrix* m : parts)
    if (kernels::NormedInput::quantised_weights(m->type()) !=
        kernels::NormedInput::quantised_weights(first))
      return DType::F32;
  return first;
}

void add_in_place(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace

const char* OpProfile::name(int op) {
  static const char* const names[kCount] = {
      "embedding",    "rmsnorm",          "q/k/v products",      "rope + kv store",
      "attention",    "attention output", "gate/up products",    "silu * up",
      "down product", "residual adds",    "output norm + logits"};
  return op >= 0 && op < kCount ? names[op] : "?";
}

// Adds the time since the previous mark to an operation's total; does nothing without a profile.
struct Model::OpTimer {
  OpProfile* profile;
  std::chrono::steady_clock::time_point last;
  explicit OpTimer(OpProfile* p) : profile(p) {
    if (p) last = std::chrono::steady_clock::now();
  }
  void mark(OpProfile::Op op) {
    if (!profile) return;
    const auto now = std::chrono::steady_clock::now();
    profile->seconds[op] += std::chrono::duration<double>(now - last).count();
    last = now;
  }
};

DType ModelWeights::weight_type() const {
  if (layers.empty()) return token_embedding.type();
  const LayerWeights& l = layers.front();
  return l.wqkv.rows() > 0 ? l.wqkv.type() : l.wq.type();
}

int fuse_projections(ModelWeights& w) {
  int fused = 0;
  for (LayerWeights& l : w.layers) {
    if (l.wqkv.rows() == 0 && l.wq.rows() > 0) {
      l.wqkv = kernels::PackedMatrix::concat_rows({&l.wq, &l.wk, &l.wv});
      if (l.wqkv.rows() > 0) {
        l.wq = {};
        l.wk = {};
        l.wv = {};
        ++fused;
      }
    }
    if (l.w_gate_up.rows() == 0 && l.w_gate.rows() > 0) {
      l.w_gate_up = kernels::PackedMatrix::concat_rows({&l.w_gate, &l.w_up});
      if (l.w_gate_up.rows() > 0) {
        l.w_gate = {};
        l.w_up = {};
        ++fused;
      }
    }
  }
  return fused;
}

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
    for (const auto* m :
         {&l.wq, &l.wk, &l.wv, &l.wqkv, &l.wo, &l.w_gate, &l.w_up, &l.w_gate_up, &l.w_down})
      bytes += m->weight_bytes();
    bytes +=
        (l.attn_norm.size() + l.ffn_norm.size() + l.bq.size() + l.bk.size() + l.bv.size() +
         l.q_norm.size() + l.k_norm.size() + l.attn_post_norm.size() + l.ffn_post_norm.size()) *
        4;
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
  int64_t per_layer =
      2 * c.dim + c.q_dim() * c.dim * 2 + c.kv_dim() * c.dim * 2 + 3 * c.ffn_dim * c.dim;
  if (c.qkv_bias) per_layer += c.q_dim() + 2 * c.kv_dim();
  if (c.qk_norm) per_layer += 2 * c.head_dim;
  if (c.post_norms) per_layer += 2 * c.dim;
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
    << ", weights " << dtype_name(weights_.weight_type()) << " "
    << double(total_weight_bytes()) / 1e6 << " MB" << (c.tied_output ? ", tied output" : "");
  return s.str();
}

void Model::ensure_scratch(ForwardScratch& scratch, int64_t n) const {
  const auto& c = config_;
  const size_t un = size_t(n);
  resize(scratch.x, un * size_t(c.dim));
  resize(scratch.xn, un * size_t(std::max(c.dim, c.q_dim())));
  resize(scratch.q, un * size_t(c.q_dim()));
  resize(scratch.qkv, un * size_t(c.q_dim() + 2 * c.kv_dim()));
  resize(scratch.gate_up, un * size_t(2 * c.ffn_dim));
  resize(scratch.k, un * size_t(c.kv_dim()));
  resize(scratch.v, un * size_t(c.kv_dim()));
  resize(scratch.att, un * size_t(c.q_dim()));
  resize(scratch.gate, un * size_t(c.ffn_dim));
  resize(scratch.up, un * size_t(c.ffn_dim));
  resize(scratch.rope_table, un * size_t(c.rope_dims));
  if (c.rope_theta_local > 0) resize(scratch.rope_table_local, un * size_t(c.rope_dims));
  if (scratch.position.size() < un) scratch.position.resize(un);
  if (scratch.sequence.size() < un) scratch.sequence.resize(un);
}

void Model::forward(const int32_t* tokens, int64_t n, int64_t pos0, kv::KvCache& kv,
                    int64_t n_logits, float* logits, ThreadPool& pool, ForwardScratch& scratch,
                    ForwardOptions opt) const {
  const BatchSequence seq{tokens, n, pos0, &kv, n_logits};
  forward_batch(&seq, 1, logits, pool, scratch, opt);
}

void Model::forward(const int32_t* tokens, int64_t n, int64_t pos0, kv::KvCache& kv,
                    int64_t n_logits, float* logits, ThreadPool& pool, ForwardOptions opt) const {
  ForwardScratch scratch;
  forward(tokens, n, pos0, kv, n_logits, logits, pool, scratch, opt);
}

void Model::forward_batch(const BatchSequence* seqs, int64_t n_seqs, float* logits,
                          ThreadPool& pool, ForwardOptions opt) const {
  ForwardScratch scratch;
  forward_batch(seqs, n_seqs, logits, pool, scratch, opt);
}

void Model::forward_batch(const BatchSequence* seqs, int64_t n_seqs, float* logits,
                          ThreadPool& pool, ForwardScratch& scratch, ForwardOptions opt) const {
  const auto& c = config_;
  int64_t n = 0, n_logits = 0;
  for (int64_t i = 0; i < n_seqs; ++i) {
    const BatchSequence& s = seqs[i];
    const std::string who = n_seqs > 1 ? "sequence " + std::to_string(i) + ": " : "";
    if (s.n_tokens < 0 || s.kv == nullptr)
      throw std::invalid_argument(who + "no tokens or no cache");
    const int64_t limit = std::min(s.kv->capacity(), c.context_length);
    if (s.pos0 < 0 || s.pos0 + s.n_tokens > limit)
      throw std::out_of_range(who + "positions " + std::to_string(s.pos0) + ".." +
                              std::to_string(s.pos0 + s.n_tokens) + " exceed the context (" +
                              std::to_string(limit) + ")");
    for (int64_t t = 0; t < s.n_tokens; ++t)
      if (s.tokens[t] < 0 || s.tokens[t] >= c.vocab_size)
        throw std::out_of_range(who + "token id " + std::to_string(s.tokens[t]) +
                                " outside the vocabulary");
    if (s.n_logits < 0 || s.n_logits > s.n_tokens)
      throw std::out_of_range(who + "n_logits outside 0..n");
    n += s.n_tokens;
    n_logits += s.n_logits;
  }
  if (n == 0) return;
  for (int64_t i = 0; i < n_seqs; ++i)
    if (seqs[i].n_tokens > 0) seqs[i].kv->begin_forward(seqs[i].pos0, seqs[i].n_tokens);
  ensure_scratch(scratch, n);
  for (int64_t i = 0, t = 0; i < n_seqs; ++i)
    for (int64_t j = 0; j < seqs[i].n_tokens; ++j, ++t) {
      scratch.position[size_t(t)] = seqs[i].pos0 + j;
      scratch.sequence[size_t(t)] = int32_t(i);
    }
  const int64_t* position = scratch.position.data();
  const int32_t* sequence = scratch.sequence.data();

  OpTimer timer(opt.profile);
  if (opt.profile) ++opt.profile->calls;
  // Rotation angles for these positions (model/rope.h, shared with the trainer).
  for_each_token(n, pool, [&](int64_t t) {
    c.rope_table(scratch.rope_table.data() + t * c.rope_dims, position[t]);
    if (c.rope_theta_local > 0)
      c.rope_table(scratch.rope_table_local.data() + t * c.rope_dims, position[t], true);
    const BatchSequence& s = seqs[sequence[t]];
    float* xt = scratch.x.data() + t * c.dim;
    weights_.token_embedding.dequantize_row(s.tokens[position[t] - s.pos0], xt);
    if (c.embedding_scale != 1.0f)
      for (int64_t i = 0; i < c.dim; ++i) xt[i] *= c.embedding_scale;
  });

  timer.mark(OpProfile::kEmbed);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    attention_block(l, n, seqs, n_seqs, pool, scratch, opt.matmul, timer);
    ffn_block(l, n, pool, scratch, opt.matmul, timer);
  }
  for (int64_t i = 0; i < n_seqs; ++i)
    if (seqs[i].n_tokens > 0) seqs[i].kv->end_forward(seqs[i].n_logits > 0);

  if (n_logits == 0) return;
  // The rows whose logits are wanted: the last n_logits tokens of each sequence, in order.
  for (int64_t i = 0, t = 0, r = 0; i < n_seqs; t += seqs[i].n_tokens, ++i)
    for (int64_t j = seqs[i].n_tokens - seqs[i].n_logits; j < seqs[i].n_tokens; ++j, ++r)
      scratch.position[size_t(r)] = t + j;  // (positions are no longer needed)
  scratch.normed.prepare(scratch.x.data(), position, n_logits, weights_.output_norm.data(), c.dim,
                         c.rms_eps, output_matrix().type(), pool);
  kernels::matmul(output_matrix(), scratch.normed, logits, pool, opt.matmul);
  if (c.final_softcap > 0) {
    const float cap = c.final_softcap;
    for (int64_t i = 0; i < n_logits * c.vocab_size; ++i)
      logits[i] = cap * std::tanh(logits[i] / cap);
  }
  timer.mark(OpProfile::kLogits);
}

void Model::attention_block(int64_t layer, int64_t n, const BatchSequence* seqs, int64_t n_seqs,
                            ThreadPool& pool, ForwardScratch& scratch,
                            const kernels::MatmulOptions& mm, OpTimer& timer) const {
  const auto& c = config_;
  const auto& w = weights_.layers[size_t(layer)];
  float* x = scratch.x.data();
  float* xn = scratch.xn.data();
  float* q = scratch.q.data();
  float* k = scratch.k.data();
  float* v = scratch.v.data();
  const int64_t* position = scratch.position.data();
  const int32_t* sequence = scratch.sequence.data();

  const bool fused = w.wqkv.rows() > 0;
  const bool sliding = c.is_sliding(layer);
  kernels::NormedInput& normed = scratch.normed;
  normed.prepare(x, nullptr, n, w.attn_norm.data(), c.dim, c.rms_eps,
                 fused ? w.wqkv.type() : normed_type({&w.wq, &w.wk, &w.wv}), pool);
  timer.mark(OpProfile::kNorm);
  const int64_t qkv_dim = c.q_dim() + 2 * c.kv_dim();
  if (fused) {
    kernels::matmul(w.wqkv, normed, scratch.qkv.data(), pool, mm);
  } else {
    kernels::matmul(w.wq, normed, q, pool, mm);
    kernels::matmul(w.wk, normed, k, pool, mm);
    kernels::matmul(w.wv, normed, v, pool, mm);
  }
  timer.mark(OpProfile::kQkv);

  for_each_token(n, pool, [&](int64_t t) {
    float* qt = q + t * c.q_dim();
    float* kt = k + t * c.kv_dim();
    float* vt = v + t * c.kv_dim();
    if (fused) {  // [q | k | v] per token, split so attention reads q rows of stride q_dim
      const float* src = scratch.qkv.data() + t * qkv_dim;
      std::copy(src, src + c.q_dim(), qt);
      std::copy(src + c.q_dim(), src + c.q_dim() + c.kv_dim(), kt);
      std::copy(src + c.q_dim() + c.kv_dim(), src + qkv_dim, vt);
    }
    if (c.qkv_bias) {
      add_in_place(qt, w.bq.data(), c.q_dim());
      add_in_place(kt, w.bk.data(), c.kv_dim());
      add_in_place(vt, w.bv.data(), c.kv_dim());
    }
    if (c.qk_norm) {  // each head normalised on its own, before the rotation
      for (int64_t h = 0; h < c.n_heads; ++h)
        kernels::rmsnorm(qt + h * c.head_dim, qt + h * c.head_dim, w.q_norm.data(), c.head_dim,
                         c.rms_eps);
      for (int64_t h = 0; h < c.n_kv_heads; ++h)
        kernels::rmsnorm(kt + h * c.head_dim, kt + h * c.head_dim, w.k_norm.data(), c.head_dim,
                         c.rms_eps);
    }
    const float* cs = (sliding && c.rope_theta_local > 0 ? scratch.rope_table_local.data()
                                                         : scratch.rope_table.data()) +
                      t * c.rope_dims;
    kernels::rope(qt, c.n_heads, c.head_dim, c.rope_dims, cs, c.rope_layout);
    kernels::rope(kt, c.n_kv_heads, c.head_dim, c.rope_dims, cs, c.rope_layout);
    seqs[sequence[t]].kv->store(layer, position[t], kt, vt);
  });
  timer.mark(OpProfile::kRopeStore);

  const float scale = c.attention_scale_or_default();
  auto& jobs = scratch.jobs;
  jobs.clear();
  for (int64_t i = 0, t = 0; i < n_seqs; t += seqs[i].n_tokens, ++i) {
    const BatchSequence& s = seqs[i];
    if (s.n_tokens == 0) continue;
    const kernels::AttentionShape shape{
        s.n_tokens, s.pos0, c.n_heads,      c.n_kv_heads,
        c.head_dim, scale,  c.attn_softcap, sliding ? c.sliding_window : 0};
    const kv::WeightSums sums = s.kv->attention_weight_sums(layer);
    jobs.push_back({shape, q + t * c.q_dim(), s.kv->keys(layer), s.kv->values(layer),
                    scratch.att.data() + t * c.q_dim(), sums.data, sums.stride, sums.index});
  }
  kernels::attention_batch(jobs.data(), int64_t(jobs.size()), pool);
  timer.mark(OpProfile::kAttention);

  kernels::matmul(w.wo, scratch.att.data(), n, xn, pool, mm);
  if (c.post_norms)
    for_each_token(n, pool, [&](int64_t t) {
      kernels::rmsnorm(xn + t * c.dim, xn + t * c.dim, w.attn_post_norm.data(), c.dim, c.rms_eps);
    });
  timer.mark(OpProfile::kAttnOut);
  add_in_place(x, xn, n * c.dim);
  timer.mark(OpProfile::kResidual);
}

void Model::ffn_block(int64_t layer, int64_t n, ThreadPool& pool, ForwardScratch& scratch,
                      const kernels::MatmulOptions& mm, OpTimer& timer) const {
  const auto& c = config_;
  const auto& w = weights_.layers[size_t(layer)];
  float* x = scratch.x.data();
  float* xn = scratch.xn.data();
  float* gate = scratch.gate.data();
  float* up = scratch.up.data();

  const bool fused = w.w_gate_up.rows() > 0;
  kernels::NormedInput& normed = scratch.normed;
  normed.prepare(x, nullptr, n, w.ffn_norm.data(), c.dim, c.rms_eps,
                 fused ? w.w_gate_up.type() : normed_type({&w.w_gate, &w.w_up}), pool);
  timer.mark(OpProfile::kNorm);
  if (fused) {
    kernels::matmul(w.w_gate_up, normed, scratch.gate_up.data(), pool, mm);
  } else {
    kernels::matmul(w.w_gate, normed, gate, pool, mm);
    kernels::matmul(w.w_up, normed, up, pool, mm);
  }
  timer.mark(OpProfile::kGateUp);
  for_each_token(n, pool, [&](int64_t t) {
    const float* g = fused ? scratch.gate_up.data() + t * 2 * c.ffn_dim : gate + t * c.ffn_dim;
    const float* u = fused ? g + c.ffn_dim : up + t * c.ffn_dim;
    if (c.ffn_activation == FfnActivation::GeluTanh)
      kernels::gelu_mul(gate + t * c.ffn_dim, g, u, c.ffn_dim);
    else
      kernels::silu_mul(gate + t * c.ffn_dim, g, u, c.ffn_dim);
  });
  timer.mark(OpProfile::kSiluMul);
  kernels::matmul(w.w_down, gate, n, xn, pool, mm);
  if (c.post_norms)
    for_each_token(n, pool, [&](int64_t t) {
      kernels::rmsnorm(xn + t * c.dim, xn + t * c.dim, w.ffn_post_norm.data(), c.dim, c.rms_eps);
    });
  timer.mark(OpProfile::kDown);
  add_in_place(x, xn, n * c.dim);
  timer.mark(OpProfile::kResidual);
}

}  // namespace shrike::model
