#include "quant/sensitivity.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "quant/grid.h"
#include "train/inference_model.h"

namespace shrike::quant {
namespace {

// Rounds one matrix of `t` in place (round-to-nearest, then back to f32 values).
void fake_quantize(train::Transformer<float>& t, const std::string& name, DType type,
                   ThreadPool& pool) {
  const train::ParamTensor& p = t.tensor(name);
  float* w = t.params().data() + p.offset;
  pool.run([&](int i, int n) {
    RowQuantizer rq(type, p.cols);
    for (int64_t r = p.rows * i / n; r < p.rows * (i + 1) / n; ++r)
      rq.round_to_nearest(w + r * p.cols, w + r * p.cols);
  });
}

KlStats evaluate(const train::Transformer<float>& t, const RefDistributions& ref,
                 ThreadPool& pool) {
  const auto m = train::to_inference_model(t);
  return compare_to_reference(*m, ref, pool);
}

}  // namespace

SensitivityReport scan_sensitivity(const train::Transformer<float>& model,
                                   const std::vector<std::pair<std::string, DType>>& types,
                                   const std::vector<ScoredSequence>& calib, DType keep_type,
                                   double target_share, int64_t max_recipe, ThreadPool& pool) {
  if (types.empty()) throw std::invalid_argument("sensitivity: no matrices to scan");
  const auto full = train::to_inference_model(model);
  const RefDistributions ref = reference_distributions(*full, calib, pool);
  SensitivityReport r;
  r.keep_type = keep_type;
  train::Transformer<float> work = model;
  for (const auto& [name, type] : types) {
    const train::ParamTensor& p = model.tensor(name);
    const float* orig = model.params().data() + p.offset;
    fake_quantize(work, name, type, pool);
    TensorSensitivity s;
    s.name = name;
    s.type = type;
    s.bytes_saved = p.size() * 4 - dtype_row_bytes(type, p.cols) * p.rows;
    s.kl = evaluate(work, ref, pool);
    r.tensors.push_back(s);
    std::copy(orig, orig + p.size(), work.params().data() + p.offset);  // restore
  }
  std::stable_sort(r.tensors.begin(), r.tensors.end(),
                   [](const auto& a, const auto& b) { return a.kl.mean_kl > b.kl.mean_kl; });
  double total = 0;
  for (const auto& s : r.tensors) total += s.kl.mean_kl;
  double held = 0;
  for (const auto& s : r.tensors) {
    if (held >= target_share * total || int64_t(r.recipe.size()) >= max_recipe) break;
    r.recipe.push_back(s.name);
    held += s.kl.mean_kl;
  }
  // Whole-model figures: everything quantised, then the recipe's matrices held back.
  for (const auto& [name, type] : types) fake_quantize(work, name, type, pool);
  r.all_quantized = evaluate(work, ref, pool);
  work = model;
  for (const auto& [name, type] : types) {
    const bool keep = std::find(r.recipe.begin(), r.recipe.end(), name) != r.recipe.end();
    if (!keep) {
      fake_quantize(work, name, type, pool);
    } else if (keep_type != DType::F32 && type_fits(keep_type, model.tensor(name).cols)) {
      fake_quantize(work, name, keep_type, pool);
    }
  }
  r.with_recipe = evaluate(work, ref, pool);
  return r;
}

std::string SensitivityReport::format() const {
  std::string s = "sensitivity (each matrix alone rounded to nearest; KL vs full precision):\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-28s %-8s %12s %12s %8s\n", "matrix", "type", "mean KL",
                "P99 KL", "top-1");
  s += line;
  for (const auto& t : tensors) {
    std::snprintf(line, sizeof line, "  %-28s %-8s %12.3e %12.3e %7.2f%%\n", t.name.c_str(),
                  std::string(dtype_name(t.type)).c_str(), t.kl.mean_kl, t.kl.p99_kl,
                  100.0 * t.kl.top1_agreement);
    s += line;
  }
  std::snprintf(line, sizeof line,
                "all matrices quantised: mean KL %.3e, P99 %.3e, top-1 %.2f%%\n"
                "with the recipe (%zu matrices at %s): mean KL %.3e, P99 %.3e, top-1 %.2f%%\n",
                all_quantized.mean_kl, all_quantized.p99_kl, 100.0 * all_quantized.top1_agreement,
                recipe.size(), std::string(dtype_name(keep_type)).c_str(), with_recipe.mean_kl,
                with_recipe.p99_kl, 100.0 * with_recipe.top1_agreement);
  s += line;
  s += "recipe:";
  for (const std::string& n : recipe)
    s += " --keep '" + n + "=" + std::string(dtype_name(keep_type)) + "'";
  return s + "\n";
}

}  // namespace shrike::quant
