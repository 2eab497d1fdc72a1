#include "quant/quantize.h"

#include <fnmatch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>

#include "core/file_buffer.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "quant/calibration.h"
#include "quant/gptq.h"
#include "quant/grid.h"
#include "train/checkpoint.h"
#include "train/ops.h"

namespace shrike::quant {

const char* method_name(Method m) {
  switch (m) {
    case Method::Rtn:
      return "rtn";
    case Method::Awq:
      return "awq";
    case Method::Gptq:
      return "gptq";
  }
  return "?";
}

KeepRule parse_keep_rule(const std::string& text) {
  const size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw std::invalid_argument("--keep '" + text + "': expected PATTERN=TYPE");
  const auto type = dtype_from_name(text.substr(eq + 1));
  if (!type)
    throw std::invalid_argument("--keep '" + text + "': unknown type '" + text.substr(eq + 1) +
                                "' (f32|f16|bf16|q8_0|q4_0|q8_c|q4_g128|fp8)");
  if (dtype_is_kquant(*type))
    throw std::invalid_argument("--keep '" + text + "': the k-quants are read, not written (" +
                                "f32|f16|bf16|q8_0|q4_0|q8_c|q4_g128|fp8)");
  return {text.substr(0, eq), *type};
}

namespace {

bool lossy(DType t) {
  return t != DType::F32 && t != DType::F16 && t != DType::BF16;
}

}  // namespace

bool keep_rule_matches(const KeepRule& rule, const std::string& name) {
  const std::string& pattern = rule.pattern;
  if (fnmatch(pattern.c_str(), name.c_str(), 0) == 0) return true;
  const std::string suffix = ".weight";
  if (name.size() > suffix.size() && name.ends_with(suffix))
    return fnmatch(pattern.c_str(), name.substr(0, name.size() - suffix.size()).c_str(), 0) == 0;
  return false;
}

namespace {

bool is_scale_tensor(const std::string& name) {
  return name.ends_with(".scale");
}

// llama.cpp's use_more_bits: the layers of a _M mix whose attn_v and ffn_down get Q6_K.
bool use_more_bits(int64_t layer, int64_t n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

// The block index of "blk.N.<rest>" and the rest, or -1.
int64_t block_index(const std::string& name, std::string* rest) {
  if (!name.starts_with("blk.")) return -1;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4) return -1;
  int64_t i = 0;
  for (size_t k = 4; k < dot; ++k) {
    if (name[k] < '0' || name[k] > '9' || i > 1000000) return -1;
    i = i * 10 + (name[k] - '0');
  }
  *rest = name.substr(dot + 1);
  return i;
}

// The type a weight matrix gets, and why, when `want` cannot hold rows of `cols` values:
// llama.cpp's types fall back to F16 (the file stays loadable by llama.cpp), the k-quants to
// Q8_0 first (as llama.cpp falls back to a 32-wide type), shrike's Q4_G128 to Q4_0 and then
// Q8_C, which fits any row.
TensorPlan plan_tensor(const gguf::TensorInfo& t, const QuantizeOptions& o, int64_t n_layers) {
  TensorPlan p{t.name, t.type, o.type, std::string(method_name(o.method))};
  if (o.mix == Mix::KMedium) {
    std::string rest;
    const int64_t layer = block_index(t.name, &rest);
    if (t.name == "output.weight" || ((rest == "attn_v.weight" || rest == "ffn_down.weight") &&
                                      use_more_bits(layer, n_layers))) {
      p.to = DType::Q6_K;
      p.note = "q6_K in the _M mix";
    }
  }
  for (const KeepRule& k : o.keep)
    if (keep_rule_matches(k, t.name)) {
      p.to = k.type;
      p.note = "keep " + k.pattern;
    }
  const int64_t cols = t.dims[0];
  if (!type_fits(p.to, cols)) {
    const DType want = p.to;
    if (want == DType::Q4_G128 && type_fits(DType::Q4_0, cols)) {
      p.to = DType::Q4_0;
    } else if (want == DType::Q4_G128) {
      p.to = DType::Q8_C;
    } else if (dtype_is_kquant(want) && type_fits(DType::Q8_0, cols)) {
      p.to = DType::Q8_0;
    } else {
      p.to = DType::F16;
    }
    p.note = "fallback: rows of " + std::to_string(cols) + " values cannot be " +
             std::string(dtype_name(want));
  }
  return p;
}

// A tensor's values as f32, from the trainable copy (after AWQ's folding) when it has the
// tensor, else dequantised from the file.
class FloatSource {
 public:
  FloatSource(const gguf::GgufFile& f, train::Transformer<float>* t) : f_(f), t_(t) {}

