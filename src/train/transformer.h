// The trainable form of a Llama decoder: every parameter in one flat array (so the optimizer,
// gradient clipping and checkpoints treat them alike), with the same shapes and GGUF names as
// the inference model's ModelConfig, pruned shapes included (n_heads * head_dim may differ from
// dim). Forward keeps every activation the backward pass needs; backward accumulates gradients.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/config.h"
#include "train/ops.h"

namespace shrike::train {

// One named tensor inside the flat parameter array.
struct ParamTensor {
  std::string name;  // GGUF name: "token_embd.weight", "blk.3.ffn_up.weight", ...
  int64_t offset = 0;
  int64_t rows = 0, cols = 0;  // vectors have rows == 1
  // A vector: a norm's weight or a bias (no weight decay, stored 1-D).
  bool is_norm() const { return rows == 1; }
  bool is_bias() const { return name.ends_with(".bias"); }
  int64_t size() const { return rows * cols; }
};

// Tensors in GGUF order for config c: each block's q/k/v biases when c.qkv_bias (Qwen2), no
// output matrix when c.tied_output. Every rotary layout and partial rotary are supported, so any
// configuration the inference model runs trains. Throws std::invalid_argument when c is invalid.
std::vector<ParamTensor> param_layout(const model::ModelConfig& c);
int64_t param_count(const std::vector<ParamTensor>& layout);
// Parameters outside the token embedding and output matrix (what pruning shrinks).
int64_t body_param_count(const model::ModelConfig& c);

// Bytes a training step of `tokens` tokens keeps per model (f32): the activations backward needs,
// per token and layer (the attention probabilities, which grow with sequence length, aside).
int64_t activation_bytes_per_token(const model::ModelConfig& c);

// A ragged batch of sequences for training: tokens concatenated, targets[t] the id to predict
// at token t (-1: no loss there). Spans give each sequence's tokens.
struct TokenBatch {
  std::vector<int32_t> tokens, targets;
  std::vector<Span> spans;
  void clear() { tokens.clear(), targets.clear(), spans.clear(); }
  void add(const std::vector<int32_t>& seq, const std::vector<int32_t>& seq_targets);
};

template <class T>
class Transformer {
 public:
  explicit Transformer(model::ModelConfig config);

  const model::ModelConfig& config() const { return config_; }
  const std::vector<ParamTensor>& layout() const { return layout_; }
  std::vector<T>& params() { return params_; }
  const std::vector<T>& params() const { return params_; }
  // Gradients are allocated on first use: a model that only runs forward (a distillation
  // teacher, calibration, pruning's importance) never holds a second copy of its parameters.
  // With frozen embeddings the buffer covers parameters [grad_begin(), grad_end()) only.
  std::vector<T>& grads();
  bool has_grads() const { return !grads_.empty(); }
  // Freezes the token embedding (and an untied output matrix): no gradients and so no optimizer
  // state for them, which at Qwen2.5-0.5B's 151,936 x 896 embedding is 136M of 494M parameters.
  // The other parameters' gradients are grads()[offset - grad_begin()].
  void freeze_embeddings(bool on);
  void release_gradients() { grads_ = {}; }
  bool embeddings_frozen() const { return frozen_embeddings_; }
  int64_t grad_begin() const;
  int64_t grad_end() const;
  T* param(const std::string& name);  // throws std::out_of_range for an unknown name
  const ParamTensor& tensor(const std::string& name) const;

  // Llama-style initialisation: norms 1, matrices N(0, 0.02) with residual output projections
  // scaled by 1/sqrt(2 * n_layers) (GPT-2), deterministic for the seed.
  void init_random(uint64_t seed);
  void zero_grads();

  // Runs the batch and returns the logits of the rows whose target is >= 0, in token order:
  // [n_target_rows][vocab]. Activations are kept for backward().
  const std::vector<T>& forward(const TokenBatch& batch, ThreadPool& pool);
  // The same up to the output layer: the target rows' final hidden states, whose logits
  // head_logits() then computes a few rows at a time, so that no [rows][vocab] buffer need exist
  // (151,936 x 4 bytes a row for Qwen2).
  void forward_hidden(const TokenBatch& batch, ThreadPool& pool);
  // out[(r1 - r0)][vocab]: the logits of target rows [r0, r1) of the last forward.
  void head_logits(int64_t r0, int64_t r1, T* out) const;

