// Calibration coverage: does a calibration set excite every matrix input the way real traffic
// does? AWQ scales each input channel by how active it was during calibration and GPTQ spreads
// rounding error into the directions calibration barely used; inputs that traffic drives and
// calibration did not are exactly where a calibrated model degrades (the "calibration set too
// clean" pitfall). This compares the two sets' input statistics, matrix input by matrix input.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "quant/calibration.h"

namespace shrike::quant {

struct InputCoverage {
  std::string key;  // blk.N.attn_in, ...
  int64_t dim = 0;
  // Per channel, traffic's mean |x| over calibration's: the largest ratio, and how many channels
  // exceed `ratio_threshold` (AWQ under-protects those).
  double max_channel_ratio = 0;
  int64_t channels_over = 0;
  // tr(Σc⁻¹ Σt) / dim with Σ = E[x xᵀ] (calibration's damped as GPTQ damps it): 1 when traffic's
  // second moments equal calibration's, far above 1 when traffic lives in directions
  // calibration left out (where GPTQ puts its rounding error).
  double whitened_energy = 0;
};

struct CoverageOptions {
  double damp = 0.01;  // fraction of Σc's mean diagonal added, as GPTQ's default
  double ratio_threshold = 2.0;
};

// Both maps come from collect_input_stats with gram = true. Throws std::invalid_argument when a
// key of `traffic` is missing from `calib`, or its shape or Gram matrix is absent.
std::vector<InputCoverage> calibration_coverage(const std::map<std::string, InputStats>& calib,
                                                const std::map<std::string, InputStats>& traffic,
                                                const CoverageOptions& options = {});

// A table, one row per input, with the worst rows' verdict at the end.
std::string format_coverage(const std::vector<InputCoverage>& rows,
                            const CoverageOptions& options = {});

}  // namespace shrike::quant
