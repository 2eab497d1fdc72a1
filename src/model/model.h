// A loaded Llama-family model: configuration, weights repacked for the kernels, and the forward
// pass over a run of tokens of one sequence.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kv/kv_cache.h"
#include "model/config.h"

namespace shrike::gguf {
class GgufFile;
class GgufWriter;
}  // namespace shrike::gguf

namespace shrike::model {

struct LayerWeights {
  std::vector<float> attn_norm;                      // [dim]
  kernels::PackedMatrix wq, wk, wv, wo;              // [q_dim][dim], [kv_dim][dim] x2, [dim][q_dim]
  std::vector<float> bq, bk, bv;                     // Qwen2 biases; empty otherwise
  std::vector<float> q_norm, k_norm;                 // [head_dim] each, with config.qk_norm
  std::vector<float> attn_post_norm, ffn_post_norm;  // [dim] each, with config.post_norms
  std::vector<float> ffn_norm;                       // [dim]
  kernels::PackedMatrix w_gate, w_up, w_down;        // [ffn][dim], [ffn][dim], [dim][ffn]
  // Fused products (fuse_projections): Q, K and V stacked into [q_dim + 2 kv_dim][dim], gate and
  // up into [2 ffn][dim]. Where a fused matrix exists its parts above are empty: one product
  // (one pass over the normalised activations, one activation quantisation, one pool wake-up)
  // instead of three or two, with the same bits.
  kernels::PackedMatrix wqkv, w_gate_up;
};

struct ModelWeights {
  kernels::PackedMatrix token_embedding;  // [vocab][dim]
  std::vector<LayerWeights> layers;
  std::vector<float> output_norm;  // [dim]
  kernels::PackedMatrix output;    // [vocab][dim]; empty when tied to the embedding

  // The weight type of the blocks' products (the first layer's attention input), for reports.
  DType weight_type() const;
};

// Stacks each layer's Q/K/V and gate/up matrices into one product where their types match and
// the row counts allow it (kernels::PackedMatrix::concat_rows); other layers keep their parts.
// Every loader calls it. Returns the number of products fused.
int fuse_projections(ModelWeights& w);

// Where a forward call's time goes, summed over calls (`shrike bench --ops`). Timing costs a clock
// read per operation, so it is only done when ForwardOptions::profile points at one of these.
struct OpProfile {
  enum Op {
    kEmbed,
    kNorm,
    kQkv,
    kRopeStore,
    kAttention,
    kAttnOut,
    kGateUp,
    kSiluMul,
    kDown,
    kResidual,
    kLogits,
    kCount
  };
  static const char* name(int op);
  double seconds[kCount] = {};
  int64_t calls = 0;
};

// Activations of one forward call, owned by the caller and reused across its calls (grown, never
// shrunk), so that a const Model holds no per-call state and threads can share it, each with its
// own scratch.
struct ForwardScratch {
  std::vector<float> x, xn, q, k, v, att, gate, up;
  std::vector<float> qkv, gate_up;  // the fused products' outputs, [n][q|k|v] and [n][gate|up]
  std::vector<float> rope_table;    // [n_tokens][rope_dims/2][cos, sin] for this call's positions
  std::vector<float> rope_table_local;  // the same for sliding layers' own rope base
  std::vector<int64_t> position;        // per token of the batch
  std::vector<int32_t> sequence;        // per token: index of its sequence in the batch
  std::vector<kernels::AttentionJob> jobs;
  // A norm's output as the next products read it (RMSNorm fused with activation quantisation).
  kernels::NormedInput normed;
};

// How a forward call computes.
struct ForwardOptions {
  // Matrix products (kernels::MatmulOptions). batch_invariant: a sequence's logits are the same
  // bits whatever else is in the batch, for float weights too (quantised weights always are), at
  // some cost to single-sequence decode.
  kernels::MatmulOptions matmul{};
  // When set, each operation's wall time is added to it (see OpProfile).
  OpProfile* profile = nullptr;
};

// One sequence's share of a batched forward pass: tokens[0..n_tokens) at positions pos0.. with
// their keys and values stored in (and attention reading from) kv; the logits of its last
// n_logits tokens are wanted.
struct BatchSequence {
  const int32_t* tokens = nullptr;
  int64_t n_tokens = 0;
  int64_t pos0 = 0;
  kv::KvCache* kv = nullptr;
  int64_t n_logits = 0;
};

class Model {
 public:
  Model(ModelConfig config, ModelWeights weights);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const kernels::PackedMatrix& output_matrix() const;
  // Bytes of weights a decode step reads: every matrix once, except the embedding (one row).
  size_t decode_weight_bytes() const;
  // Bytes of all weights as stored.
  size_t total_weight_bytes() const;
  int64_t parameter_count() const;
  std::string describe() const;

