// Every matmul kernel (each ISA in supported_isas(), 1 and 2 threads) against matmul_reference.
#include "kernels/matmul.h"

#include <gtest/gtest.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/isa.h"
#include "kernels/kernel_test_util.h"
#include "kernels/ops.h"

namespace shrike::kernels {
namespace {

// The calling thread's floating-point control register and its bit that makes subnormal inputs
// read as zero: MXCSR.DAZ on x86-64, FPCR.FZ on aarch64 (which flushes results too).
#if defined(__x86_64__)
constexpr uint64_t kFlushSubnormals = 0x40;
uint64_t fp_control() {
  return _mm_getcsr();
}
void set_fp_control(uint64_t v) {
  _mm_setcsr(unsigned(v));
}
#elif defined(__aarch64__)
constexpr uint64_t kFlushSubnormals = uint64_t(1) << 24;
uint64_t fp_control() {
  uint64_t v;
  __asm__ __volatile__("mrs %0, fpcr" : "=r"(v));
  return v;
}
void set_fp_control(uint64_t v) {
  __asm__ __volatile__("msr fpcr, %0" ::"r"(v));
}
#else
constexpr uint64_t kFlushSubnormals = 0;  // no flushing mode known: both passes run unflushed
uint64_t fp_control() {
  return 0;
}
void set_fp_control(uint64_t) {}
#endif

struct Case {
  DType type;
  int64_t rows, cols, n;
};

// A weight tensor in file layout, with its row scales for the row-scale types (else empty).
struct Weights {
  std::vector<uint8_t> file;
  std::vector<float> scales;
  const float* scale_ptr() const { return scales.empty() ? nullptr : scales.data(); }
  float scale(int64_t r) const { return scales.empty() ? 1.0f : scales[size_t(r)]; }
};

Weights random_weights(DType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> f(size_t(rows * cols));
  for (auto& v : f) v = dist(rng);
  // A few exact zeros and large values to exercise rounding and saturation-prone cases.
  if (!f.empty()) f[0] = 0.0f;
  if (f.size() > 5) f[5] = 7.5f;
  // Rows of very different magnitudes (row scales, FP8 subnormals), and an all-zero row.
  for (int64_t r = 1; r < rows; r += 3)
    for (int64_t c = 0; c < cols; ++c) f[size_t(r * cols + c)] *= r % 2 ? 1e-3f : 50.0f;
  if (rows > 2)
    for (int64_t c = 0; c < cols; ++c) f[size_t(2 * cols + c)] = 0.0f;
  Weights w;
  const size_t rb = size_t(dtype_row_bytes(type, cols));
  w.file.resize(size_t(rows) * rb);
  if (dtype_is_kquant(type)) {  // random codes and sub-block scales under finite f16 scales
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& b : w.file) b = uint8_t(byte(rng));
    const int64_t bb = dtype_block_bytes(type);
    // Offsets of each block's f16 fields (core/kquants.h).
    const std::vector<int64_t> halves = type == DType::Q2_K   ? std::vector<int64_t>{80, 82}
                                        : type == DType::Q3_K ? std::vector<int64_t>{108}
                                        : type == DType::Q4_K || type == DType::Q5_K
                                            ? std::vector<int64_t>{0, 2}
                                        : type == DType::Q6_K ? std::vector<int64_t>{208}
                                                              : std::vector<int64_t>{0};
    std::uniform_real_distribution<float> scale(0.001f, 0.1f);
    for (size_t o = 0; o < w.file.size(); o += size_t(bb))
      for (int64_t h : halves) {
        const uint16_t v = fp32_to_fp16(scale(rng));
        std::memcpy(&w.file[o + size_t(h)], &v, 2);
      }
    return w;
  }
  if (dtype_has_row_scale(type)) w.scales.resize(size_t(rows));
  for (int64_t r = 0; r < rows; ++r)
    quantize_row(type, f.data() + r * cols, w.file.data() + size_t(r) * rb, cols,
                 w.scales.empty() ? nullptr : &w.scales[size_t(r)]);
  return w;
}

bool activation_quantised(DType type) {
  return type == DType::Q8_0 || type == DType::Q4_0 || type == DType::Q8_C ||
         type == DType::Q4_G128 || type == DType::Q4_K || type == DType::Q5_K ||
         type == DType::Q6_K;
}

// Tolerances, relative to sum_c |w_rc * x_tc| (the scale of the rounding error of any summation):
//  * F32 / F16 / BF16: the kernels compute the exact products of the stored weights with f32
//    accumulation in a different order than the double reference: error ~ cols * 2^-24 * sum|.|
//    at worst and ~ sqrt(cols) * 2^-24 typically; 1e-5 covers cols up to 4k with margin.
//  * Q8_0 / Q4_0 on SIMD ISAs: activations are quantised to int8 per block of 32 with scale
//    absmax/127, i.e. each activation moves by at most half a step = absmax/254 <= |x|max/254.
//    The error per product is then <= |w| * absmax_block / 254, so relative to sum|w*x| it is
//    bounded by (absmax/|x|) / 254; for Gaussian data the errors are random-signed and the
//    observed relative error is ~1e-3. We allow 1/127 (worst-case step, not half step) of
//    sum_c |w_rc| * absmax(x block): a provable bound, checked separately.
//  * Q8_C / Q4_G128 quantise the activations the same way, and their kernels compute the exact
//    product of the stored weights with the quantised activations (integer dots, then f32
//    scaling), so the same block bound holds. Q4_G128 splits each weight into d * q + m and sums
//    the two parts separately; the parts are at most a few times sum|w*x|, so their f32
//    rounding stays far below the 1e-5 * sum|w*x| added to the bound.
//  * FP8 is a float type: exact products of the stored e4m3 values (their f16 / f32 images are
//    exact up to powers of two, which scale without rounding), f32 sums, and one multiply by the
//    row scale at the end instead of one per weight: 1e-5.
// The block bound is loose (a wrong block scale can hide inside it), so the SIMD results of the
// activation-quantised types are also compared with the exact product of the weights and the
// activations quantised as the kernels do (quantised_activations): only f32 rounding separates
// the two, 1e-5 of sum|w * x~| (Q4_G128: its weights d * q + m are rounded once more in the
// reference, relative to |d * q| + |m| <= a few |w|: still far below 1e-5).
double tolerance_for(DType type, Isa isa) {
  if (activation_quantised(type)) return isa == Isa::Scalar ? 1e-5 : -1;  // -1: block bound
  return 1e-5;
}

// x quantised per block of 32 (the last one possibly shorter, as Q8_C pads it with zeros) the
// way the SIMD kernels do: d = absmax / 127 in f32, q = round-to-nearest-even(x * (1 / d)),
// then dequantised (exactly, in double).
std::vector<double> quantised_activations(const float* x, int64_t cols) {
  std::vector<double> out(static_cast<size_t>(cols));
  for (int64_t b = 0; b < cols; b += 32) {
    const int64_t e = std::min(b + 32, cols);
    float amax = 0;
    for (int64_t k = b; k < e; ++k) amax = std::max(amax, std::fabs(x[k]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int64_t k = b; k < e; ++k) {
      const float v = x[k] * id;
      out[size_t(k)] = double(std::nearbyint(v)) * double(d);
    }
  }
  return out;
}

void check_case(const Case& c, Isa isa, int threads, uint32_t seed) {
  std::mt19937 rng(seed);
  const Weights wt = random_weights(c.type, c.rows, c.cols, rng);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(c.n * c.cols));
  for (auto& v : x) v = dist(rng);
  // Awkward activations: an all-zero block (scale 0), a block of huge values, a lone outlier.
  if (c.cols >= 96) {
    for (int64_t k = 32; k < 64; ++k) x[size_t(k)] = 0.0f;
    for (int64_t k = 64; k < 96; ++k) x[size_t(c.n - 1) * size_t(c.cols) + size_t(k)] *= 1e4f;
    x[size_t(c.cols / 2)] = -300.0f;
  }
  std::vector<float> want(size_t(c.n * c.rows)), got(size_t(c.n * c.rows), NAN);
  matmul_reference(c.type, c.rows, c.cols, wt.file.data(), x.data(), c.n, want.data(),
                   wt.scale_ptr());
  const PackedMatrix w = PackedMatrix::pack(c.type, c.rows, c.cols, wt.file.data(), wt.scale_ptr());
  ThreadPool pool(threads);
  matmul_with(isa, w, x.data(), c.n, got.data(), pool);

  const double tol = tolerance_for(c.type, isa);
  std::vector<float> row(size_t(c.cols));
  const size_t rb = size_t(dtype_row_bytes(c.type, c.cols));
  int bad = 0;
  for (int64_t r = 0; r < c.rows && bad < 5; ++r) {
    dequantize_row(c.type, wt.file.data() + size_t(r) * rb, row.data(), c.cols, wt.scale(r));
    for (int64_t t = 0; t < c.n && bad < 5; ++t) {
      const float* xt = x.data() + t * c.cols;
      double abs_sum = 0, bound = 0;
      for (int64_t k = 0; k < c.cols; ++k) abs_sum += std::fabs(double(row[size_t(k)]) * xt[k]);
      if (tol < 0) {
        for (int64_t b = 0; b < c.cols; b += 32) {
          double amax = 0, wsum = 0;
          for (int64_t k = b; k < std::min(b + 32, c.cols); ++k) {
            amax = std::max(amax, double(std::fabs(xt[k])));
            wsum += std::fabs(row[size_t(k)]);
          }
          bound += wsum * amax / 127.0;
        }
        bound += 1e-5 * abs_sum;
      } else {
        bound = tol * abs_sum + 1e-30;
      }
      const double g = got[size_t(t * c.rows + r)], e = want[size_t(t * c.rows + r)];
      if (!(std::fabs(g - e) <= bound)) {
        ++bad;
        ADD_FAILURE() << dtype_name(c.type) << " " << isa_name(isa) << " threads=" << threads
                      << " rows=" << c.rows << " cols=" << c.cols << " n=" << c.n << " at r=" << r
                      << " t=" << t << ": got " << g << " want " << e << " bound " << bound;
      }
      if (tol < 0) {
        const std::vector<double> xq = quantised_activations(xt, c.cols);
        double eq = 0, abs_q = 0;
        for (int64_t k = 0; k < c.cols; ++k) {
          eq += double(row[size_t(k)]) * xq[size_t(k)];
          abs_q += std::fabs(double(row[size_t(k)]) * xq[size_t(k)]);
        }
        if (!(std::fabs(g - eq) <= 1e-5 * abs_q + 1e-30)) {
          ++bad;
          ADD_FAILURE() << dtype_name(c.type) << " " << isa_name(isa) << " threads=" << threads
                        << " rows=" << c.rows << " cols=" << c.cols << " n=" << c.n << " at r=" << r
                        << " t=" << t << ": got " << g << " want (quantised activations) " << eq;
        }
      }
    }
  }
}

std::vector<Case> float_cases(DType t) {
  return {{t, 1, 1, 1},     {t, 3, 31, 1},    {t, 33, 33, 1},    {t, 31, 3, 3},
          {t, 17, 64, 5},   {t, 70, 100, 9},  {t, 64, 255, 16},  {t, 4095, 33, 2},
          {t, 33, 4095, 1}, {t, 129, 96, 37}, {t, 300, 2050, 40}};
}
std::vector<Case> quant_cases(DType t) {
  return {{t, 1, 32, 1},
          {t, 3, 96, 1},
          {t, 33, 32, 3},
          {t, 31, 64, 5},
          {t, 17, 96, 9},
          {t, 70, 128, 16},
          {t, 4095, 32, 2},
          {t, 33, 4064, 1},
          {t, 19, 4128, 4},
          {t, 129, 96, 37},
          {t, 300, 4128, 40},
          {t, 300, 96, 1},  // decode over groups of panels (kQuantDecodePanels),
                            // then single ones
          // Small batches: 2 tokens over groups of 4 panels and a tail panel; 3 and 6 tokens of
          // a streaming matrix (at least kStreamingBytes, 512 KiB: 2 panels x 6-token tiles,
          // prefetching), the second with a tail panel. Q4_0 needs more rows for the bytes.
          {t, 70, 96, 2},
          {t, t == DType::Q4_0 ? 2000 : 1040, 512, 3},
          {t, t == DType::Q4_0 ? 1990 : 1030, 544, 6}};
}
// Groups of 128 columns; rows not a multiple of 16; n through decode, small-batch tiles and their
// tails, and prefill tiles with tails.
std::vector<Case> q4g128_cases() {
  const DType t = DType::Q4_G128;
  return {{t, 1, 128, 1},   {t, 3, 256, 1},    {t, 33, 128, 3},    {t, 31, 384, 5},
          {t, 17, 128, 9},  {t, 70, 256, 17},  {t, 4095, 128, 2},  {t, 33, 4096, 1},
          {t, 19, 4224, 4}, {t, 129, 640, 33}, {t, 300, 1152, 40}, {t, 300, 256, 1},
          {t, 70, 128, 2},  {t, 2000, 512, 5}};
}
// Q8_C takes any number of columns (rows zero-padded to 32 in the packed layout).
std::vector<Case> q8c_cases() {
  std::vector<Case> c = quant_cases(DType::Q8_C);
  for (const Case& e : std::vector<Case>{{DType::Q8_C, 5, 1, 1},
                                         {DType::Q8_C, 17, 33, 3},
                                         {DType::Q8_C, 33, 100, 5},
                                         {DType::Q8_C, 18, 4095, 17},
                                         {DType::Q8_C, 47, 200, 33}})
    c.push_back(e);
  return c;
}
std::vector<Case> fp8_cases() {
  std::vector<Case> c = float_cases(DType::FP8_E4M3);
  c.push_back({DType::FP8_E4M3, 45, 77, 17});
  c.push_back({DType::FP8_E4M3, 20, 130, 33});
  return c;
}

std::vector<Case> cases_for(DType type) {
  switch (type) {
    case DType::Q8_0:
    case DType::Q4_0:
      return quant_cases(type);
    case DType::Q8_C:
      return q8c_cases();
    case DType::Q4_G128:
      return q4g128_cases();
    case DType::FP8_E4M3:
      return fp8_cases();
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:  // decode over panel pairs and a tail; batch tiles and their tails
      return {{type, 17, 512, 1}, {type, 33, 256, 5},   {type, 16, 768, 2},  {type, 300, 512, 1},
              {type, 70, 256, 9}, {type, 129, 768, 17}, {type, 33, 4096, 1}, {type, 1, 256, 3}};
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::IQ4_XS:
      return {{type, 17, 512, 1}, {type, 33, 256, 5}, {type, 16, 768, 2}};
    case DType::IQ4_NL:
      return {{type, 17, 96, 1}, {type, 33, 256, 5}};
    default:
      return float_cases(type);
  }
}

class MatmulTest : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulTest, MatchesReferenceOnEveryIsaAndThreadCount) {
  const DType type = GetParam();
  uint32_t seed = 1;
  for (const Case& c : cases_for(type))
    for (Isa isa : supported_isas())
      for (int threads : {1, 2}) check_case(c, isa, threads, seed++);
}

