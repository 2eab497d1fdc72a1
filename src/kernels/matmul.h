// Products of a weight matrix with f32 activations, for every weight type.
//
// Decode (n = 1) is a matrix-vector product bound by memory bandwidth; prefill and batched steps
// (n > 1) are bound by arithmetic and must load each weight tile once for all n columns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/file_buffer.h"
#include "core/thread_pool.h"
#include "kernels/isa.h"

namespace shrike::kernels {

// A weight matrix W of shape [rows = output features][cols = input features], copied at load
// time from its file layout (GGUF rows of blocks) into ordinary, huge-page-advised memory in
// whatever layout the kernels read fastest (rows may be interleaved; the file format never serves
// the kernel).
class PackedMatrix {
 public:
  PackedMatrix() = default;
  // `file_rows` is row-major in GGUF layout: `rows` rows of dtype_row_bytes(type, cols) bytes.
  // cols must be a multiple of 32 for Q8_0 / Q4_0 / IQ4_NL, of 128 for Q4_G128, of 256 for the
  // other k-quants.
  // Row-scale types (Q8_C, FP8_E4M3) need row_scales: one f32 per row (the NAME.scale tensor);
  // std::invalid_argument without them.
  static PackedMatrix pack(DType type, int64_t rows, int64_t cols, const void* file_rows,
                           const float* row_scales = nullptr);

  DType type() const { return type_; }
  // Packed as BF16 column pairs for the CPU's BF16 dot products (F16 / BF16 weights packed while
  // set_bf16_dot(true)); the product then rounds the activations to bf16 as well.
  bool bf16_pairs() const { return bf16_pairs_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  // Bytes of weight data one full product reads (what the decode roofline counts): the file's
  // rows, plus the row scales of Q8_C / FP8_E4M3.
  size_t weight_bytes() const {
    return size_t(rows_) *
           size_t(dtype_row_bytes(type_, cols_) + (dtype_has_row_scale(type_) ? 4 : 0));
  }
  // Row r dequantised to f32 (embedding lookup, tests). out has cols() floats.
  void dequantize_row(int64_t r, float* out) const;

  // The matrices stacked row-wise into one ([sum of rows][cols]), byte for byte: a product with
  // it gives each part's outputs side by side per token, with the same bits as each part's own
  // product, in one pass over the activations (the model fuses Q/K/V and gate/up this way).
  // Possible when all parts share type and cols and every part but the last has a multiple of
  // 16 rows (whole panels); otherwise returns an empty matrix (rows() == 0).
  static PackedMatrix concat_rows(const std::vector<const PackedMatrix*>& parts);

  // Layout details belong to the kernels (matmul*.cc); nothing outside kernels/ reads them.
  const uint8_t* data() const { return data_.get(); }

 private:
  DType type_ = DType::F32;
  bool bf16_pairs_ = false;
  int64_t rows_ = 0, cols_ = 0;
  AlignedBytes data_;
  friend struct PackedMatrixAccess;
};

// BF16 dot products for float weights (off by default; like ik_llama.cpp's run-time repacking):
// while on, PackedMatrix::pack stores F16 and BF16 weights as BF16 column pairs, and their
// products round the activations to bf16 and use vdpbf16ps (AVX512_BF16), twice the
// multiply-adds per instruction of f32 FMAs. Costs accuracy: F16 weights lose 3 of their 10
// mantissa bits, activations 16 of 23 (sums stay f32). Matrices packed before keep their layout.
// set_bf16_dot(true) throws std::invalid_argument on a CPU without AVX512_BF16.
bool bf16_dot_supported();
void set_bf16_dot(bool on);
bool bf16_dot();

// How a product is computed, chosen per call.
struct MatmulOptions {
  // Batch invariance: the product for a single token (n = 1) sums in the same order as for that
  // token inside a batch of any size, so a sequence's output does not depend on what else shares
  // the step (serving with continuous batching). Quantised types (Q8_0 / Q4_0 / Q8_C / Q4_G128 /
  // Q4_K / Q5_K / Q6_K) sum in one order regardless; for float weights (FP8_E4M3 included) the fast
  // single-token kernels (several accumulators per row) are given up, which costs about a quarter
  // of single-sequence decode speed.
  bool batch_invariant = false;
};

// Y = X · Wᵀ: x is [n][cols] f32 row-major, y is [n][rows] f32 row-major. Work is split over the
// pool. Uses active_isa(). For Q8_0 / Q4_0 / Q8_C / Q4_G128 / Q4_K / Q5_K / Q6_K the activations
// may be quantised to
// 8 bits per block of 32 (as llama.cpp does) where that is faster; the result then differs from
// the exact product by that rounding only.
void matmul(const PackedMatrix& w, const float* x, int64_t n, float* y, ThreadPool& pool,
            MatmulOptions opt = {});
// Same, computed with a given ISA (must be supported): for tests and benchmarks.
void matmul_with(Isa isa, const PackedMatrix& w, const float* x, int64_t n, float* y,
                 ThreadPool& pool, MatmulOptions opt = {});

// RMSNorm fused with activation quantisation: the input of the products that follow a norm
// (Q/K/V, gate/up, the output), prepared once for all of them. For quantised weights on SIMD
// targets each row is normalised and quantised in one pass, block by block in registers: the
// normalised f32 row is never written and the products skip their own quantisation of x.
// Otherwise (float weights, the scalar target, a width not a multiple of 32) it keeps the f32
// rows of rmsnorm. Either way matmul(w, input) equals rmsnorm followed by matmul, bit for bit.
// Buffers grow and are kept: no allocation per step in the steady state.
class NormedInput {
 public:
  // Whether products with weights of this type read quantised activations (Q8_0 / Q4_0 / Q8_C /
  // Q4_G128 / Q4_K / Q5_K / Q6_K).
  static bool quantised_weights(DType t);

