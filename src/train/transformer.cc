#include "train/transformer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace shrike::train {

std::vector<ParamTensor> param_layout(const model::ModelConfig& c) {
  c.validate();
  std::vector<ParamTensor> out;
  int64_t offset = 0;
  auto add = [&](std::string name, int64_t rows, int64_t cols) {
    out.push_back({std::move(name), offset, rows, cols});
    offset += rows * cols;
  };
  add("token_embd.weight", c.vocab_size, c.dim);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", 1, c.dim);
    add(p + "attn_q.weight", c.q_dim(), c.dim);
    add(p + "attn_k.weight", c.kv_dim(), c.dim);
    add(p + "attn_v.weight", c.kv_dim(), c.dim);
    add(p + "attn_output.weight", c.dim, c.q_dim());
    if (c.qkv_bias) {
      add(p + "attn_q.bias", 1, c.q_dim());
      add(p + "attn_k.bias", 1, c.kv_dim());
      add(p + "attn_v.bias", 1, c.kv_dim());
    }
    add(p + "ffn_norm.weight", 1, c.dim);
    add(p + "ffn_gate.weight", c.ffn_dim, c.dim);
    add(p + "ffn_up.weight", c.ffn_dim, c.dim);
    add(p + "ffn_down.weight", c.dim, c.ffn_dim);
  }
  add("output_norm.weight", 1, c.dim);
  if (!c.tied_output) add("output.weight", c.vocab_size, c.dim);
  return out;
}

int64_t param_count(const std::vector<ParamTensor>& layout) {
  return layout.empty() ? 0 : layout.back().offset + layout.back().size();
}

int64_t body_param_count(const model::ModelConfig& c) {
  return param_count(param_layout(c)) - c.vocab_size * c.dim * (c.tied_output ? 1 : 2);
}

int64_t activation_bytes_per_token(const model::ModelConfig& c) {
  // x, xn1, x_mid, xn2 (dim each), q and att (q_dim), k and v (kv_dim), gate and up (ffn), two
  // rstd: what forward_hidden keeps per layer.
  const int64_t per_layer = 4 * c.dim + 2 * c.q_dim() + 2 * c.kv_dim() + 2 * c.ffn_dim + 2;
  return 4 * (c.n_layers * per_layer + 2 * c.dim);
}

void TokenBatch::add(const std::vector<int32_t>& seq, const std::vector<int32_t>& seq_targets) {
  if (seq.size() != seq_targets.size())
    throw std::invalid_argument("TokenBatch::add: tokens and targets differ in length");
  spans.push_back({int64_t(tokens.size()), int64_t(seq.size())});
  tokens.insert(tokens.end(), seq.begin(), seq.end());
  targets.insert(targets.end(), seq_targets.begin(), seq_targets.end());
}

template <class T>
Transformer<T>::Transformer(model::ModelConfig config)
    : config_(std::move(config)), layout_(param_layout(config_)) {
  // The trainer's block is Llama's (with Qwen2's biases); training any other would silently
  // drop what it does not know.
  if (!config_.plain_llama_block())
    throw std::invalid_argument(config_.architecture +
                                " models cannot be trained, pruned or "
                                "distilled here yet (the trainer lacks " +
                                config_.departures() + "); inference and quantisation work");
  params_.assign(size_t(param_count(layout_)), T(0));
  for (size_t i = 0; i < layout_.size(); ++i)
    if (layout_[i].name.ends_with(".attn_norm.weight")) layer_first_.push_back(i);
}

template <class T>
std::vector<T>& Transformer<T>::grads() {
  const size_t want = size_t(grad_end() - grad_begin());
  if (grads_.size() != want) grads_.assign(want, T(0));
  return grads_;
}

template <class T>
void Transformer<T>::freeze_embeddings(bool on) {
  frozen_embeddings_ = on;
  grads_ = {};
}

template <class T>
int64_t Transformer<T>::grad_begin() const {
  return frozen_embeddings_ ? layout_.front().size() : 0;
}