TEST_P(MatmulTest, PackDequantizeRoundTripIsExact) {
  const DType type = GetParam();
  std::mt19937 rng(7);
  for (int64_t rows : {1, 17, 40}) {
    const int64_t cols = type == DType::Q4_G128 || dtype_is_kquant(type) ? 768
                         : activation_quantised(type)                    ? 96
                                                                         : 100;
    const Weights wt = random_weights(type, rows, cols, rng);
    const PackedMatrix w = PackedMatrix::pack(type, rows, cols, wt.file.data(), wt.scale_ptr());
    EXPECT_EQ(w.weight_bytes(), wt.file.size() + wt.scales.size() * 4);
    std::vector<float> want(static_cast<size_t>(cols)), got(static_cast<size_t>(cols));
    const size_t rb = size_t(dtype_row_bytes(type, cols));
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(type, wt.file.data() + size_t(r) * rb, want.data(), cols, wt.scale(r));
      w.dequantize_row(r, got.data());
      for (int64_t c = 0; c < cols; ++c)
        ASSERT_EQ(std::memcmp(&want[size_t(c)], &got[size_t(c)], 4), 0) << "r=" << r << " c=" << c;
    }
  }
}

TEST(MatmulDispatch, ActiveIsaMatchesExplicit) {
  std::mt19937 rng(3);
  const int64_t rows = 40, cols = 64, n = 3;
  const Weights wt = random_weights(DType::F16, rows, cols, rng);
  std::vector<float> x(size_t(n * cols), 0.5f), a(size_t(n * rows)), b(size_t(n * rows));
  const PackedMatrix w = PackedMatrix::pack(DType::F16, rows, cols, wt.file.data());
  ThreadPool pool(2);
  matmul(w, x.data(), n, a.data(), pool);
  matmul_with(active_isa(), w, x.data(), n, b.data(), pool);
  EXPECT_EQ(a, b);
}

