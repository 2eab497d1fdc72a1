// GPTQ (Frantar et al., 2022): rounds a matrix's columns one at a time and spreads each rounding
// error over the columns not yet rounded, in proportion to how the calibration inputs correlate
// (the inverse Hessian of the layer's squared output error, H = XᵀX / n). Group parameters are
// chosen when the sweep reaches a group, from the values error compensation has left there.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace shrike::quant {

// w: [rows][cols] f32; gram: [cols][cols] sum of x xᵀ over n_rows calibration rows. Writes the
// file layout of `type` into out (rows * dtype_row_bytes(type, cols) bytes) and, for row-scale
// types, one scale per row into row_scales. damp: fraction of the mean diagonal added to H
// (raised tenfold until H is positive definite).
void gptq_quantize(const float* w, int64_t rows, int64_t cols, const std::vector<double>& gram,
                   int64_t n_rows, DType type, double damp, uint8_t* out, float* row_scales,
                   ThreadPool& pool);

// The upper Cholesky factor U of H⁻¹ (H⁻¹ = UᵀU), row-major [n][n]; H is modified (damped).
// Returns false when H stays indefinite. Exposed for tests.
bool inverse_hessian_factor(std::vector<double>& h, int64_t n, double damp, std::vector<double>& u);

}  // namespace shrike::quant