template <class T>
int64_t Transformer<T>::grad_end() const {
  const int64_t all = int64_t(params_.size());
  return frozen_embeddings_ && !config_.tied_output ? all - layout_.back().size() : all;
}

template <class T>
T* Transformer<T>::grad_at(int64_t offset) {
  if (offset < grad_begin() || offset >= grad_end()) return nullptr;  // frozen
  return grads_.data() + (offset - grad_begin());
}

template <class T>
void Transformer<T>::release_activations() {
  batch_ = nullptr;
  x_ = {};
  acts_ = {};
  xnf_ = {}, rstdf_ = {}, rows_ = {}, logits_ = {};
  dx_ = {}, d_rows_ = {}, d_xn_ = {}, d_att_ = {}, dq_ = {}, dk_ = {}, dv_ = {}, d_branch_ = {};
  d_act_ = {}, d_gate_ = {}, d_up_ = {}, act_ = {};
}

template <class T>
const ParamTensor& Transformer<T>::tensor(const std::string& name) const {
  for (const ParamTensor& t : layout_)
    if (t.name == name) return t;
  throw std::out_of_range("train: no parameter named " + name);
}

template <class T>
T* Transformer<T>::param(const std::string& name) {
  return params_.data() + tensor(name).offset;
}

template <class T>
typename Transformer<T>::LayerPtrs Transformer<T>::layer_ptrs(T* base, int64_t l) {
  // A block's tensors in param_layout's order: norm, q, k, v, output, [q, k, v biases], norm,
  // gate, up, down.
  const size_t i = layer_first_[size_t(l)];
  auto at = [&](size_t k) { return base + layout_[i + k].offset; };
  const size_t b = config_.qkv_bias ? 3 : 0;
  LayerPtrs p{at(0), at(1), at(2), at(3), at(4), at(5 + b), at(6 + b), at(7 + b), at(8 + b)};
  if (b) p.bq = at(5), p.bk = at(6), p.bv = at(7);
  return p;
}

template <class T>
const T* Transformer<T>::output_weight(const std::vector<T>& base) const {
  return base.data() + (config_.tied_output ? layout_.front().offset : layout_.back().offset);
}

namespace {
uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// keep[i] = 1 with probability 1 - p: one 64-bit hash gives eight elements' bytes, compared
// against p in 1/256 steps (dropout's rate need not be finer).
void dropout_mask(std::vector<uint8_t>& keep, int64_t n, float p, uint64_t key) {
  keep.resize(size_t(n));
  const uint32_t threshold = uint32_t(std::lround(double(p) * 256.0));
  for (int64_t i = 0; i < n; i += 8) {
    uint64_t h = mix64(key ^ mix64(uint64_t(i)));
    for (int64_t j = i; j < std::min(n, i + 8); ++j, h >>= 8)
      keep[size_t(j)] = uint32_t(h & 0xFF) >= threshold;
  }
}

// branch = branch * keep / (1 - p): the expected value unchanged.
template <class T>
void apply_dropout(T* branch, const std::vector<uint8_t>& keep, float p) {
  const T scale = T(1.0 / (1.0 - double(p)));
  for (size_t i = 0; i < keep.size(); ++i) branch[i] = keep[i] ? branch[i] * scale : T(0);
}

// splitmix64 + Box-Muller: reproducible across platforms.
struct NormalRng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (double(next() >> 11) + 0.5) / double(1ull << 53); }
  double normal() {
    return std::sqrt(-2.0 * std::log(uniform())) * std::cos(6.283185307179586 * uniform());
  }
};
}  // namespace

template <class T>
void Transformer<T>::set_dropout(float p, uint64_t seed) {
  if (!(p >= 0 && p < 1)) throw std::invalid_argument("train: dropout must be in [0, 1)");
  dropout_ = float(std::lround(double(p) * 256.0)) / 256.0f;  // the masks' resolution
  dropout_seed_ = seed;
  dropout_calls_ = 0;
}