// Every e4m3 code (but the NaNs 0x7f / 0xff) through every FP8 kernel path: with one-hot
// activations (powers of two, tiny to huge) each output is one weight times its row scale times
// the activation, which the kernels must reproduce bit for bit: the f16 or f32 image of a code
// is exact, the sums add zeros, powers of two scale without rounding, the row scale multiplies
// once. Run normally, and with subnormals flushed on the calling thread (one thread; MXCSR.DAZ,
// FPCR.FZ), where the decode kernel that reads e4m3 subnormals as f32 subnormals must not be used.
TEST(MatmulFp8, EveryCodeIsExactThroughEveryKernel) {
  std::vector<uint8_t> codes;
  for (int v = 0; v < 256; ++v)
    if ((v & 0x7f) != 0x7f) codes.push_back(uint8_t(v));
  const int64_t nc = int64_t(codes.size()), rows = nc, cols = nc;  // 254 x 254
  std::vector<uint8_t> file(size_t(rows * cols));
  std::vector<float> scales(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    scales[size_t(r)] = std::ldexp(1.0f + float(r % 7) / 8.0f, int(r % 11) - 5);
    for (int64_t c = 0; c < cols; ++c) file[size_t(r * cols + c)] = codes[size_t((r + c) % nc)];
  }
  const PackedMatrix w =
      PackedMatrix::pack(DType::FP8_E4M3, rows, cols, file.data(), scales.data());
  const float powers[] = {1.0f, std::ldexp(1.0f, -100), std::ldexp(1.0f, 90)};
  const uint64_t csr = fp_control();
  for (bool daz : {false, true}) {
    set_fp_control(daz ? csr | kFlushSubnormals : csr);
    for (bool invariant : {false, true}) {
      for (int64_t n : {1, 3, 5, 17, 33}) {
        std::vector<float> x(size_t(n * cols), 0.0f), y(size_t(n * rows));
        for (int64_t t = 0; t < n; ++t) x[size_t(t * cols + (t * 37 + 11) % cols)] = powers[t % 3];
        for (Isa isa : supported_isas()) {
          ThreadPool pool(daz ? 1 : 2);
          matmul_with(isa, w, x.data(), n, y.data(), pool, MatmulOptions{invariant});
          for (int64_t t = 0; t < n; ++t) {
            const int64_t c = (t * 37 + 11) % cols;
            for (int64_t r = 0; r < rows; ++r) {
              const float want =
                  fp8_e4m3_to_fp32(file[size_t(r * cols + c)]) * scales[size_t(r)] * powers[t % 3];
              ASSERT_EQ(want, y[size_t(t * rows + r)])
                  << isa_name(isa) << " daz=" << daz << " n=" << n << " r=" << r << " code 0x"
                  << std::hex << int(file[size_t(r * cols + c)]);
            }
          }
        }
      }
    }
    set_fp_control(csr);
  }
}

