#include "quant/gptq.h"

#include <cmath>
#include <stdexcept>

#include "quant/grid.h"

namespace shrike::quant {
namespace {

// In-place lower Cholesky factor of a symmetric matrix (row-major); false if not positive
// definite.
bool cholesky_lower(std::vector<double>& a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    double d = a[size_t(j * n + j)];
    for (int64_t k = 0; k < j; ++k) d -= a[size_t(j * n + k)] * a[size_t(j * n + k)];
    if (!(d > 0)) return false;
    d = std::sqrt(d);
    a[size_t(j * n + j)] = d;
    for (int64_t i = j + 1; i < n; ++i) {
      double s = a[size_t(i * n + j)];
      for (int64_t k = 0; k < j; ++k) s -= a[size_t(i * n + k)] * a[size_t(j * n + k)];
      a[size_t(i * n + j)] = s / d;
    }
    for (int64_t k = j + 1; k < n; ++k) a[size_t(j * n + k)] = 0;
  }
  return true;
}

}  // namespace

bool inverse_hessian_factor(std::vector<double>& h, int64_t n, double damp,
                            std::vector<double>& u) {
  double mean_diag = 0;
  for (int64_t i = 0; i < n; ++i) mean_diag += h[size_t(i * n + i)];
  mean_diag = mean_diag > 0 ? mean_diag / double(n) : 1.0;
  for (int attempt = 0; attempt < 6; ++attempt, damp *= 10) {
    std::vector<double> l = h;
    for (int64_t i = 0; i < n; ++i) l[size_t(i * n + i)] += damp * mean_diag;
    if (!cholesky_lower(l, n)) continue;
    // L⁻¹ (lower), then H⁻¹ = L⁻ᵀ L⁻¹.
    std::vector<double> li(size_t(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      li[size_t(i * n + i)] = 1.0 / l[size_t(i * n + i)];
      for (int64_t j = 0; j < i; ++j) {
        double s = 0;
        for (int64_t k = j; k < i; ++k) s += l[size_t(i * n + k)] * li[size_t(k * n + j)];
        li[size_t(i * n + j)] = -s / l[size_t(i * n + i)];
      }
    }
    std::vector<double> hinv(size_t(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        double s = 0;
        for (int64_t k = i; k < n; ++k) s += li[size_t(k * n + i)] * li[size_t(k * n + j)];
        hinv[size_t(i * n + j)] = hinv[size_t(j * n + i)] = s;
      }
    if (!cholesky_lower(hinv, n)) continue;
    u.assign(size_t(n * n), 0.0);  // U = Lᵀ of H⁻¹'s lower factor
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i; j < n; ++j) u[size_t(i * n + j)] = hinv[size_t(j * n + i)];
    return true;
  }
  return false;
}

void gptq_quantize(const float* w, int64_t rows, int64_t cols, const std::vector<double>& gram,
                   int64_t n_rows, DType type, double damp, uint8_t* out, float* row_scales,
                   ThreadPool& pool) {
  if (int64_t(gram.size()) != cols * cols || n_rows <= 0)
    throw std::invalid_argument("gptq: the calibration Gram matrix does not match the weights");
  std::vector<double> h(gram.size());
  for (size_t i = 0; i < h.size(); ++i) h[i] = gram[i] / double(n_rows);
  // A channel the calibration never excited carries no information: give it unit curvature so
  // H stays invertible (its weights are then rounded to nearest).
  for (int64_t i = 0; i < cols; ++i)
    if (h[size_t(i * cols + i)] == 0) h[size_t(i * cols + i)] = 1;
  std::vector<double> u;
  if (!inverse_hessian_factor(h, cols, damp, u))
    throw std::runtime_error("gptq: the calibration Hessian is not positive definite");
  const size_t row_bytes = size_t(dtype_row_bytes(type, cols));
  pool.run([&](int ti, int tn) {
    RowQuantizer rq(type, cols);
    std::vector<double> x(static_cast<size_t>(cols));
    std::vector<float> group(static_cast<size_t>(rq.group()));
    for (int64_t r = rows * ti / tn; r < rows * (ti + 1) / tn; ++r) {
      for (int64_t c = 0; c < cols; ++c) x[size_t(c)] = w[r * cols + c];
      for (int64_t j = 0; j < cols; ++j) {
        if (j % rq.group() == 0) {
          for (int64_t k = 0; k < rq.group(); ++k) group[size_t(k)] = float(x[size_t(j + k)]);
          rq.set_group_params(j, group.data());
        }
        const double q = rq.quantize(j, float(x[size_t(j)]));
        const double err = (x[size_t(j)] - q) / u[size_t(j * cols + j)];
        const double* uj = u.data() + j * cols;
        for (int64_t k = j + 1; k < cols; ++k) x[size_t(k)] -= err * uj[k];
      }
      rq.write(out + size_t(r) * row_bytes, row_scales ? row_scales + r : nullptr);
    }
  });
}

}  // namespace shrike::quant