template <class T>
void Transformer<T>::init_random(uint64_t seed) {
  NormalRng rng{seed};
  const double residual_scale = 1.0 / std::sqrt(2.0 * double(config_.n_layers));
  for (const ParamTensor& t : layout_) {
    T* p = params_.data() + t.offset;
    if (t.is_norm()) {
      std::fill(p, p + t.size(), T(1));
      continue;
    }
    if (t.is_bias()) continue;  // zero
    const bool residual_out =
        t.name.ends_with("attn_output.weight") || t.name.ends_with("ffn_down.weight");
    const double sd = 0.02 * (residual_out ? residual_scale : 1.0);
    for (int64_t i = 0; i < t.size(); ++i) p[i] = T(sd * rng.normal());
  }
}

template <class T>
std::vector<T> Transformer<T>::ffn_activation(int64_t l, ThreadPool& pool) const {
  const LayerActs& a = acts_.at(size_t(l));
  std::vector<T> out(a.gate.size());
  swiglu_forward(out.data(), a.gate.data(), a.up.data(), int64_t(out.size()), pool);
  return out;
}

template <class T>
void Transformer<T>::zero_grads() {
  std::vector<T>& g = grads();
  std::fill(g.begin(), g.end(), T(0));
}

template <class T>
const std::vector<T>& Transformer<T>::forward(const TokenBatch& batch, ThreadPool& pool) {
  forward_hidden(batch, pool);
  const int64_t M = n_target_rows();
  logits_.resize(size_t(M * config_.vocab_size));
  head_logits(0, M, logits_.data());
  return logits_;
}

template <class T>
void Transformer<T>::head_logits(int64_t r0, int64_t r1, T* out) const {
  if (r0 < 0 || r1 < r0 || r1 > n_target_rows())
    throw std::out_of_range("train: head_logits rows outside the last forward's target rows");
  if (r1 > r0)
    linear_forward<T>(out, rows_.data() + r0 * config_.dim, output_weight(params_), nullptr,
                      r1 - r0, config_.dim, config_.vocab_size);
}