TEST(MatmulPack, RejectsMissingScalesAndBadShapes) {
  std::vector<uint8_t> bytes(size_t(4 * 256 * 4), 0);
  EXPECT_THROW(PackedMatrix::pack(DType::Q8_C, 4, 64, bytes.data()), std::invalid_argument);
  EXPECT_THROW(PackedMatrix::pack(DType::FP8_E4M3, 4, 64, bytes.data()), std::invalid_argument);
  EXPECT_THROW(PackedMatrix::pack(DType::Q4_G128, 4, 96, bytes.data()), std::invalid_argument);
  EXPECT_THROW(PackedMatrix::pack(DType::Q8_0, 4, 40, bytes.data()), std::invalid_argument);
  EXPECT_THROW(PackedMatrix::pack(static_cast<DType>(1027), 4, 64, bytes.data()),
               std::invalid_argument);
  const std::vector<float> scales(4, 1.0f);
  EXPECT_NO_THROW(PackedMatrix::pack(DType::Q8_C, 4, 64, bytes.data(), scales.data()));
  EXPECT_NO_THROW(PackedMatrix::pack(DType::Q4_G128, 4, 256, bytes.data()));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulTest,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0,
                                           DType::Q4_0, DType::Q8_C, DType::Q4_G128,
                                           DType::FP8_E4M3, DType::Q2_K, DType::Q3_K, DType::Q4_K,
                                           DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS),
                         [](const ::testing::TestParamInfo<DType>& i) {
                           return std::string(dtype_name(i.param));
                         });

}  // namespace
}  // namespace shrike::kernels

