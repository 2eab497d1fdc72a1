#include "quant/calibration.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "train/ops.h"

namespace shrike::quant {

std::vector<float> InputStats::mean_abs() const {
  std::vector<float> m(size_t(dim), 0.0f);
  if (n_rows > 0)
    for (int64_t i = 0; i < dim; ++i) m[size_t(i)] = float(abs_sum[size_t(i)] / double(n_rows));
  return m;
}

std::string input_key(const std::string& name) {
  // "blk.<digits>.<kind>.weight"
  const std::string prefix = "blk.", suffix = ".weight";
  if (!name.starts_with(prefix) || !name.ends_with(suffix)) return "";
  const size_t digits_end = name.find('.', prefix.size());
  if (digits_end == std::string::npos || digits_end == prefix.size()) return "";
  for (size_t i = prefix.size(); i < digits_end; ++i)
    if (name[i] < '0' || name[i] > '9') return "";
  const std::string block = name.substr(0, digits_end + 1);
  const std::string kind =
      name.substr(digits_end + 1, name.size() - suffix.size() - digits_end - 1);
  if (kind == "attn_q" || kind == "attn_k" || kind == "attn_v") return block + "attn_in";
  if (kind == "attn_output") return block + "attn_out_in";
  if (kind == "ffn_gate" || kind == "ffn_up") return block + "ffn_in";
  if (kind == "ffn_down") return block + "ffn_down_in";
  return "";
}

namespace {

// Adds the rows of x ([n][dim]) to the statistics; `take` says which rows join the sample.
void accumulate(InputStats& s, const float* x, int64_t n, int64_t dim,
                const std::vector<bool>& take, bool gram, std::vector<float>& gram_scratch) {
  if (s.dim == 0) {
    s.dim = dim;
    s.abs_sum.assign(size_t(dim), 0.0);
    if (gram) s.gram.assign(size_t(dim * dim), 0.0);
  }
  for (int64_t t = 0; t < n; ++t) {
    const float* row = x + t * dim;
    for (int64_t i = 0; i < dim; ++i) s.abs_sum[size_t(i)] += std::fabs(row[i]);
    if (take[size_t(t)]) s.sample.insert(s.sample.end(), row, row + dim);
  }
  s.n_rows += n;
  if (gram) {
    // XᵀX of this batch in f32 through BLAS (linear_backward's weight gradient is exactly
    // d_outᵀ · in), then summed in double across batches.
    gram_scratch.assign(size_t(dim * dim), 0.0f);
    train::linear_backward<float>(nullptr, gram_scratch.data(), nullptr, x, x, nullptr, n, dim,
                                  dim);
    for (size_t i = 0; i < gram_scratch.size(); ++i) s.gram[i] += gram_scratch[i];
  }
}

}  // namespace

std::map<std::string, InputStats> collect_input_stats(train::Transformer<float>& model,
                                                      const std::vector<std::vector<int32_t>>& seqs,
                                                      const CalibrationOptions& o,
                                                      ThreadPool& pool) {
  const model::ModelConfig& c = model.config();
  int64_t total = 0;
  for (const auto& s : seqs) {
    if (int64_t(s.size()) > c.context_length)
      throw std::invalid_argument("calibration: a sequence of " + std::to_string(s.size()) +
                                  " tokens exceeds the model's context length " +
                                  std::to_string(c.context_length));
    total += int64_t(s.size());
  }
  if (total == 0) throw std::invalid_argument("calibration: no calibration tokens");
  // Every stride-th position (over all sequences) joins the sample: spread evenly, deterministic.
  const int64_t stride = std::max<int64_t>(1, (total + o.max_sample_rows - 1) / o.max_sample_rows);

  std::map<std::string, InputStats> stats;
  std::vector<float> gram_scratch;
  train::TokenBatch batch;
  int64_t position = 0;  // global index of the batch's first token
  size_t next = 0;
  while (next < seqs.size()) {
    batch.clear();
    while (next < seqs.size() &&
           (batch.tokens.empty() ||
            int64_t(batch.tokens.size() + seqs[next].size()) <= o.batch_tokens)) {
      if (!seqs[next].empty()) batch.add(seqs[next], std::vector<int32_t>(seqs[next].size(), -1));
      ++next;
    }
    const int64_t n = int64_t(batch.tokens.size());
    if (n == 0) continue;
    model.forward(batch, pool);  // no targets: no logits, only the activations
    std::vector<bool> take(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) take[size_t(t)] = (position + t) % stride == 0;
    position += n;
    const int64_t qd = c.n_heads * c.head_dim;
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const auto& a = model.layer_activations(l);
      const std::string block = "blk." + std::to_string(l) + ".";
      accumulate(stats[block + "attn_in"], a.xn1.data(), n, c.dim, take, o.gram, gram_scratch);
      accumulate(stats[block + "attn_out_in"], a.att.data(), n, qd, take, o.gram, gram_scratch);
      accumulate(stats[block + "ffn_in"], a.xn2.data(), n, c.dim, take, o.gram, gram_scratch);
      const std::vector<float> act = model.ffn_activation(l, pool);
      accumulate(stats[block + "ffn_down_in"], act.data(), n, c.ffn_dim, take, o.gram,
                 gram_scratch);
    }
  }
  return stats;
}

}  // namespace shrike::quant
