#include "train/prune.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace shrike::train {
namespace {

// L2 norm of column j of a row-major [rows][cols] matrix.
double column_norm(const float* w, int64_t rows, int64_t cols, int64_t j) {
  double s = 0;
  for (int64_t r = 0; r < rows; ++r) s += double(w[r * cols + j]) * double(w[r * cols + j]);
  return std::sqrt(s);
}

int64_t kept(int64_t n, double fraction, const char* what) {
  if (!(fraction >= 0.0 && fraction < 1.0))
    throw std::invalid_argument(std::string("prune: --") + what + " must be in [0, 1)");
  const int64_t keep = n - int64_t(std::floor(double(n) * fraction + 1e-9));
  return std::max<int64_t>(1, keep);
}

}  // namespace

std::vector<int64_t> top_indices(const std::vector<double>& scores, int64_t keep) {
  std::vector<int64_t> idx(scores.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int64_t a, int64_t b) { return scores[size_t(a)] > scores[size_t(b)]; });
  idx.resize(size_t(std::min<int64_t>(keep, int64_t(idx.size()))));
  std::sort(idx.begin(), idx.end());
  return idx;
}

Importance measure_importance(Transformer<float>& model, const std::vector<TokenBatch>& batches,
                              ThreadPool& pool) {
  const model::ModelConfig& c = model.config();
  const int64_t group = c.n_heads / c.n_kv_heads, hd = c.head_dim, dim = c.dim;
  Importance imp;
  imp.kv_groups.assign(size_t(c.n_layers), std::vector<double>(size_t(c.n_kv_heads), 0.0));
  imp.ffn_channels.assign(size_t(c.n_layers), std::vector<double>(size_t(c.ffn_dim), 0.0));
  imp.layers.assign(size_t(c.n_layers), 0.0);
  imp.hidden.assign(size_t(dim), 0.0);
  // Column norms of the output projections: what a unit's activation writes into the stream.
  std::vector<std::vector<double>> head_out(size_t(c.n_layers)), ffn_out(size_t(c.n_layers));
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const float* wo = model.param(p + "attn_output.weight");
    const float* wd = model.param(p + "ffn_down.weight");
    for (int64_t h = 0; h < c.n_heads; ++h) {
      double s = 0;
      for (int64_t j = h * hd; j < (h + 1) * hd; ++j) {
        const double n = column_norm(wo, dim, c.q_dim(), j);
        s += n * n;
      }
      head_out[size_t(l)].push_back(std::sqrt(s / double(hd)));
    }
    for (int64_t j = 0; j < c.ffn_dim; ++j)
      ffn_out[size_t(l)].push_back(column_norm(wd, dim, c.ffn_dim, j));
  }
  for (const TokenBatch& b : batches) {
    model.forward(b, pool);
    const int64_t N = int64_t(b.tokens.size());
    imp.tokens += N;
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const auto& a = model.layer_activations(l);
      const float* attn_norm = model.param("blk." + std::to_string(l) + ".attn_norm.weight");
      const float* ffn_norm = model.param("blk." + std::to_string(l) + ".ffn_norm.weight");
      const std::vector<float>& x_in = model.residual(l);
      const std::vector<float>& x_out = model.residual(l + 1);
      for (int64_t t = 0; t < N; ++t) {
        for (int64_t h = 0; h < c.n_heads; ++h) {
          double s = 0;
          const float* o = a.att.data() + t * c.q_dim() + h * hd;
          for (int64_t j = 0; j < hd; ++j) s += double(o[j]) * double(o[j]);
          imp.kv_groups[size_t(l)][size_t(h / group)] +=
              std::sqrt(s) * head_out[size_t(l)][size_t(h)];
        }
        const float* gate = a.gate.data() + t * c.ffn_dim;
        const float* up = a.up.data() + t * c.ffn_dim;
        for (int64_t j = 0; j < c.ffn_dim; ++j) {
          const double act = double(gate[j]) / (1.0 + std::exp(-double(gate[j]))) * up[j];
          imp.ffn_channels[size_t(l)][size_t(j)] += std::abs(act) * ffn_out[size_t(l)][size_t(j)];
        }
        double dot = 0, n_in = 0, n_out = 0;
        for (int64_t j = 0; j < dim; ++j) {
          const double u = x_in[size_t(t * dim + j)], v = x_out[size_t(t * dim + j)];
          dot += u * v, n_in += u * u, n_out += v * v;
          imp.hidden[size_t(j)] +=
              std::abs(double(a.xn1[size_t(t * dim + j)])) * std::abs(double(attn_norm[j])) +
              std::abs(double(a.xn2[size_t(t * dim + j)])) * std::abs(double(ffn_norm[j]));
        }
        imp.layers[size_t(l)] += 1.0 - dot / std::max(1e-30, std::sqrt(n_in * n_out));
      }
    }
  }
  for (double& v : imp.layers) v /= double(std::max<int64_t>(1, imp.tokens));
  return imp;
}