namespace shrike::kernels {
namespace {

// Q/K/V and gate/up are fused by stacking their packed panels: the stacked product must give each
// part's outputs with exactly the bits of the part's own product, for every type, decode and
// batched, on one thread and split over two.
TEST(MatmulConcat, StackedProductEqualsEachPartBitForBit) {
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q8_C,
                     DType::Q4_G128, DType::FP8_E4M3, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    std::mt19937 rng(11);
    const int64_t cols = type == DType::Q4_G128 || dtype_is_kquant(type) ? 1024 : 1024 + 32;
    const std::vector<int64_t> part_rows = {64, 32, 45};  // the last part may end mid-panel
    std::vector<Weights> wts;
    std::vector<PackedMatrix> parts;
    for (int64_t rows : part_rows) {
      wts.push_back(random_weights(type, rows, cols, rng));
      parts.push_back(
          PackedMatrix::pack(type, rows, cols, wts.back().file.data(), wts.back().scale_ptr()));
    }
    const PackedMatrix fused = PackedMatrix::concat_rows({&parts[0], &parts[1], &parts[2]});
    ASSERT_EQ(fused.rows(), 64 + 32 + 45) << dtype_name(type);
    EXPECT_EQ(fused.weight_bytes(),
              parts[0].weight_bytes() + parts[1].weight_bytes() + parts[2].weight_bytes());
    for (int threads : {1, 2})
      for (int64_t n : {1, 5, 40}) {
        std::normal_distribution<float> dist(0.0f, 1.0f);
        std::vector<float> x(size_t(n * cols));
        for (auto& v : x) v = dist(rng);
        ThreadPool pool(threads);
        std::vector<float> all(size_t(n * fused.rows()));
        matmul(fused, x.data(), n, all.data(), pool);
        int64_t offset = 0;
        for (const PackedMatrix& p : parts) {
          std::vector<float> own(size_t(n * p.rows()));
          matmul(p, x.data(), n, own.data(), pool);
          for (int64_t t = 0; t < n; ++t)
            ASSERT_EQ(std::memcmp(&own[size_t(t * p.rows())],
                                  &all[size_t(t * fused.rows() + offset)], size_t(p.rows()) * 4),
                      0)
                << dtype_name(type) << " threads=" << threads << " n=" << n << " t=" << t
                << " part at row " << offset;
          offset += p.rows();
        }
      }
  }
}

// RMSNorm fused with activation quantisation (NormedInput) against rmsnorm then matmul: the same
// bits, on every ISA, weight type, thread count, row selection, and for the awkward widths that
// keep f32 rows (not a multiple of 32).
TEST(MatmulNormedInput, EqualsRmsnormThenMatmulBitForBit) {
  for (Isa isa : supported_isas())
    for (DType type : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0, DType::Q8_C,
                       DType::Q4_G128, DType::FP8_E4M3, DType::Q4_K, DType::Q5_K, DType::Q6_K})
      for (int64_t cols : {int64_t(64), int64_t(256), int64_t(72)}) {
        if (cols % 32 != 0 && type != DType::F32 && type != DType::F16 && type != DType::Q8_C)
          continue;  // Q8_0 / Q4_0 / FP8 rows are whole blocks of 32
        if (type == DType::Q4_G128 && cols % 128 != 0) continue;
        if (dtype_is_kquant(type) && cols % 256 != 0) continue;
        std::mt19937 rng(uint32_t(cols) * 31 + uint32_t(static_cast<int>(type)));
        const int64_t rows = 40, all_rows = 12;
        const Weights wt = random_weights(type, rows, cols, rng);
        const PackedMatrix w = PackedMatrix::pack(type, rows, cols, wt.file.data(), wt.scale_ptr());
        std::vector<float> x = randn(size_t(all_rows * cols), rng, 3.0f);
        const std::vector<float> gain = randn(size_t(cols), rng);
        for (int64_t k = 0; k < std::min<int64_t>(32, cols); ++k)
          x[size_t(k)] = 0.0f;  // all-zero row block
        const std::vector<int64_t> picked = {11, 0,
                                             5};  // rows out of order, as the logits take them
        for (int threads : {1, 2})
          for (int64_t n : {int64_t(1), int64_t(3), int64_t(12)}) {
            const int64_t* sel = n == 3 ? picked.data() : nullptr;
            ThreadPool pool(threads);
            std::vector<float> normed(size_t(n * cols)), want(size_t(n * rows)),
                got(size_t(n * rows), NAN);
            for (int64_t t = 0; t < n; ++t)
              rmsnorm(normed.data() + t * cols, x.data() + (sel ? sel[t] : t) * cols, gain.data(),
                      cols, 1e-5f);
            matmul_with(isa, w, normed.data(), n, want.data(), pool);
            NormedInput in;
            in.prepare_with(isa, x.data(), sel, n, gain.data(), cols, 1e-5f, type, pool);
            EXPECT_EQ(in.quantised(),
                      isa != Isa::Scalar && NormedInput::quantised_weights(type) && cols % 32 == 0);
            matmul(w, in, got.data(), pool);
            ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0)
                << isa_name(isa) << " " << dtype_name(type) << " cols=" << cols
                << " threads=" << threads << " n=" << n;
          }
      }
}

