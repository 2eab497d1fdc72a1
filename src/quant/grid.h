// The quantisation grid of each weight type, one row at a time, with the parameters (scales,
// minimums) chosen separately from the rounding: round-to-nearest picks parameters from a group's
// values and rounds each value; GPTQ picks them when it reaches a group and then rounds values
// that error compensation has since moved. Round-to-nearest through RowQuantizer writes exactly
// the bytes of shrike::quantize_row (tested), so every method shares one definition of a type.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace shrike::quant {

class RowQuantizer {
 public:
  RowQuantizer(DType type, int64_t cols);

  DType type() const { return type_; }
  int64_t cols() const { return cols_; }
  // Columns sharing one set of parameters: 32 (Q8_0, Q4_0), 128 (Q4_G128), 256 (Q4_K, Q5_K,
  // Q6_K: a super-block, whose sub-block scales are chosen together), the whole row (Q8_C,
  // FP8_E4M3) or 1 (float types: no parameters).
  int64_t group() const { return group_; }

  // Chooses the parameters of the group that starts at column c0 from its values (group()
  // floats) as the reference quantiser does.
  void set_group_params(int64_t c0, const float* values);
  // Rounds the value of column c with its group's parameters (set first); returns the value
  // the file will hold (what a kernel dequantises).
  float quantize(int64_t c, float v);
  // Writes the row in the file's layout; row_scale receives the row's scale for row-scale
  // types.
  void write(void* dst, float* row_scale) const;

  // Round-to-nearest of a whole row: parameters and codes as quantize_row; returns nothing but
  // fills `dequantized` (cols floats) when not null.
  void round_to_nearest(const float* row, float* dequantized);

 private:
  void write_kquant_codes(uint8_t* out) const;
  DType type_;
  int64_t cols_, group_;
  std::vector<float> scale_, minimum_;  // per group (dequantisation: q * scale + minimum)
  std::vector<float> inv_scale_;        // per group: what the reference divides by
  std::vector<uint16_t> scale_f16_, minimum_f16_;
  std::vector<int32_t> codes_;  // per column
  // K-quants: each super-block's file bytes as the reference quantiser wrote them (scales and
  // minima kept, codes rewritten by write()), and each column's step and offset:
  // value = col_step * q - col_offset (Q6_K: col_step * (q - 32)).
  std::vector<uint8_t> kblocks_;
  std::vector<float> col_step_, col_offset_;
};

// Whether a matrix with rows of `cols` values can be stored as `type` (block sizes divide cols).
bool type_fits(DType type, int64_t cols);

}  // namespace shrike::quant