  // Normalises n rows of x ([*][dim] row-major): rows[t] is the t-th row's index in x, or, with
  // rows null, row t. `weight_type` is the type of the matrices that will read the input: they
  // must all be quantised (Q8_0 / Q4_0 / Q8_C / Q4_G128 / Q4_K / Q5_K / Q6_K) or all not.
  void prepare(const float* x, const int64_t* rows, int64_t n, const float* norm_weight,
               int64_t dim, float eps, DType weight_type, ThreadPool& pool);
  // Same, for products computed with a given ISA (tests).
  void prepare_with(Isa isa, const float* x, const int64_t* rows, int64_t n,
                    const float* norm_weight, int64_t dim, float eps, DType weight_type,
                    ThreadPool& pool);

  bool quantised() const { return quantised_; }
  int64_t n() const { return n_; }
  int64_t dim() const { return dim_; }
  // The normalised rows [n][dim], when not quantised (null otherwise).
  const float* floats() const { return quantised_ ? nullptr : floats_.data(); }

 private:
  friend void matmul(const PackedMatrix& w, const NormedInput& x, float* y, ThreadPool& pool,
                     MatmulOptions opt);
  Isa isa_ = Isa::Scalar;
  bool quantised_ = false;
  int64_t n_ = 0, dim_ = 0;
  std::vector<float> floats_;
  // Quantised: q [n][dim] int8, d [n][dim/32] scales, sums [n][dim/32] plain block sums of q.
  std::vector<int8_t> q_;
  std::vector<float> d_;
  std::vector<int32_t> sums_;
};

// Y = normalised X · Wᵀ for X prepared by NormedInput (with its ISA); std::invalid_argument when
// w.cols() differs from the input's width, or a quantised input meets float weights.
void matmul(const PackedMatrix& w, const NormedInput& x, float* y, ThreadPool& pool,
            MatmulOptions opt = {});

// How many of a pool's threads a product of this size uses. Waking a worker and waiting for it
// costs about a microsecond on a quiet machine (much more on a busy one, where the worker may not
// be running): a product splits only while each thread gets at least kMinProductBytesPerThread of
// weights x tokens, about the work of that wake-up several times over. The matrices of a small
// task model (a few tens of KB) then run on the caller alone, and a decode step wakes the pool
// only for the few products large enough to pay for it.
constexpr size_t kMinProductBytesPerThread = 64 * 1024;
int threads_for_product(size_t weight_bytes, int64_t n, int pool_threads);

// The obviously-correct reference: dequantise each row of the file layout to f32 and take exact
// f32 dot products (double accumulation), single-threaded.
void matmul_reference(DType type, int64_t rows, int64_t cols, const void* file_rows, const float* x,
                      int64_t n, float* y, const float* row_scales = nullptr);

}  // namespace shrike::kernels