TEST(MatmulNormedInput, RefusesMismatchedProducts) {
  std::mt19937 rng(3);
  const Weights q = random_weights(DType::Q8_0, 16, 64, rng);
  const Weights f = random_weights(DType::F32, 16, 64, rng);
  const PackedMatrix wq = PackedMatrix::pack(DType::Q8_0, 16, 64, q.file.data());
  const PackedMatrix wf = PackedMatrix::pack(DType::F32, 16, 64, f.file.data());
  const PackedMatrix w96 = PackedMatrix::pack(DType::F32, 16, 96, randn(16 * 96, rng).data());
  const std::vector<float> x = randn(64, rng), gain = randn(64, rng);
  std::vector<float> y(16);
  ThreadPool pool(1);
  NormedInput in;
  in.prepare(x.data(), nullptr, 1, gain.data(), 64, 1e-5f, DType::Q8_0, pool);
  EXPECT_THROW(matmul(w96, in, y.data(), pool), std::invalid_argument);  // width
  if (in.quantised()) {
    EXPECT_THROW(matmul(wf, in, y.data(), pool), std::invalid_argument);
  }
  EXPECT_NO_THROW(matmul(wq, in, y.data(), pool));
  in.prepare(x.data(), nullptr, 1, gain.data(), 64, 1e-5f, DType::F32, pool);
  EXPECT_FALSE(in.quantised());
  EXPECT_NO_THROW(matmul(wq, in, y.data(), pool));  // f32 rows serve any weights
  EXPECT_NO_THROW(matmul(wf, in, y.data(), pool));
}

