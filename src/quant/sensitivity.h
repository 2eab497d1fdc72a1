// The sensitivity scan: which weight matrices hurt most when quantised. Each matrix in turn is
// rounded to the target type (round-to-nearest, every other matrix at full precision) and the
// model's next-token distributions are compared with the full-precision model's on calibration
// sequences (KL divergence). The ranking proposes a mixed-precision recipe: the fewest matrices
// to hold at a finer type for the most KL removed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "quant/kl_eval.h"
#include "train/transformer.h"

namespace shrike::quant {

struct TensorSensitivity {
  std::string name;
  DType type = DType::F32;  // what it was rounded to
  int64_t bytes_saved = 0;  // f32 size minus the quantised size
  KlStats kl;               // with only this matrix quantised
};

struct SensitivityReport {
  std::vector<TensorSensitivity> tensors;  // most sensitive first
  KlStats all_quantized;                   // every matrix at its type
  KlStats with_recipe;                     // the recipe's matrices held at keep_type
  DType keep_type = DType::F16;
  std::vector<std::string> recipe;  // matrix names to hold at keep_type
  std::string format() const;       // table + the --keep options
};

// types: the type each scanned matrix gets (by name; matrices absent from it are not scanned).
// The recipe holds back matrices in order of KL per byte saved until the predicted sum of
// per-matrix KL drops by `target_share` (0..1), at most `max_recipe` of them.
SensitivityReport scan_sensitivity(const train::Transformer<float>& model,
                                   const std::vector<std::pair<std::string, DType>>& types,
                                   const std::vector<ScoredSequence>& calib, DType keep_type,
                                   double target_share, int64_t max_recipe, ThreadPool& pool);

}  // namespace shrike::quant