template <class T>
void Transformer<T>::forward_hidden(const TokenBatch& batch, ThreadPool& pool) {
  const model::ModelConfig& c = config_;
  const int64_t N = int64_t(batch.tokens.size());
  const int64_t dim = c.dim, qd = c.q_dim(), kvd = c.kv_dim(), ffn = c.ffn_dim;
  const Span* spans = batch.spans.data();
  const int64_t n_spans = int64_t(batch.spans.size());
  for (int32_t t : batch.tokens)
    if (t < 0 || t >= c.vocab_size)
      throw std::out_of_range("train: token id " + std::to_string(t) + " outside the vocabulary");
  batch_ = &batch;

  // Forward only: one layer's activations at a time and the residual stream in two buffers.
  const size_t n_x = forward_only_ ? 2 : size_t(c.n_layers + 1);
  x_.resize(n_x);
  acts_.resize(forward_only_ ? 1 : size_t(c.n_layers));
  for (auto& x : x_) x.resize(size_t(N * dim));
  auto stream = [&](int64_t l) -> std::vector<T>& { return x_[size_t(l) % n_x]; };
  embedding_forward(stream(0).data(), batch.tokens.data(), params_.data(), N, dim);
  const bool drop = dropout_ > 0 && !forward_only_;
  const uint64_t call_key = mix64(dropout_seed_ ^ mix64(dropout_calls_++));

  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerPtrs w = layer_ptrs(params_.data(), l);
    LayerActs& a = acts_[forward_only_ ? 0 : size_t(l)];
    const T* x = stream(l).data();
    a.xn1.resize(size_t(N * dim));
    a.rstd1.resize(size_t(N));
    a.q.resize(size_t(N * qd));
    a.k.resize(size_t(N * kvd));
    a.v.resize(size_t(N * kvd));
    a.probs.resize(size_t(attention_probs_size(spans, n_spans, c.n_heads)));
    a.att.resize(size_t(N * qd));
    a.x_mid.resize(size_t(N * dim));
    a.xn2.resize(size_t(N * dim));
    a.rstd2.resize(size_t(N));
    a.gate.resize(size_t(N * ffn));
    a.up.resize(size_t(N * ffn));
    act_.resize(size_t(N * ffn));

    rmsnorm_forward(a.xn1.data(), a.rstd1.data(), x, w.attn_norm, N, dim, c.rms_eps, pool);
    linear_forward<T>(a.q.data(), a.xn1.data(), w.wq, w.bq, N, dim, qd);
    linear_forward<T>(a.k.data(), a.xn1.data(), w.wk, w.bk, N, dim, kvd);
    linear_forward<T>(a.v.data(), a.xn1.data(), w.wv, w.bv, N, dim, kvd);
    rope_forward(a.q.data(), spans, n_spans, c.n_heads, c.head_dim, c.rope_theta, pool,
                 c.rope_freq_factors, c.rope_layout, c.rope_dims);
    rope_forward(a.k.data(), spans, n_spans, c.n_kv_heads, c.head_dim, c.rope_theta, pool,
                 c.rope_freq_factors, c.rope_layout, c.rope_dims);
    attention_forward(a.att.data(), a.probs.data(), a.q.data(), a.k.data(), a.v.data(), spans,
                      n_spans, c.n_heads, c.n_kv_heads, c.head_dim, pool);
    linear_forward<T>(a.x_mid.data(), a.att.data(), w.wo, nullptr, N, qd, dim);
    a.keep_attn.clear();
    a.keep_ffn.clear();
    if (drop) {
      dropout_mask(a.keep_attn, N * dim, dropout_, call_key ^ mix64(uint64_t(2 * l)));
      apply_dropout(a.x_mid.data(), a.keep_attn, dropout_);
    }
    for (int64_t i = 0; i < N * dim; ++i) a.x_mid[size_t(i)] += x[i];

    rmsnorm_forward(a.xn2.data(), a.rstd2.data(), a.x_mid.data(), w.ffn_norm, N, dim, c.rms_eps,
                    pool);
    linear_forward<T>(a.gate.data(), a.xn2.data(), w.w_gate, nullptr, N, dim, ffn);
    linear_forward<T>(a.up.data(), a.xn2.data(), w.w_up, nullptr, N, dim, ffn);
    // silu(gate) * up is not kept: backward recomputes it (an element-wise pass) instead of
    // holding N x ffn floats per layer (~20 MB a layer at 1,024 tokens of Qwen2.5-0.5B).
    swiglu_forward(act_.data(), a.gate.data(), a.up.data(), N * ffn, pool);
    T* x_out = stream(l + 1).data();
    linear_forward<T>(x_out, act_.data(), w.w_down, nullptr, N, ffn, dim);
    if (drop) {
      dropout_mask(a.keep_ffn, N * dim, dropout_, call_key ^ mix64(uint64_t(2 * l + 1)));
      apply_dropout(x_out, a.keep_ffn, dropout_);
    }
    for (int64_t i = 0; i < N * dim; ++i) x_out[i] += a.x_mid[size_t(i)];
  }

  const T* out_norm = params_.data() + layout_[layout_.size() - (c.tied_output ? 1 : 2)].offset;
  xnf_.resize(size_t(N * dim));
  rstdf_.resize(size_t(N));
  rmsnorm_forward(xnf_.data(), rstdf_.data(), stream(c.n_layers).data(), out_norm, N, dim,
                  c.rms_eps, pool);
  // Only rows that carry a loss need logits: the prompt's positions are skipped, which saves
  // most of the output layer's work when the vocabulary is large relative to the model.
  target_rows_.clear();
  target_ids_.clear();
  for (int64_t t = 0; t < N; ++t)
    if (batch.targets[size_t(t)] >= 0) {
      target_rows_.push_back(t);
      target_ids_.push_back(batch.targets[size_t(t)]);
    }
  const int64_t M = int64_t(target_rows_.size());
  rows_.resize(size_t(M * dim));
  for (int64_t r = 0; r < M; ++r)
    std::copy_n(xnf_.data() + target_rows_[size_t(r)] * dim, dim, rows_.data() + r * dim);
}

