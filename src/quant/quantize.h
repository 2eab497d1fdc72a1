// `shrike quantize`: a GGUF model's weight matrices to another type, by round-to-nearest, by
// AWQ (activation-aware per-input-channel scales, folded into the preceding RMSNorm or matrix)
// or by GPTQ (column-by-column rounding that compensates each error on the columns not yet
// rounded, weighted by the calibration inputs' Gram matrix).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace shrike::quant {

enum class Method { Rtn, Awq, Gptq };
const char* method_name(Method m);

// `--keep PATTERN=TYPE`: tensors whose name matches the glob (with or without the ".weight"
// suffix) get TYPE instead of the target type.
struct KeepRule {
  std::string pattern;
  DType type = DType::F16;
};
// Parses "PATTERN=TYPE"; throws std::invalid_argument naming what is wrong.
KeepRule parse_keep_rule(const std::string& text);
bool keep_rule_matches(const KeepRule& rule, const std::string& tensor_name);

// llama.cpp's "_M" k-quant mixes: output.weight, and attn_v / ffn_down of the layers
// llama.cpp's use_more_bits picks (the first and last eighth, every third between), get Q6_K;
// the rest the target type (Q4_K for Q4_K_M, Q5_K for Q5_K_M).
enum class Mix { None, KMedium };

struct QuantizeOptions {
  DType type = DType::Q8_0;
  Mix mix = Mix::None;
  Method method = Method::Rtn;
  std::vector<KeepRule> keep;
  // Calibration token sequences (AWQ and GPTQ need them), each within the context length.
  std::vector<std::vector<int32_t>> calib;
  int awq_grid = 20;        // exponents alpha = 0, 1/grid, ..., (grid-1)/grid
  double gptq_damp = 0.01;  // fraction of the mean diagonal added to the Hessian
  int64_t max_sample_rows = 512;
};

struct TensorPlan {
  std::string name;
  DType from = DType::F32, to = DType::F32;
  std::string note;  // "keep rule", "fallback: ..." or the method that quantised it
};

struct QuantizeReport {
  std::vector<TensorPlan> tensors;
  uint64_t bytes_in = 0, bytes_out = 0;  // tensor data only
  std::vector<std::string> awq_choices;  // "blk.0.attn_in alpha=0.35 error -41%"
  double seconds = 0;
  std::string summary() const;
};

// Reads `in`, writes `out` (all metadata copied; general.file_type updated for llama.cpp's
// types; shrike.quantize.* keys record what was done). Throws FileError / std::invalid_argument
// with a message naming the file or option at fault.
QuantizeReport quantize_file(const std::string& in, const std::string& out,
                             const QuantizeOptions& options, ThreadPool& pool);

}  // namespace shrike::quant