  // Runs tokens[0..n) at positions pos0..pos0+n-1, storing their keys/values in kv, and writes
  // the logits of the last `n_logits` tokens (0 <= n_logits <= n) to logits: [n_logits][vocab].
  // Throws std::out_of_range when the positions exceed the cache or the model's context, or a
  // token id is outside the vocabulary. Loops pass their own scratch; without one, the call
  // allocates its activations.
  void forward(const int32_t* tokens, int64_t n, int64_t pos0, kv::KvCache& kv, int64_t n_logits,
               float* logits, ThreadPool& pool, ForwardScratch& scratch,
               ForwardOptions opt = {}) const;
  void forward(const int32_t* tokens, int64_t n, int64_t pos0, kv::KvCache& kv, int64_t n_logits,
               float* logits, ThreadPool& pool, ForwardOptions opt = {}) const;

  // A ragged batch: every sequence with its own tokens, positions and cache, in one pass (each
  // weight matrix is read once for all of them). logits: [sum of n_logits][vocab], sequence by
  // sequence. The model does not know or care whether a sequence is prefilling or decoding. With
  // opt.matmul.batch_invariant (or quantised weights) a sequence's logits are the same bits
  // whatever else is in the batch. Throws like forward(), naming the sequence.
  void forward_batch(const BatchSequence* seqs, int64_t n_seqs, float* logits, ThreadPool& pool,
                     ForwardScratch& scratch, ForwardOptions opt = {}) const;
  void forward_batch(const BatchSequence* seqs, int64_t n_seqs, float* logits, ThreadPool& pool,
                     ForwardOptions opt = {}) const;

 private:
  struct OpTimer;
  void attention_block(int64_t layer, int64_t n, const BatchSequence* seqs, int64_t n_seqs,
                       ThreadPool& pool, ForwardScratch& scratch, const kernels::MatmulOptions& mm,
                       OpTimer& timer) const;
  void ffn_block(int64_t layer, int64_t n, ThreadPool& pool, ForwardScratch& scratch,
                 const kernels::MatmulOptions& mm, OpTimer& timer) const;
  void ensure_scratch(ForwardScratch& scratch, int64_t n) const;

  ModelConfig config_;
  ModelWeights weights_;
};

// Makes the cache one sequence's forward passes use (capacity: positions). Evaluation and task
// decoding take one so that a model can be measured under any cache type; empty means an f32
// kv::ContiguousKvCache.
using KvCacheFactory =
    std::function<std::unique_ptr<kv::KvCache>(const ModelConfig& config, int64_t capacity)>;

// Loads a model file: GGUF (by magic) or llama2.c .bin, or a Hugging Face folder (config.json +
// safetensors). Throws FileError with a one-line message naming the file and what is wrong.
std::unique_ptr<Model> load_model(const std::string& path);

// The configuration a GGUF model file describes (general.architecture llama, qwen2 or mistral);
// throws FileError naming the file and the key that is missing or wrong.
ModelConfig config_from_gguf(const gguf::GgufFile& f);
// The inverse: general.architecture and the <arch>.* keys config_from_gguf reads (key/value
// lengths only when n_heads * head_dim != dim, where llama.cpp would otherwise derive them),
// plus rope_freqs.weight when the configuration has frequency factors.
void add_config_to_gguf(const ModelConfig& c, gguf::GgufWriter& w);

// Loads a Hugging Face folder: config.json (llama, mistral, qwen2) and model.safetensors or the
// shards of model.safetensors.index.json (hf_loader.cc; see hf_model.h).
std::unique_ptr<Model> load_hf_model(const std::string& dir);

}  // namespace shrike::model
