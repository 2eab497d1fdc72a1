// First version: weights kept in file layout, every ISA falls back to a threaded dequantise-and-dot
// loop. The SIMD kernels replace this.
#include "kernels/matmul.h"

#include <cstring>
#include <vector>

namespace shrike::kernels {

PackedMatrix PackedMatrix::pack(DType type, int64_t rows, int64_t cols, const void* file_rows) {
  PackedMatrix m;
  m.type_ = type;
  m.rows_ = rows;
  m.cols_ = cols;
  const size_t bytes = size_t(rows) * size_t(dtype_row_bytes(type, cols));
  m.data_ = aligned_alloc_bytes(bytes);
  std::memcpy(m.data_.get(), file_rows, bytes);
  return m;
}

void PackedMatrix::dequantize_row(int64_t r, float* out) const {
  shrike::dequantize_row(type_, data_.get() + size_t(r) * size_t(dtype_row_bytes(type_, cols_)), out,
                         cols_);
}

void matmul_reference(DType type, int64_t rows, int64_t cols, const void* file_rows,
                      const float* x, int64_t n, float* y) {
  std::vector<float> row(static_cast<size_t>(cols));
  const size_t row_bytes = size_t(dtype_row_bytes(type, cols));
  for (int64_t r = 0; r < rows; ++r) {
    shrike::dequantize_row(type, static_cast<const uint8_t*>(file_rows) + size_t(r) * row_bytes,
                           row.data(), cols);
    for (int64_t t = 0; t < n; ++t) {
      double acc = 0;
      for (int64_t c = 0; c < cols; ++c) acc += double(row[size_t(c)]) * x[t * cols + c];
      y[t * rows + r] = float(acc);
    }
  }
}

void matmul_with(Isa, const PackedMatrix& w, const float* x, int64_t n, float* y,
                 ThreadPool& pool) {
  pool.parallel_for(w.rows(), 16, [&](int64_t b, int64_t e) {
    std::vector<float> row(static_cast<size_t>(w.cols()));
    for (int64_t r = b; r < e; ++r) {
      w.dequantize_row(r, row.data());
      for (int64_t t = 0; t < n; ++t) {
        float acc = 0;
        for (int64_t c = 0; c < w.cols(); ++c) acc += row[size_t(c)] * x[t * w.cols() + c];
        y[t * w.rows() + r] = acc;
      }
    }
  });
}

void matmul(const PackedMatrix& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  matmul_with(active_isa(), w, x, n, y, pool);
}

}  // namespace shrike::kernels