TEST(MatmulConcat, RefusesPartsThatCannotStack) {
  std::mt19937 rng(5);
  const Weights a = random_weights(DType::Q8_0, 17, 64, rng),
                b = random_weights(DType::Q8_0, 16, 64, rng);
  const Weights f = random_weights(DType::F16, 16, 64, rng),
                c = random_weights(DType::Q8_0, 16, 96, rng);
  const PackedMatrix pa = PackedMatrix::pack(DType::Q8_0, 17, 64, a.file.data());
  const PackedMatrix pb = PackedMatrix::pack(DType::Q8_0, 16, 64, b.file.data());
  const PackedMatrix pf = PackedMatrix::pack(DType::F16, 16, 64, f.file.data());
  const PackedMatrix pc = PackedMatrix::pack(DType::Q8_0, 16, 96, c.file.data());
  EXPECT_EQ(PackedMatrix::concat_rows({&pa, &pb}).rows(), 0);   // 17 rows: a padded panel inside
  EXPECT_EQ(PackedMatrix::concat_rows({&pb, &pa}).rows(), 33);  // ... but fine at the end
  EXPECT_EQ(PackedMatrix::concat_rows({&pb, &pf}).rows(), 0);   // types differ
  EXPECT_EQ(PackedMatrix::concat_rows({&pb, &pc}).rows(), 0);   // cols differ
  EXPECT_EQ(PackedMatrix::concat_rows({}).rows(), 0);
}

// Small products stay on the caller; large ones use the whole pool; never more than it has.
TEST(MatmulThreads, SplitsOnlyProductsWorthWakingThePoolFor) {
  EXPECT_EQ(threads_for_product(16 * 1024, 1, 2), 1);   // a tiny task model's matrix
  EXPECT_EQ(threads_for_product(600 * 1024, 1, 2), 2);  // a 110M model's matrix
  EXPECT_EQ(threads_for_product(16 * 1024, 64, 2), 2);  // the same tiny matrix in prefill
  EXPECT_EQ(threads_for_product(600 * 1024, 1, 4), 4);
  EXPECT_EQ(threads_for_product(200 * 1024, 1, 16), 3);  // as many as have enough work
  EXPECT_EQ(threads_for_product(1 << 30, 1, 1), 1);
  EXPECT_EQ(threads_for_product(0, 0, 8), 1);
}

}  // namespace
}  // namespace shrike::kernels