template <class T>
void Transformer<T>::begin_backward() {
  if (!batch_) throw std::logic_error("train: backward() without forward()");
  if (forward_only_) throw std::logic_error("train: backward() of a forward-only model");
  grads();  // allocated on first use
  d_rows_.assign(size_t(n_target_rows() * config_.dim), T(0));
}

template <class T>
void Transformer<T>::backward_head_rows(int64_t r0, int64_t r1, const T* d_logits) {
  const model::ModelConfig& c = config_;
  T* g_out = grad_at(c.tied_output ? layout_.front().offset : layout_.back().offset);
  if (r1 > r0)
    linear_backward<T>(d_rows_.data() + r0 * c.dim, g_out, nullptr, d_logits,
                       rows_.data() + r0 * c.dim, output_weight(params_), r1 - r0, c.dim,
                       c.vocab_size);
}

template <class T>
void Transformer<T>::backward(const T* d_logits, ThreadPool& pool) {
  begin_backward();
  backward_head_rows(0, n_target_rows(), d_logits);
  backward_body(pool);
}

template <class T>
int64_t Transformer<T>::head_chunk_rows() const {
  // About 32 MiB of logits per chunk: every row at once for a small vocabulary, ~55 rows of
  // Qwen2's 151,936.
  return std::max<int64_t>(16, (int64_t(1) << 23) / std::max<int64_t>(1, config_.vocab_size));
}

template <class T>
double Transformer<T>::backward_chunked(const HeadLoss& loss, ThreadPool& pool,
                                        int64_t chunk_rows) {
  begin_backward();
  const int64_t M = n_target_rows(), chunk = chunk_rows > 0 ? chunk_rows : head_chunk_rows();
  std::vector<T> logits, d_logits;
  double total = 0;
  for (int64_t r0 = 0; r0 < M; r0 += chunk) {
    const int64_t r1 = std::min(M, r0 + chunk);
    logits.resize(size_t((r1 - r0) * config_.vocab_size));
    d_logits.resize(logits.size());
    head_logits(r0, r1, logits.data());
    total += loss(r0, r1, logits.data(), d_logits.data());
    backward_head_rows(r0, r1, d_logits.data());
  }
  backward_body(pool);
  return total;
}