  std::vector<float> get(const gguf::TensorInfo& info) const {
    const int64_t cols = info.dims[0], rows = info.elements() / cols;
    std::vector<float> out(size_t(rows * cols));
    if (t_) {
      for (const train::ParamTensor& p : t_->layout())
        if (p.name == info.name) {
          const float* src = t_->params().data() + p.offset;
          std::copy(src, src + p.size(), out.begin());
          return out;
        }
    }
    const float* scales = nullptr;
    if (dtype_has_row_scale(info.type)) {
      const gguf::TensorInfo* s = f_.find_tensor(info.name + ".scale");
      if (!s || s->type != DType::F32 || s->elements() != rows)
        throw FileError(f_.path() + ": tensor '" + info.name + "' of type " +
                        std::string(dtype_name(info.type)) + " needs '" + info.name +
                        ".scale' (f32, one per row)");
      scales = reinterpret_cast<const float*>(s->data);
    }
    const size_t row_bytes = size_t(dtype_row_bytes(info.type, cols));
    for (int64_t r = 0; r < rows; ++r)
      dequantize_row(info.type, info.data + size_t(r) * row_bytes, out.data() + r * cols, cols,
                     scales ? scales[r] : 1.0f);
    return out;
  }

 private:
  const gguf::GgufFile& f_;
  train::Transformer<float>* t_;
};

struct QuantizedTensor {
  std::vector<uint8_t> bytes;
  std::vector<float> scales;  // row-scale types only
};

// Round-to-nearest of every row, rows split over the pool.
QuantizedTensor quantize_rtn(const float* w, int64_t rows, int64_t cols, DType type,
                             ThreadPool& pool) {
  QuantizedTensor q;
  const size_t row_bytes = size_t(dtype_row_bytes(type, cols));
  q.bytes.resize(row_bytes * size_t(rows));
  if (dtype_has_row_scale(type)) q.scales.resize(size_t(rows));
  pool.run([&](int i, int n) {
    RowQuantizer rq(type, cols);
    for (int64_t r = rows * i / n; r < rows * (i + 1) / n; ++r) {
      rq.round_to_nearest(w + r * cols, nullptr);
      rq.write(q.bytes.data() + size_t(r) * row_bytes,
               q.scales.empty() ? nullptr : &q.scales[size_t(r)]);
    }
  });
  return q;
}

// ---- AWQ ----

// ||X (W - Wq)ᵀ||²: the squared output error over the sample rows X ([s][k]).
double output_error(const std::vector<float>& x, int64_t s, int64_t k, const float* w,
                    const float* wq, int64_t rows, std::vector<float>& diff,
                    std::vector<float>& y) {
  diff.resize(size_t(rows * k));
  for (size_t i = 0; i < diff.size(); ++i) diff[i] = w[i] - wq[i];
  y.resize(size_t(s * rows));
  train::linear_forward<float>(y.data(), x.data(), diff.data(), nullptr, s, k, rows);
  double e = 0;
  for (float v : y) e += double(v) * double(v);
  return e;
}

struct AwqGroup {
  std::string key;                // calibration input key
  std::vector<std::string> mats;  // matrices reading that input
  enum { Norm, VRows, UpRows } prev;
  std::string prev_name;  // the tensor the inverse scales fold into
};

// Runs the AWQ search for every group of every layer and folds the chosen scales into `t`.
void apply_awq(train::Transformer<float>& t, const std::map<std::string, InputStats>& stats,
               const std::map<std::string, DType>& planned, const QuantizeOptions& o,
               ThreadPool& pool, QuantizeReport& report) {
  const model::ModelConfig& c = t.config();
  std::vector<float> diff, y, scaled, deq;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const std::vector<AwqGroup> groups = {
        {b + "attn_in",
         {b + "attn_q.weight", b + "attn_k.weight", b + "attn_v.weight"},
         AwqGroup::Norm,
         b + "attn_norm.weight"},
        {b + "attn_out_in", {b + "attn_output.weight"}, AwqGroup::VRows, b + "attn_v.weight"},
        {b + "ffn_in",
         {b + "ffn_gate.weight", b + "ffn_up.weight"},
         AwqGroup::Norm,
         b + "ffn_norm.weight"},
        {b + "ffn_down_in", {b + "ffn_down.weight"}, AwqGroup::UpRows, b + "ffn_up.weight"},
    };
    for (const AwqGroup& g : groups) {
      bool any = false;
      for (const std::string& m : g.mats) {
        auto it = planned.find(m);
        any |= it != planned.end() && lossy(it->second);
      }
      const auto st = stats.find(g.key);
      if (!any || st == stats.end() || st->second.sample_rows() == 0) continue;
      const InputStats& in = st->second;
      const int64_t k = in.dim, s_rows = in.sample_rows();
      std::vector<float> xm = in.mean_abs();
      if (g.prev == AwqGroup::VRows) {
        // With grouped-query attention one value row feeds the same channel of every query head
        // of its group, so those channels must share one scale: average their salience.
        const int64_t hd = c.head_dim, per = c.n_heads / c.n_kv_heads;
        for (int64_t kv = 0; kv < c.n_kv_heads; ++kv)
          for (int64_t d = 0; d < hd; ++d) {
            float sum = 0;
            for (int64_t h = kv * per; h < (kv + 1) * per; ++h) sum += xm[size_t(h * hd + d)];
            for (int64_t h = kv * per; h < (kv + 1) * per; ++h)
              xm[size_t(h * hd + d)] = sum / float(per);
          }
      }
      auto scales_for = [&](double alpha) {
        std::vector<float> s(static_cast<size_t>(k));
        float lo = 1e30f, hi = 0;
        for (int64_t i = 0; i < k; ++i) {
          s[size_t(i)] = float(std::pow(std::max(double(xm[size_t(i)]), 1e-4), alpha));
          lo = std::min(lo, s[size_t(i)]);
          hi = std::max(hi, s[size_t(i)]);
        }
        const float norm = std::sqrt(lo * hi);
        for (float& v : s) v /= norm;
        return s;
      };
      auto error_with = [&](const std::vector<float>& s) {
        double err = 0;
        for (const std::string& m : g.mats) {
          auto it = planned.find(m);
          if (it == planned.end() || !lossy(it->second)) continue;
          const train::ParamTensor& pt = t.tensor(m);
          const float* w = t.params().data() + pt.offset;
          scaled.resize(size_t(pt.size()));
          for (int64_t r = 0; r < pt.rows; ++r)
            for (int64_t i = 0; i < k; ++i) scaled[size_t(r * k + i)] = w[r * k + i] * s[size_t(i)];
          deq.resize(scaled.size());
          pool.run([&](int ti, int tn) {
            RowQuantizer rq(it->second, k);
            for (int64_t r = pt.rows * ti / tn; r < pt.rows * (ti + 1) / tn; ++r)
              rq.round_to_nearest(scaled.data() + r * k, deq.data() + r * k);
          });
          for (int64_t r = 0; r < pt.rows; ++r)
            for (int64_t i = 0; i < k; ++i) deq[size_t(r * k + i)] /= s[size_t(i)];
          err += output_error(in.sample, s_rows, k, w, deq.data(), pt.rows, diff, y);
        }
        return err;
      };
      double best_err = 0, rtn_err = 0, best_alpha = 0;
      for (int a = 0; a < o.awq_grid; ++a) {
        const double alpha = double(a) / o.awq_grid;
        const double err = error_with(scales_for(alpha));
        if (a == 0) rtn_err = err;
        if (a == 0 || err < best_err) {
          best_err = err;
          best_alpha = alpha;
        }
      }
      char line[160];
      std::snprintf(line, sizeof line, "%s alpha=%.2f output error %+.1f%% vs round-to-nearest",
                    g.key.c_str(), best_alpha,
                    rtn_err > 0 ? 100.0 * (best_err - rtn_err) / rtn_err : 0.0);
      report.awq_choices.push_back(line);
      if (best_alpha == 0) continue;
      // Fold: W · diag(s) here, diag(1/s) into what produces the input, so the full-precision
      // function is unchanged and only the rounding sees the scaled weights.
      const std::vector<float> s = scales_for(best_alpha);
      for (const std::string& m : g.mats) {
        const train::ParamTensor& pt = t.tensor(m);
        float* w = t.params().data() + pt.offset;
        for (int64_t r = 0; r < pt.rows; ++r)
          for (int64_t i = 0; i < k; ++i) w[r * k + i] *= s[size_t(i)];
      }
      const train::ParamTensor& prev = t.tensor(g.prev_name);
      float* p = t.params().data() + prev.offset;
      if (g.prev == AwqGroup::Norm) {
        for (int64_t i = 0; i < k; ++i) p[i] /= s[size_t(i)];
      } else if (g.prev == AwqGroup::UpRows) {
        for (int64_t r = 0; r < prev.rows; ++r)
          for (int64_t i = 0; i < prev.cols; ++i) p[r * prev.cols + i] /= s[size_t(r)];
      } else {  // value rows: row kv * head_dim + d carries channel d of that kv group's heads
        const int64_t hd = c.head_dim, per = c.n_heads / c.n_kv_heads;
        for (int64_t r = 0; r < prev.rows; ++r) {
          const float sv = s[size_t((r / hd) * per * hd + r % hd)];
          for (int64_t i = 0; i < prev.cols; ++i) p[r * prev.cols + i] /= sv;
        }
      }
    }
  }
}

}  // namespace

