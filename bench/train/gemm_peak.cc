// The machine's f32 GEMM rate through the BLAS the trainer uses (OpenBLAS), at the shapes of a
// training step: the yardstick that distillation tokens/s are held against (6 x parameters x
// tokens/s FLOP/s). Prints GFLOP/s per shape (median of repeats) and the best.
//   gemm_peak [THREADS] [M,K,N ...]     (default: 2 threads; Qwen2.5-0.5B's FFN and attention
//                                         products at 1024 tokens)
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

extern "C" void openblas_set_num_threads(int);

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  std::vector<std::string> shapes;
  for (int i = 2; i < argc; ++i) shapes.push_back(argv[i]);
  if (shapes.empty()) shapes = {"1024,896,4864", "1024,4864,896", "1024,896,896", "4864,1024,896"};
  openblas_set_num_threads(threads);
  double best = 0;
  for (const std::string& s : shapes) {
    int m = 0, k = 0, n = 0;
    if (std::sscanf(s.c_str(), "%d,%d,%d", &m, &k, &n) != 3 || m <= 0 || k <= 0 || n <= 0) {
      std::fprintf(stderr, "gemm_peak: shape '%s' is not M,K,N\n", s.c_str());
      return 2;
    }
    std::vector<float> a(size_t(m) * k, 0.5f), b(size_t(k) * n, 0.25f), c(size_t(m) * n);
    std::vector<double> rates;
    for (int r = 0; r < 7; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      // C = A B^T, as the trainer's linear layers (weights row-major [out][in]).
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a.data(), k, b.data(),
                  k, 0.0f, c.data(), n);
      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) rates.push_back(2.0 * m * n * k / sec / 1e9);  // the first warms up
    }
    std::sort(rates.begin(), rates.end());
    const double median = rates[rates.size() / 2];
    best = std::max(best, median);
    std::printf("sgemm %dx%dx%d, %d threads: %.1f GFLOP/s (median of %zu)\n", m, k, n, threads,
                median, rates.size());
  }
  std::printf("peak: %.1f GFLOP/s\n", best);
  return 0;
}