template <class T>
void Transformer<T>::backward_body(ThreadPool& pool) {
  const model::ModelConfig& c = config_;
  const TokenBatch& batch = *batch_;
  const int64_t N = int64_t(batch.tokens.size());
  const int64_t dim = c.dim, qd = c.q_dim(), kvd = c.kv_dim(), ffn = c.ffn_dim;
  const Span* spans = batch.spans.data();
  const int64_t n_spans = int64_t(batch.spans.size());
  const int64_t M = int64_t(target_rows_.size());
  auto zero = [](std::vector<T>& v, int64_t n) { v.assign(size_t(n), T(0)); };
  // The gradient a branch sees: dx through the branch's dropout mask (dx itself without one).
  auto branch_grad = [&](const std::vector<uint8_t>& keep) -> const T* {
    if (keep.empty()) return dx_.data();
    d_branch_.assign(dx_.begin(), dx_.end());
    apply_dropout(d_branch_.data(), keep, dropout_);
    return d_branch_.data();
  };

  // The output layer's input gradient (d_rows_) into the final norm, whose input gradient starts
  // the residual stream's.
  zero(d_xn_, N * dim);
  for (int64_t r = 0; r < M; ++r)
    std::copy_n(d_rows_.data() + r * dim, dim, d_xn_.data() + target_rows_[size_t(r)] * dim);
  const size_t norm_index = layout_.size() - (c.tied_output ? 1 : 2);
  zero(dx_, N * dim);
  rmsnorm_backward(dx_.data(), grad_at(layout_[norm_index].offset), d_xn_.data(),
                   x_[size_t(c.n_layers)].data(), params_.data() + layout_[norm_index].offset,
                   rstdf_.data(), N, dim, pool);

  for (int64_t l = c.n_layers - 1; l >= 0; --l) {
    const LayerPtrs w = layer_ptrs(params_.data(), l);
    // Blocks always train: their gradients sit at their offsets less the window's start.
    const LayerPtrs g = layer_ptrs(grads_.data() - grad_begin(), l);
    const LayerActs& a = acts_[size_t(l)];
    // dx holds d x_{l+1} = d x_mid (skip) + the FFN branch's contribution.
    zero(d_act_, N * ffn);
    act_.resize(size_t(N * ffn));
    swiglu_forward(act_.data(), a.gate.data(), a.up.data(), N * ffn, pool);
    linear_backward<T>(d_act_.data(), g.w_down, nullptr, branch_grad(a.keep_ffn), act_.data(),
                       w.w_down, N, ffn, dim);
    d_gate_.resize(size_t(N * ffn));
    d_up_.resize(size_t(N * ffn));
    swiglu_backward(d_gate_.data(), d_up_.data(), d_act_.data(), a.gate.data(), a.up.data(),
                    N * ffn, pool);
    zero(d_xn_, N * dim);
    linear_backward<T>(d_xn_.data(), g.w_gate, nullptr, d_gate_.data(), a.xn2.data(), w.w_gate, N,
                       dim, ffn);
    linear_backward<T>(d_xn_.data(), g.w_up, nullptr, d_up_.data(), a.xn2.data(), w.w_up, N, dim,
                       ffn);
    rmsnorm_backward(dx_.data(), g.ffn_norm, d_xn_.data(), a.x_mid.data(), w.ffn_norm,
                     a.rstd2.data(), N, dim, pool);

    // dx now holds d x_mid = d x_l (skip) + the attention branch's contribution.
    zero(d_att_, N * qd);
    linear_backward<T>(d_att_.data(), g.wo, nullptr, branch_grad(a.keep_attn), a.att.data(), w.wo,
                       N, qd, dim);
    dq_.resize(size_t(N * qd));
    dk_.resize(size_t(N * kvd));
    dv_.resize(size_t(N * kvd));
    attention_backward(dq_.data(), dk_.data(), dv_.data(), d_att_.data(), a.q.data(), a.k.data(),
                       a.v.data(), a.probs.data(), spans, n_spans, c.n_heads, c.n_kv_heads,
                       c.head_dim, pool);
    rope_backward(dq_.data(), spans, n_spans, c.n_heads, c.head_dim, c.rope_theta, pool,
                  c.rope_freq_factors, c.rope_layout, c.rope_dims);
    rope_backward(dk_.data(), spans, n_spans, c.n_kv_heads, c.head_dim, c.rope_theta, pool,
                  c.rope_freq_factors, c.rope_layout, c.rope_dims);
    zero(d_xn_, N * dim);
    linear_backward<T>(d_xn_.data(), g.wq, g.bq, dq_.data(), a.xn1.data(), w.wq, N, dim, qd);
    linear_backward<T>(d_xn_.data(), g.wk, g.bk, dk_.data(), a.xn1.data(), w.wk, N, dim, kvd);
    linear_backward<T>(d_xn_.data(), g.wv, g.bv, dv_.data(), a.xn1.data(), w.wv, N, dim, kvd);
    rmsnorm_backward(dx_.data(), g.attn_norm, d_xn_.data(), x_[size_t(l)].data(), w.attn_norm,
                     a.rstd1.data(), N, dim, pool);
  }
  if (T* g_embd = grad_at(0)) embedding_backward(g_embd, batch.tokens.data(), dx_.data(), N, dim);
}

template class Transformer<float>;
template class Transformer<double>;

}  // namespace shrike::train