std::string QuantizeReport::summary() const {
  std::map<std::string, int> by_type;
  std::string notes;
  for (const TensorPlan& p : tensors) {
    by_type[std::string(dtype_name(p.to))]++;
    if (p.note.starts_with("keep") || p.note.starts_with("fallback"))
      notes += "  " + p.name + ": " + std::string(dtype_name(p.to)) + " (" + p.note + ")\n";
  }
  std::string s = "matrices:";
  for (const auto& [t, n] : by_type) s += " " + std::to_string(n) + " " + t;
  char line[200];
  std::snprintf(line, sizeof line, "\ntensor data: %.2f MB -> %.2f MB (%.2fx smaller), %.2f s\n",
                double(bytes_in) / 1e6, double(bytes_out) / 1e6,
                bytes_out ? double(bytes_in) / double(bytes_out) : 0.0, seconds);
  s += line + notes;
  for (const std::string& a : awq_choices) s += "  awq " + a + "\n";
  return s;
}

QuantizeReport quantize_file(const std::string& in, const std::string& out,
                             const QuantizeOptions& o, ThreadPool& pool) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto f = gguf::GgufFile::open(in);
  QuantizeReport report;

  std::map<std::string, DType> planned;
  int64_t n_layers = 0;
  for (const gguf::TensorInfo& t : f.tensors()) {
    std::string rest;
    n_layers = std::max(n_layers, block_index(t.name, &rest) + 1);
  }
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (is_scale_tensor(t.name) || t.dims.size() != 2 || !t.name.ends_with(".weight")) continue;
    report.tensors.push_back(plan_tensor(t, o, n_layers));
    planned[t.name] = report.tensors.back().to;
  }

  // AWQ and GPTQ work on a full-precision copy in the trainer's layout.
  std::unique_ptr<train::Transformer<float>> trainable;
  std::map<std::string, InputStats> stats;
  if (o.method != Method::Rtn) {
    if (o.calib.empty())
      throw std::invalid_argument(std::string(method_name(o.method)) +
                                  " needs calibration data (--calib)");
    trainable = std::move(train::load_trainable(in).model);
    CalibrationOptions co;
    co.gram = o.method == Method::Gptq;
    co.max_sample_rows = o.max_sample_rows;
    stats = collect_input_stats(*trainable, o.calib, co, pool);
    if (o.method == Method::Awq) apply_awq(*trainable, stats, planned, o, pool, report);
  }
  const FloatSource source(f, trainable.get());

  gguf::GgufWriter w;
  for (const std::string& key : f.keys()) w.set_value(key, *f.find(key));
  // llama.cpp's llama_ftype: mostly Q8_0 = 7, mostly Q4_0 = 2, F16 = 1, F32 = 0, BF16 = 32,
  // Q4_K_S = 14, Q4_K_M = 15, Q5_K_S = 16, Q5_K_M = 17, Q6_K = 18.
  const bool medium = o.mix == Mix::KMedium;
  int ftype = -1;
  switch (o.type) {
    case DType::Q8_0:
      ftype = 7;
      break;
    case DType::Q4_0:
      ftype = 2;
      break;
    case DType::F16:
      ftype = 1;
      break;
    case DType::F32:
      ftype = 0;
      break;
    case DType::BF16:
      ftype = 32;
      break;
    case DType::Q4_K:
      ftype = medium ? 15 : 14;
      break;
    case DType::Q5_K:
      ftype = medium ? 17 : 16;
      break;
    case DType::Q6_K:
      ftype = 18;
      break;
    default:
      break;
  }
  if (ftype >= 0) w.set_uint32("general.file_type", uint32_t(ftype));
  w.set_string("shrike.quantize.type", std::string(dtype_name(o.type)) + (medium ? "_M" : ""));
  w.set_string("shrike.quantize.method", method_name(o.method));

  for (const gguf::TensorInfo& t : f.tensors()) {
    if (is_scale_tensor(t.name)) continue;  // regenerated with the matrix it belongs to
    report.bytes_in += t.bytes;
    auto plan = planned.find(t.name);
    if (plan == planned.end()) {
      if (trainable && t.type == DType::F32) {  // norms may carry AWQ's folded scales
        const std::vector<float> v = source.get(t);
        w.add_tensor(t.name, DType::F32, t.dims, v.data(), v.size() * 4);
        report.bytes_out += v.size() * 4;
      } else {
        w.add_tensor(t.name, t.type, t.dims, t.data, t.bytes);
        report.bytes_out += t.bytes;
      }
      continue;
    }
    const int64_t cols = t.dims[0], rows = t.dims[1];
    const std::vector<float> values = source.get(t);
    QuantizedTensor q;
    const auto st = stats.find(input_key(t.name));
    if (o.method == Method::Gptq && lossy(plan->second) && st != stats.end()) {
      q.bytes.resize(size_t(dtype_row_bytes(plan->second, cols) * rows));
      if (dtype_has_row_scale(plan->second)) q.scales.resize(size_t(rows));
      gptq_quantize(values.data(), rows, cols, st->second.gram, st->second.n_rows, plan->second,
                    o.gptq_damp, q.bytes.data(), q.scales.empty() ? nullptr : q.scales.data(),
                    pool);
    } else {
      q = quantize_rtn(values.data(), rows, cols, plan->second, pool);
    }
    w.add_tensor(t.name, plan->second, t.dims, q.bytes.data(), q.bytes.size());
    report.bytes_out += q.bytes.size();
    if (!q.scales.empty()) {
      w.add_tensor(t.name + ".scale", DType::F32, {rows}, q.scales.data(), q.scales.size() * 4);
      report.bytes_out += q.scales.size() * 4;
    }
  }
  w.write(out);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace shrike::quant