std::unique_ptr<Transformer<float>> prune_model(const Transformer<float>& model,
                                                const Importance& imp, const PruneOptions& opt) {
  const model::ModelConfig& c = model.config();
  if (opt.layers < 0 || opt.layers >= c.n_layers)
    throw std::invalid_argument("prune: --layers must leave at least one layer");
  const int64_t group = c.n_heads / c.n_kv_heads;
  const int64_t keep_groups = kept(c.n_kv_heads, opt.heads, "heads");
  const int64_t keep_ffn = kept(c.ffn_dim, opt.ffn, "ffn");
  const int64_t keep_hidden = kept(c.dim, opt.hidden, "hidden");

  // Layers: drop the least influential ones, keep the rest in order.
  const std::vector<int64_t> layers = top_indices(imp.layers, c.n_layers - opt.layers);
  const std::vector<int64_t> hidden = top_indices(imp.hidden, keep_hidden);

  model::ModelConfig pc = c;
  pc.n_layers = int64_t(layers.size());
  pc.n_kv_heads = keep_groups;
  pc.n_heads = keep_groups * group;
  pc.ffn_dim = keep_ffn;
  pc.dim = keep_hidden;
  auto out = std::make_unique<Transformer<float>>(pc);

  // Copies src[rows][cols] restricted to the given rows and columns (empty: all) into dst.
  auto copy = [](const float* src, int64_t cols, const std::vector<int64_t>& rows,
                 const std::vector<int64_t>& keep_cols, float* dst) {
    int64_t o = 0;
    for (int64_t r : rows)
      for (int64_t j : keep_cols) dst[o++] = src[r * cols + j];
  };
  auto all = [](int64_t n) {
    std::vector<int64_t> v(static_cast<size_t>(n), 0);
    std::iota(v.begin(), v.end(), 0);
    return v;
  };
  const Transformer<float>& m = model;
  auto src = [&](const std::string& name) { return m.params().data() + m.tensor(name).offset; };

  copy(src("token_embd.weight"), c.dim, all(c.vocab_size), hidden, out->param("token_embd.weight"));
  copy(src("output_norm.weight"), c.dim, {0}, hidden, out->param("output_norm.weight"));
  if (!c.tied_output)
    copy(src("output.weight"), c.dim, all(c.vocab_size), hidden, out->param("output.weight"));
  for (size_t nl = 0; nl < layers.size(); ++nl) {
    const int64_t l = layers[nl];
    const std::string p = "blk." + std::to_string(l) + ".", q = "blk." + std::to_string(nl) + ".";
    const std::vector<int64_t> groups = top_indices(imp.kv_groups[size_t(l)], keep_groups);
    std::vector<int64_t> q_rows, kv_rows;
    for (int64_t g : groups) {
      for (int64_t j = 0; j < c.head_dim; ++j) kv_rows.push_back(g * c.head_dim + j);
      for (int64_t h = g * group; h < (g + 1) * group; ++h)
        for (int64_t j = 0; j < c.head_dim; ++j) q_rows.push_back(h * c.head_dim + j);
    }
    const std::vector<int64_t> ffn = top_indices(imp.ffn_channels[size_t(l)], keep_ffn);
    copy(src(p + "attn_norm.weight"), c.dim, {0}, hidden, out->param(q + "attn_norm.weight"));
    copy(src(p + "attn_q.weight"), c.dim, q_rows, hidden, out->param(q + "attn_q.weight"));
    copy(src(p + "attn_k.weight"), c.dim, kv_rows, hidden, out->param(q + "attn_k.weight"));
    copy(src(p + "attn_v.weight"), c.dim, kv_rows, hidden, out->param(q + "attn_v.weight"));
    copy(src(p + "attn_output.weight"), c.q_dim(), hidden, q_rows,
         out->param(q + "attn_output.weight"));
    if (c.qkv_bias) {  // a kept head keeps its bias entries
      copy(src(p + "attn_q.bias"), c.q_dim(), {0}, q_rows, out->param(q + "attn_q.bias"));
      copy(src(p + "attn_k.bias"), c.kv_dim(), {0}, kv_rows, out->param(q + "attn_k.bias"));
      copy(src(p + "attn_v.bias"), c.kv_dim(), {0}, kv_rows, out->param(q + "attn_v.bias"));
    }
    copy(src(p + "ffn_norm.weight"), c.dim, {0}, hidden, out->param(q + "ffn_norm.weight"));
    copy(src(p + "ffn_gate.weight"), c.dim, ffn, hidden, out->param(q + "ffn_gate.weight"));
    copy(src(p + "ffn_up.weight"), c.dim, ffn, hidden, out->param(q + "ffn_up.weight"));
    copy(src(p + "ffn_down.weight"), c.ffn_dim, hidden, ffn, out->param(q + "ffn_down.weight"));
  }
  return out;
}

}  // namespace shrike::train
