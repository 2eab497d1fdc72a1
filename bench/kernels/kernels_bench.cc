// Matmul / ops micro-benchmarks.
//
//   kernels_bench [--threads=N] [--rotate_mb=M] [google-benchmark flags]
//
// matmul/<type>/<isa>/<rows>x<cols>/n:<n>: Y[n][rows] = X[n][cols] * W^T. For n = 1 the counter
// "GB/s" is weight bytes (file-format size, with the row scales of q8_c / fp8) per second; for n >
// 1 "GFLOP/s" counts 2*rows*cols*n. For small n the benchmark rotates over enough distinct copies
// of the matrix (--rotate_mb, 512 MB by default) that the weights come from DRAM, as in a real
// forward pass.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace shrike::kernels {
namespace {

int g_threads = 1;
int64_t g_rotate_mb = 512;

ThreadPool& pool() {
  static ThreadPool p(g_threads);
  return p;
}

struct MatrixSet {
  std::vector<PackedMatrix> mats;
};

// One set alive at a time (they can be large).
MatrixSet& matrices(DType type, int64_t rows, int64_t cols, size_t copies) {
  static std::string key;
  static MatrixSet set;
  const std::string k =
      std::to_string(int(type)) + "/" + std::to_string(rows) + "x" + std::to_string(cols);
  if (k != key || set.mats.size() < copies) {
    set.mats.clear();
    key = k;
    std::mt19937 rng(42);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> f(size_t(rows * cols));
    for (auto& v : f) v = dist(rng);
    const size_t rb = size_t(dtype_row_bytes(type, cols));
    std::vector<uint8_t> file(size_t(rows) * rb);
    std::vector<float> scales(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(type, f.data() + r * cols, file.data() + r * rb, cols, &scales[size_t(r)]);
    for (size_t i = 0; i < copies; ++i)
      set.mats.push_back(PackedMatrix::pack(type, rows, cols, file.data(), scales.data()));
  }
  return set;
}

void bm_matmul(benchmark::State& state, DType type, Isa isa, int64_t rows, int64_t cols,
               int64_t n) {
  const size_t wbytes =
      size_t(rows) * size_t(dtype_row_bytes(type, cols) + (dtype_has_row_scale(type) ? 4 : 0));
  size_t copies = 1;
  if (n <= 16) copies = size_t(g_rotate_mb) * 1024 * 1024 / wbytes + 1;
  MatrixSet& set = matrices(type, rows, cols, copies);
  std::vector<float> x(size_t(n * cols)), y(size_t(n * rows));
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  ThreadPool& p = pool();
  size_t i = 0;
  for (auto _ : state) {
    matmul_with(isa, set.mats[i], x.data(), n, y.data(), p);
    benchmark::DoNotOptimize(y.data());
    if (++i == copies) i = 0;
  }
  if (n == 1) {
    state.counters["GB/s"] = benchmark::Counter(double(wbytes) * 1e-9 * double(state.iterations()),
                                                benchmark::Counter::kIsRate);
  } else {
    state.counters["GFLOP/s"] = benchmark::Counter(
        2e-9 * double(rows) * double(cols) * double(n) * double(state.iterations()),
        benchmark::Counter::kIsRate);
    state.counters["GB/s"] = benchmark::Counter(double(wbytes) * 1e-9 * double(state.iterations()),
                                                benchmark::Counter::kIsRate);
  }
}

// Calibration: the read bandwidth a plain streaming sum reaches right now with the same pool
// (the machine is shared; compare decode GB/s against this, measured in the same run).
void bm_stream_read(benchmark::State& state) {
  const size_t n = size_t(g_rotate_mb) * 1024 * 1024 / 4;
  static AlignedArray<float> buf;
  if (buf.size() != n) {
    buf = AlignedArray<float>(n);
    for (size_t i = 0; i < n; ++i) buf[i] = 1.0f;
  }
  float sink[64] = {};
  for (auto _ : state) {
    pool().run([&](int i, int nt) {
      const size_t b = n * size_t(i) / size_t(nt) / 16 * 16,
                   e = n * size_t(i + 1) / size_t(nt) / 16 * 16;
      float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (size_t j = b; j < e; j += 16) {
        s0 += buf[j];
        s1 += buf[j + 4];
        s2 += buf[j + 8];
        s3 += buf[j + 12];
      }
      sink[i] = s0 + s1 + s2 + s3;
    });
    benchmark::DoNotOptimize(sink);
  }
  state.counters["GB/s"] = benchmark::Counter(double(n) * 4e-9 * double(state.iterations()),
                                              benchmark::Counter::kIsRate);
}

void bm_attention(benchmark::State& state, int64_t n_tokens, int64_t n_ctx, int64_t head_dim) {
  const int64_t n_heads = 12, n_kv = 12;
  const int64_t kv_dim = n_kv * head_dim, dim = n_heads * head_dim;
  // The KV cache lives in huge-page-advised memory, as the engine allocates it.
  AlignedArray<float> kc(size_t(n_ctx * kv_dim)), vc(size_t(n_ctx * kv_dim));
  std::vector<float> q(size_t(n_tokens * dim)), out(size_t(n_tokens * dim));
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (size_t i = 0; i < kc.size(); ++i) kc[i] = dist(rng);
  for (size_t i = 0; i < vc.size(); ++i) vc[i] = dist(rng);
  for (auto& e : q) e = dist(rng);
  const float* kb[1] = {kc.data()};
  const float* vb[1] = {vc.data()};
  KvRows k{kb, n_ctx, head_dim, n_ctx * head_dim},
      v{vb, n_ctx, head_dim, n_ctx * head_dim};  // head-major, as the engine stores it
  AttentionShape s{n_tokens, n_ctx - n_tokens, n_heads,
                   n_kv,     head_dim,         1.0f / std::sqrt(float(head_dim))};
  for (auto _ : state) {
    attention(s, q.data(), k, v, out.data(), pool());
    benchmark::DoNotOptimize(out.data());
  }
}

// Element-wise ops on the active ISA (SHRIKE_ISA=... to compare), one row of n.
void bm_ops(benchmark::State& state, int which, int64_t n) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const size_t sz = static_cast<size_t>(n);
  std::vector<float> a(sz), b(sz), o(sz), cs(sz);
  for (auto* v : {&a, &b, &cs})
    for (auto& e : *v) e = dist(rng);
  for (auto _ : state) {
    switch (which) {
      case 0:
        rmsnorm(o.data(), a.data(), b.data(), n, 1e-5f);
        break;
      case 1:
        silu_mul(o.data(), a.data(), b.data(), n);
        break;
      case 2:
        softmax(a.data(), n);
        break;
      case 3:
        rope(a.data(), n / 64, 64, 64, cs.data(), RopeLayout::NeoX);
        break;
    }
    benchmark::DoNotOptimize(o.data());
    benchmark::DoNotOptimize(a.data());
  }
  state.counters["elems/s"] =
      benchmark::Counter(double(n) * double(state.iterations()), benchmark::Counter::kIsRate);
}

void register_all() {
  const char* op_names[] = {"rmsnorm", "silu_mul", "softmax", "rope_neox_hd64"};
  for (int which = 0; which < 4; ++which)
    for (int64_t n : {768, 2048, 8192})
      benchmark::RegisterBenchmark(("ops/" + std::string(op_names[which]) + "/" +
                                    std::string(isa_name(active_isa())) + "/n:" + std::to_string(n))
                                       .c_str(),
                                   bm_ops, which, n);
  benchmark::RegisterBenchmark("stream_read", bm_stream_read)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  struct Shape {
    int64_t rows, cols;
  };
  // The last two: a 0.5B model's FFN (Qwen2.5-0.5B: 896 x 4864).
  const Shape shapes[] = {{768, 768},   {2048, 768},  {768, 2048}, {32000, 768},
                          {2816, 1024}, {1024, 2816}, {4864, 896}, {896, 4864}};
  const DType types[] = {DType::F16,  DType::Q8_0, DType::Q4_0,    DType::BF16,
                         DType::F32,  DType::Q8_C, DType::Q4_G128, DType::FP8_E4M3,
                         DType::Q4_K, DType::Q5_K, DType::Q6_K};
  for (DType type : types)
    for (const Shape& s : shapes)
      if (s.cols % dtype_block_elems(type) == 0)
        for (int64_t n : {1, 4, 16, 64, 128, 512})
          for (Isa isa : supported_isas()) {
            const std::string name = "matmul/" + std::string(dtype_name(type)) + "/" +
                                     std::string(isa_name(isa)) + "/" + std::to_string(s.rows) +
                                     "x" + std::to_string(s.cols) + "/n:" + std::to_string(n);
            auto* b =
                benchmark::RegisterBenchmark(name.c_str(), bm_matmul, type, isa, s.rows, s.cols, n);
            b->UseRealTime()->Unit(benchmark::kMicrosecond);
          }
  for (int64_t hd : {64, 128}) {
    benchmark::RegisterBenchmark(("attention/decode/ctx:2048/hd:" + std::to_string(hd)).c_str(),
                                 bm_attention, 1, 2048, hd)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("attention/prefill/n:512/hd:" + std::to_string(hd)).c_str(),
                                 bm_attention, 512, 512, hd)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace
}  // namespace shrike::kernels

int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      shrike::kernels::g_threads = std::atoi(argv[i] + 10);
    } else if (std::strncmp(argv[i], "--rotate_mb=", 12) == 0) {
      shrike::kernels::g_rotate_mb = std::atoll(argv[i] + 12);
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_argc = int(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  benchmark::AddCustomContext("threads", std::to_string(shrike::kernels::g_threads));
  shrike::kernels::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