  // Forward only (a distillation teacher): forward keeps one layer's activations at a time, so
  // a deep model costs its parameters and one layer's activations; backward() is refused and
  // layer_activations()/residual() are not available.
  void set_forward_only(bool on) { forward_only_ = on; }
  // Residual dropout while training: each forward zeroes a fraction p of the attention and FFN
  // branches' outputs (the rest scaled by 1 / (1 - p)) before they join the residual stream, a
  // fresh mask per call from (seed, call). 0 (the default) is off; forward-only models never drop.
  void set_dropout(float p, uint64_t seed);
  float dropout() const { return dropout_; }
  int64_t n_target_rows() const { return int64_t(target_rows_.size()); }
  const std::vector<int32_t>& target_ids() const { return target_ids_; }

  // Activations of one layer in the last forward call (pruning reads them as calibration).
  struct LayerActs {
    // (silu(gate) * up is not kept: swiglu_forward of gate and up gives it.)
    std::vector<T> xn1, rstd1, q, k, v, probs, att, x_mid, xn2, rstd2, gate, up;
    // Residual dropout's kept (1) / dropped (0) elements of each branch's output (empty: none).
    std::vector<uint8_t> keep_attn, keep_ffn;
  };
  const LayerActs& layer_activations(int64_t l) const { return acts_[size_t(l)]; }
  // Layer l's FFN activation silu(gate) * up ([tokens][ffn]; the input of ffn_down), recomputed.
  std::vector<T> ffn_activation(int64_t l, ThreadPool& pool) const;
  // The residual stream entering layer l (l == n_layers: after the last layer).
  const std::vector<T>& residual(int64_t l) const { return x_[size_t(l)]; }

  // Back-propagates d_logits ([n_target_rows][vocab], for the last forward) into grads().
  void backward(const T* d_logits, ThreadPool& pool);

  // The loss of target rows [r0, r1) given their logits ([r1 - r0][vocab]): returns the loss
  // and writes its gradient with respect to those logits into d_logits (same shape).
  using HeadLoss = std::function<double(int64_t r0, int64_t r1, const T* logits, T* d_logits)>;
  // After forward_hidden() (or forward()): the output layer and the loss over the target rows a
  // chunk at a time (head_chunk_rows()), each chunk's gradient back through the output layer,
  // then the rest of backward(). The same gradients as backward() with the whole d_logits, in
  // memory for one chunk of logits. Returns the summed loss.
  // chunk_rows 0: head_chunk_rows().
  double backward_chunked(const HeadLoss& loss, ThreadPool& pool, int64_t chunk_rows = 0);
  int64_t head_chunk_rows() const;

  // Frees the activations of the last forward call (backward() is then refused until the next
  // forward).
  void release_activations();

 private:
  struct LayerPtrs {
    T *attn_norm, *wq, *wk, *wv, *wo, *ffn_norm, *w_gate, *w_up, *w_down;
    T *bq = nullptr, *bk = nullptr, *bv = nullptr;  // Qwen2's q/k/v biases
  };
  LayerPtrs layer_ptrs(T* base, int64_t l);
  T* grad_at(int64_t offset);  // nullptr for a frozen parameter
  void begin_backward();
  void backward_head_rows(int64_t r0, int64_t r1, const T* d_logits);
  void backward_body(ThreadPool& pool);
  const T* output_weight(const std::vector<T>& base) const;

  model::ModelConfig config_;
  std::vector<ParamTensor> layout_;
  std::vector<size_t> layer_first_;  // index in layout_ of each block's first tensor
  bool forward_only_ = false, frozen_embeddings_ = false;
  float dropout_ = 0;
  uint64_t dropout_seed_ = 0, dropout_calls_ = 0;
  std::vector<T> params_, grads_;
  // Activations of the last forward call.
  const TokenBatch* batch_ = nullptr;
  std::vector<std::vector<T>> x_;  // x_[l]: residual stream entering layer l; x_[n_layers]: final
  std::vector<LayerActs> acts_;
  std::vector<T> xnf_, rstdf_, rows_, logits_;
  std::vector<int64_t> target_rows_;
  std::vector<int32_t> target_ids_;
  // Backward scratch.
  std::vector<T> act_;  // one layer's silu(gate) * up, in forward and again in backward
  std::vector<T> dx_, d_rows_, d_xn_, d_att_, dq_, dk_, dv_, d_act_, d_gate_, d_up_;
  std::vector<T> d_branch_;  // dx through a branch's dropout mask
};

}  // namespace shrike::train
