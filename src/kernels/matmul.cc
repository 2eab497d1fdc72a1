// Packing, the reference product and the run-time dispatch of the matmul kernels. This file is
// compiled for the baseline ISA; the SIMD kernels live in matmul_avx2.cc / matmul_avx512.cc /
// matmul_vnni.cc and are only entered through the function pointers of detail::IsaMatmul.
#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/kquants.h"
#include "kernels/matmul_internal.h"
#include "kernels/ops.h"

namespace shrike::kernels {

namespace detail {
// Row `lane` of a packed panel dequantised to f32 (matmul_scalar.cc); bf16_pairs: the panel is
// in the BF16-pair layout.
void dequantize_packed_row(DType type, bool bf16_pairs, const uint8_t* panel, int64_t lane,
                           int64_t cols, float* out);

int64_t bf16_pair_count(int64_t cols) {
  return (cols + 1) / 2;
}
}  // namespace detail

using detail::kPanel;

struct PackedMatrixAccess {
  static void pack_into(PackedMatrix& m, const void* file_rows, const float* row_scales);
};

namespace {

int64_t n_panels(int64_t rows) {
  return (rows + kPanel - 1) / kPanel;
}

void check_type(DType type, int64_t cols) {
  switch (type) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_C:  // any cols: the packed rows are zero-padded to a multiple of 32
    case DType::FP8_E4M3:
      return;
    case DType::Q8_0:
    case DType::Q4_0:
      if (cols % kQuantBlock != 0)
        throw std::invalid_argument("matmul: cols must be a multiple of 32 for quantised weights");
      return;
    case DType::Q4_G128:
      if (cols % kQ4G128Block != 0)
        throw std::invalid_argument("matmul: cols must be a multiple of 128 for q4_g128 weights");
      return;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
      if (cols % dtype_block_elems(type) != 0)
        throw std::invalid_argument("matmul: cols must be a multiple of " +
                                    std::to_string(dtype_block_elems(type)) + " for " +
                                    std::string(dtype_name(type)) + " weights");
      return;
  }
  throw std::invalid_argument("matmul: unsupported weight type " +
                              std::to_string(static_cast<uint32_t>(type)));
}

int64_t round_up(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}

bool quantised_type(DType t) {
  return t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q8_C || t == DType::Q4_G128 ||
         detail::kquant_repacked(t);
}

// The activation-sum correction the kernels start each block from (GemmArgs::xs):
// Q4_0 nibbles carry an offset of 8; Q4_G128 and the k-quants none, but their minima (Q6_K: its
// codes' offset of 32, per 16 columns) need the plain block sums (offset -1); Q8 weights are read
// as w + q8_offset.
int32_t activation_offset(DType type, const detail::IsaMatmul& k) {
  if (type == DType::Q4_G128 || detail::kquant_repacked(type)) return -1;
  return type == DType::Q4_0 ? 8 : k.q8_offset;
}

// Floats of GemmArgs::xm per token: Q4_G128 one per group of 128 columns, Q4_K / Q5_K one per
// block of 32.
int64_t minimum_sums_per_token(DType type, int64_t kq) {
  if (type == DType::Q4_G128) return kq / kQ4G128Block;
  if (type == DType::Q4_K || type == DType::Q5_K) return kq / kQuantBlock;
  return 0;
}

// Q4_G128: per group of 4 blocks, the sum in order of xd * float(plain block sum) (GemmArgs::xm).
void group_minimum_sums(const float* xd, const int32_t* sums, int64_t ng, float* xm) {
  for (int64_t g = 0; g < ng; ++g) {
    const float* d = xd + 4 * g;
    const int32_t* s = sums + 4 * g;
    float sum = d[0] * float(s[0]);
    for (int j = 1; j < 4; ++j) sum += d[j] * float(s[j]);
    xm[g] = sum;
  }
}

// The per-token extras of the minimum-carrying types from the quantised activations of one token
// (kq columns; q, d and plain block sums): GemmArgs::xm and, for Q6_K, GemmArgs::xs16.
void minimum_sums(DType type, const int8_t* q, const float* d, const int32_t* sums, int64_t kq,
                  float* xm, int32_t* xs16) {
  const int64_t nb = kq / kQuantBlock;
  if (type == DType::Q4_G128) {
    group_minimum_sums(d, sums, kq / kQ4G128Block, xm);
  } else if (type == DType::Q4_K || type == DType::Q5_K) {
    for (int64_t b = 0; b < nb; ++b) xm[b] = d[b] * float(sums[b]);
  } else if (type == DType::Q6_K) {
    for (int64_t j = 0; j < kq / 16; ++j) {
      int32_t s = 0;
      for (int i = 0; i < 16; ++i) s += q[16 * j + i];
      xs16[j] = -32 * s;
    }
  }
}

// Row-scale types (Q8_C, FP8) keep the 16 rows' scales as the first 64 bytes of each panel.
constexpr int64_t kScaleBytes = kPanel * 4;

// Scratch that grows and is kept per thread: no allocation per call in the steady state.
struct Scratch {
  AlignedBytes bytes;
  size_t size = 0;
  uint8_t* get(size_t n) {
    if (n > size) {
      bytes = aligned_alloc_bytes(n);
      size = n;
    }
    return bytes.get();
  }
};

bool isa_ok(Isa isa) {
  static const auto supported = [] {
    std::vector<bool> ok(kIsaCount, false);
    for (Isa i : supported_isas()) ok[size_t(static_cast<int>(i))] = true;
    return ok;
  }();
  const int i = static_cast<int>(isa);
  return i >= 0 && i < kIsaCount && supported[size_t(i)];
}

const detail::IsaMatmul& isa_table(Isa isa) {
  if (!isa_ok(isa))
    throw std::invalid_argument("matmul: ISA not supported here: " + std::string(isa_name(isa)));
  // Each entry is built the first time its ISA is used (the builder runs code of that ISA). Only
  // the targets of the architecture we are built for exist (isa_ok() refused the others).
  switch (isa) {
    case Isa::Scalar: {
      static const detail::IsaMatmul t = detail::isa_matmul_scalar();
      return t;
    }
#if SHRIKE_KERNELS_X86
    case Isa::Avx2: {
      static const detail::IsaMatmul t = detail::isa_matmul_avx2();
      return t;
    }
    case Isa::Avx512: {
      static const detail::IsaMatmul t = detail::isa_matmul_avx512();
      return t;
    }
    case Isa::Avx512Vnni: {
      static const detail::IsaMatmul t = detail::isa_matmul_avx512vnni();
      return t;
    }
#elif SHRIKE_KERNELS_NEON
    case Isa::Neon: {
      static const detail::IsaMatmul t = detail::isa_matmul_neon();
      return t;
    }
    case Isa::NeonDot: {
      static const detail::IsaMatmul t = detail::isa_matmul_neon_dot();
      return t;
    }
#endif
    default:
      break;
  }
  throw std::invalid_argument("matmul: unknown ISA");
}

// FP8 decode reads each e4m3 byte as an f32 bit pattern worth value * 2^-120 (see
// matmul_avx512.cc), so x is scaled by 2^k to keep the products far from the subnormal range:
// max|x| * 2^k lands in [2^99, 2^100) (k clamped to [0, 240], so 2^(120 - k) is a normal float);
// products then stay below 2^-11 per column and only terms 2^-97 below max|x| could underflow.
// Writes x * 2^k to out and returns 2^(120 - k).
float scale_for_fp8_decode(const float* x, int64_t n, float* out) {
  uint32_t amax_bits = 0;  // |x| as bits: orders like the values (NaN above inf)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, &x[i], 4);
    b &= 0x7fffffffu;
    amax_bits = b > amax_bits ? b : amax_bits;
  }
  const int e = int(amax_bits >> 23);  // biased exponent; 0: zero or subnormal; 255: inf / NaN
  int k = 0;
  if (e != 255 && amax_bits != 0) k = std::clamp(99 - (std::max(e, 1) - 127), 0, 240);
  auto pow2 = [](int j) {  // j in [-126, 127]
    const uint32_t b = uint32_t(j + 127) << 23;
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  };
  const float f1 = pow2(std::min(k, 127)), f2 = pow2(k - std::min(k, 127));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * f1 * f2;
  return pow2(120 - k);
}

}  // namespace

int threads_for_product(size_t weight_bytes, int64_t n, int pool_threads) {
  const double work = double(weight_bytes) * double(std::max<int64_t>(n, 1));
  const double useful = work / double(kMinProductBytesPerThread);
  return int(std::clamp<double>(useful, 1.0, double(std::max(pool_threads, 1))));
}

namespace detail {
int64_t panel_bytes(DType t, int64_t cols) {
  switch (t) {
    case DType::F32:
      return cols * kPanel * 4;
    case DType::F16:
    case DType::BF16:
      return cols * kPanel * 2;
    case DType::Q8_0:
      return cols / kQuantBlock * kPanel * int64_t(sizeof(BlockQ8_0));
    case DType::Q4_0:
      return cols / kQuantBlock * kPanel * int64_t(sizeof(BlockQ4_0));
    case DType::Q8_C:
      return kScaleBytes + round_up(cols, kQuantBlock) * kPanel;
    case DType::Q4_G128:
      return cols / kQ4G128Block * kPanel * int64_t(sizeof(BlockQ4_G128));
    case DType::FP8_E4M3:
      return kScaleBytes + round_up(cols * kPanel, 64);
    case DType::Q4_K:
      return cols / kSuperBlock * kQ4KSuperBytes;
    case DType::Q5_K:
      return cols / kSuperBlock * kQ5KSuperBytes;
    case DType::Q6_K:
      return cols / kSuperBlock * kQ6KSuperBytes;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
      return kPanel * dtype_row_bytes(t, cols);
  }
  return 0;
}
}  // namespace detail

namespace {
std::atomic<bool> g_bf16_dot{false};

// Bytes of one panel of m's layout.
int64_t packed_panel_bytes(DType type, bool bf16_pairs, int64_t cols) {
  return bf16_pairs ? detail::bf16_pair_count(cols) * 64 : detail::panel_bytes(type, cols);
}

// Row `lane` of a F16 / BF16 file row into a BF16-pair panel (matmul_internal.h).
void pack_bf16_pairs_row(DType type, const uint8_t* row, int64_t cols, uint8_t* panel,
                         int64_t lane) {
  for (int64_t c = 0; c < cols; ++c) {
    uint16_t h;
    std::memcpy(&h, row + c * 2, 2);
    const uint16_t b = type == DType::BF16 ? h : fp32_to_bf16(fp16_to_fp32(h));
    std::memcpy(panel + (c / 2) * 64 + lane * 4 + (c % 2) * 2, &b, 2);
  }
}
}  // namespace

bool bf16_dot_supported() {
#if SHRIKE_KERNELS_X86
  return cpu_features().avx512_bf16;
#else
  return false;
#endif
}

void set_bf16_dot(bool on) {
  if (on && !bf16_dot_supported())
    throw std::invalid_argument(
        "bf16 dot products need a CPU with AVX512_BF16 (this one: " + cpu_features_string() + ")");
  g_bf16_dot.store(on);
}

bool bf16_dot() {
  return g_bf16_dot.load();
}

void PackedMatrixAccess::pack_into(PackedMatrix& m, const void* file_rows,
                                   const float* row_scales) {
  const int64_t rows = m.rows_, cols = m.cols_;
  const int64_t pb = packed_panel_bytes(m.type_, m.bf16_pairs_, cols);
  const size_t row_bytes = size_t(dtype_row_bytes(m.type_, cols));
  const auto* src = static_cast<const uint8_t*>(file_rows);
  const int64_t np = n_panels(rows);
  m.data_ = aligned_alloc_bytes(size_t(np * pb));
  uint8_t* dst0 = m.data_.get();
  std::memset(dst0, 0, size_t(np * pb));
  const int64_t q8c_blocks = (cols + kQuantBlock - 1) / kQuantBlock;
  for (int64_t p = 0; p < np; ++p) {
    uint8_t* dst = dst0 + p * pb;
    if (m.type_ == DType::Q8_C)  // every weight 0 (stored + 128), padding included
      std::memset(dst + kScaleBytes, 0x80, size_t(pb - kScaleBytes));
    for (int64_t lane = 0; lane < kPanel; ++lane) {
      const int64_t r = p * kPanel + lane;
      if (r >= rows) break;
      const uint8_t* row = src + size_t(r) * row_bytes;
      if (dtype_has_row_scale(m.type_)) std::memcpy(dst + lane * 4, &row_scales[r], 4);
      if (m.bf16_pairs_) {
        pack_bf16_pairs_row(m.type_, row, cols, dst, lane);
        continue;
      }
      switch (m.type_) {
        case DType::F32:
          for (int64_t c = 0; c < cols; ++c)
            std::memcpy(dst + (c * kPanel + lane) * 4, row + c * 4, 4);
          break;
        case DType::F16:
        case DType::BF16:
          for (int64_t c = 0; c < cols; ++c)
            std::memcpy(dst + (c * kPanel + lane) * 2, row + c * 2, 2);
          break;
        case DType::Q8_0: {
          const auto* blk = reinterpret_cast<const BlockQ8_0*>(row);
          for (int64_t b = 0; b < cols / kQuantBlock; ++b) {
            uint8_t* o = dst + b * kPanel * int64_t(sizeof(BlockQ8_0));
            std::memcpy(o + lane * 2, &blk[b].d, 2);
            for (int g = 0; g < 8; ++g)
              for (int j = 0; j < 4; ++j)
                o[32 + g * 64 + lane * 4 + j] = uint8_t(blk[b].qs[4 * g + j]) ^ 0x80;
          }
          break;
        }
        case DType::Q4_0: {
          const auto* blk = reinterpret_cast<const BlockQ4_0*>(row);
          for (int64_t b = 0; b < cols / kQuantBlock; ++b) {
            uint8_t* o = dst + b * kPanel * int64_t(sizeof(BlockQ4_0));
            std::memcpy(o + lane * 2, &blk[b].d, 2);
            for (int g = 0; g < 4; ++g)
              for (int j = 0; j < 4; ++j) o[32 + g * 64 + lane * 4 + j] = blk[b].qs[4 * g + j];
          }
          break;
        }
        case DType::Q8_C:
          for (int64_t b = 0; b < q8c_blocks; ++b) {
            uint8_t* o = dst + kScaleBytes + b * kPanel * kQuantBlock;
            for (int64_t c = b * kQuantBlock; c < std::min(cols, (b + 1) * kQuantBlock); ++c)
              o[(c % 32) / 4 * 64 + lane * 4 + c % 4] = row[c] ^ 0x80;
          }
          break;
        case DType::Q4_G128: {
          const auto* blk = reinterpret_cast<const BlockQ4_G128*>(row);
          for (int64_t g = 0; g < cols / kQ4G128Block; ++g) {
            uint8_t* o = dst + g * kPanel * int64_t(sizeof(BlockQ4_G128));
            std::memcpy(o + lane * 2, &blk[g].d, 2);
            std::memcpy(o + 32 + lane * 2, &blk[g].m, 2);
            for (int j = 0; j < 16; ++j)
              for (int k = 0; k < 4; ++k) o[64 + j * 64 + lane * 4 + k] = blk[g].qs[4 * j + k];
          }
          break;
        }
        case DType::FP8_E4M3:
          for (int64_t c = 0; c < cols; ++c) dst[kScaleBytes + c * kPanel + lane] = row[c];
          break;
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K:
          detail::pack_kquant_row(m.type_, row, cols, dst, int(lane));
          break;
        case DType::Q2_K:
        case DType::Q3_K:
        case DType::IQ4_NL:
        case DType::IQ4_XS:  // the file's rows one after another (matmul_internal.h)
          std::memcpy(dst + lane * int64_t(row_bytes), row, row_bytes);
          break;
      }
    }
  }
}

PackedMatrix PackedMatrix::pack(DType type, int64_t rows, int64_t cols, const void* file_rows,
                                const float* row_scales) {
  check_type(type, cols);
  if (rows < 0 || cols < 0) throw std::invalid_argument("matmul: negative matrix shape");
  if (dtype_has_row_scale(type) && row_scales == nullptr && rows > 0)
    throw std::invalid_argument("matmul: " + std::string(dtype_name(type)) +
                                " weights need their row scales");
  PackedMatrix m;
  m.type_ = type;
  m.rows_ = rows;
  m.cols_ = cols;
  m.bf16_pairs_ = (type == DType::F16 || type == DType::BF16) && bf16_dot();
  PackedMatrixAccess::pack_into(m, file_rows, row_scales);
  return m;
}

void PackedMatrix::dequantize_row(int64_t r, float* out) const {
  const int64_t pb = packed_panel_bytes(type_, bf16_pairs_, cols_);
  detail::dequantize_packed_row(type_, bf16_pairs_, data_.get() + (r / kPanel) * pb, r % kPanel,
                                cols_, out);
}

PackedMatrix PackedMatrix::concat_rows(const std::vector<const PackedMatrix*>& parts) {
  if (parts.empty()) return {};
  const PackedMatrix& first = *parts.front();
  int64_t rows = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const PackedMatrix& m = *parts[i];
    if (m.type_ != first.type_ || m.bf16_pairs_ != first.bf16_pairs_ || m.cols_ != first.cols_ ||
        m.rows_ <= 0)
      return {};
    if (i + 1 < parts.size() && m.rows_ % kPanel != 0) return {};  // a padded panel inside
    rows += m.rows_;
  }
  const int64_t pb = packed_panel_bytes(first.type_, first.bf16_pairs_, first.cols_);
  PackedMatrix out;
  out.type_ = first.type_;
  out.bf16_pairs_ = first.bf16_pairs_;
  out.rows_ = rows;
  out.cols_ = first.cols_;
  out.data_ = aligned_alloc_bytes(size_t(n_panels(rows) * pb));
  uint8_t* dst = out.data_.get();
  for (const PackedMatrix* m : parts) {  // panels are self-contained (row scales included)
    const size_t bytes = size_t(n_panels(m->rows_) * pb);
    std::memcpy(dst, m->data_.get(), bytes);
    dst += bytes;
  }
  return out;
}

void matmul_reference(DType type, int64_t rows, int64_t cols, const void* file_rows, const float* x,
                      int64_t n, float* y, const float* row_scales) {
  std::vector<float> row(static_cast<size_t>(cols));
  const size_t row_bytes = size_t(dtype_row_bytes(type, cols));
  for (int64_t r = 0; r < rows; ++r) {
    shrike::dequantize_row(type, static_cast<const uint8_t*>(file_rows) + size_t(r) * row_bytes,
                           row.data(), cols, row_scales ? row_scales[r] : 1.0f);
    for (int64_t t = 0; t < n; ++t) {
      double acc = 0;
      for (int64_t c = 0; c < cols; ++c) acc += double(row[size_t(c)]) * x[t * cols + c];
      y[t * rows + r] = float(acc);
    }
  }
}

// What every product of w over n tokens into y sets; the caller adds its activations.
static detail::GemmArgs gemm_args(const PackedMatrix& w, int64_t n, float* y, MatmulOptions opt) {
  detail::GemmArgs a{};
  a.type = w.type();
  a.w = w.data();
  a.panel_bytes = packed_panel_bytes(w.type(), w.bf16_pairs(), w.cols());
  a.bf16_pairs = w.bf16_pairs();
  a.rows = w.rows();
  a.cols = w.cols();
  a.n = n;
  a.y = y;
  a.invariant = opt.batch_invariant;
  a.streaming = w.weight_bytes() >= detail::kStreamingBytes;
  return a;
}

// Panels [0, np) over the first nt threads of the pool.
static void run_panels(const detail::IsaMatmul& k, const detail::GemmArgs& a, int64_t np, int nt,
                       ThreadPool& pool) {
  if (nt == 1) {
    k.gemm(a, 0, np);
    return;
  }
  // Contiguous panel ranges over the first nt threads, cut at multiples of the kernel's panel
  // group. A row's sum does not depend on which thread computes it, so the thread count never
  // changes the result.
  const int64_t align = std::max<int64_t>(1, k.panel_align);
  const int64_t units = (np + align - 1) / align;
  pool.run([&](int i, int) {
    if (i >= nt) return;
    const int64_t b = std::min(np, units * i / nt * align);
    const int64_t e = std::min(np, units * (i + 1) / nt * align);
    if (b < e) k.gemm(a, b, e);
  });
}

void matmul_with(Isa isa, const PackedMatrix& w, const float* x, int64_t n, float* y,
                 ThreadPool& pool, MatmulOptions opt) {
  if (n <= 0 || w.rows() <= 0) return;
  // Q2_K, Q3_K and the i-quants have only the portable kernel so far: correct on every ISA, not
  // yet fast.
  const bool portable_only = dtype_is_kquant(w.type()) && !detail::kquant_repacked(w.type());
  const detail::IsaMatmul& k = isa_table(portable_only ? Isa::Scalar : isa);
  detail::GemmArgs a = gemm_args(w, n, y, opt);
  a.x = x;
  const int nt = threads_for_product(w.weight_bytes(), n, pool.size());
#if SHRIKE_KERNELS_X86
  if (w.bf16_pairs() && isa != Isa::Scalar) {
    // Packed only where the CPU has AVX512_BF16 (set_bf16_dot): these kernels serve every SIMD
    // ISA asked for; the scalar target reads the pairs as floats.
    static const detail::IsaMatmul pairs{detail::bf16_pair_gemm(), nullptr, 0, 2, 0};
    const int64_t width = 2 * detail::bf16_pair_count(w.cols());
    static thread_local Scratch xscratch;
    auto* xbf = reinterpret_cast<uint16_t*>(xscratch.get(size_t(n * width) * 2 + 64));
    if (nt == 1 || n * width < 16384) {
      detail::bf16_round_rows(x, n, w.cols(), xbf);
    } else {
      pool.run([&](int i, int) {
        const int64_t t0 = n * i / nt, t1 = n * (i + 1) / nt;
        if (i < nt && t0 < t1)
          detail::bf16_round_rows(x + t0 * w.cols(), t1 - t0, w.cols(), xbf + t0 * width);
      });
    }
    a.xbf = xbf;
    return run_panels(pairs, a, n_panels(w.rows()), nt, pool);
  }
#endif
  const DType type = w.type();
  const bool quantised = quantised_type(type) && k.quantize;
  if (quantised) {
    const int64_t K = w.cols(), kq = round_up(K, kQuantBlock), nb = kq / kQuantBlock;
    const int64_t ng = minimum_sums_per_token(type, kq);
    const int64_t n16 = type == DType::Q6_K ? kq / 16 : 0;
    const size_t q_bytes = (size_t(n * kq) + 63) & ~size_t(63);
    const size_t d_bytes = (size_t(n * nb) * 4 + 63) & ~size_t(63);
    const size_t m_bytes = (size_t(n * ng) * 4 + 63) & ~size_t(63);
    const size_t s16_bytes = (size_t(n * n16) * 4 + 63) & ~size_t(63);
    static thread_local Scratch scratch;
    uint8_t* buf = scratch.get(q_bytes + 2 * d_bytes + m_bytes + s16_bytes);
    auto* xq = reinterpret_cast<int8_t*>(buf);
    auto* xd = reinterpret_cast<float*>(buf + q_bytes);
    auto* xs = reinterpret_cast<int32_t*>(buf + q_bytes + d_bytes);
    auto* xm = reinterpret_cast<float*>(buf + q_bytes + 2 * d_bytes);
    auto* xs16 = reinterpret_cast<int32_t*>(buf + q_bytes + 2 * d_bytes + m_bytes);
    const int32_t offset = activation_offset(type, k);
    auto quantize_rows = [&](int64_t t0, int64_t t1) {
      std::vector<float> padded(K == kq ? 0 : size_t(kq), 0.0f);  // Q8_C rows of any length
      for (int64_t t = t0; t < t1; ++t) {
        const float* xt = x + t * K;
        if (K != kq) {
          std::copy(xt, xt + K, padded.begin());
          xt = padded.data();
        }
        k.quantize(xt, kq, xq + t * kq, xd + t * nb, xs + t * nb, offset);
        minimum_sums(type, xq + t * kq, xd + t * nb, xs + t * nb, kq, xm + t * ng, xs16 + t * n16);
      }
    };
    if (nt == 1 || n * K < 16384) {
      quantize_rows(0, n);
    } else {
      pool.run([&](int i, int) {
        if (i < nt) quantize_rows(n * i / nt, n * (i + 1) / nt);
      });
    }
    a.xq = xq;
    a.xd = xd;
    a.xs = xs;
    a.kq = kq;
    a.xm = xm;
    a.xs16 = xs16;
  }
  const bool float_type =
      type == DType::F32 || type == DType::F16 || type == DType::BF16 || type == DType::FP8_E4M3;
  if (float_type && k.x_pack_min_n > 0 && n >= k.x_pack_min_n) {
    constexpr int64_t B = detail::kXBlock;
    const int64_t K = w.cols(), nblk = (n + B - 1) / B;
    static thread_local Scratch xscratch;
    auto* xp = reinterpret_cast<float*>(xscratch.get(size_t(nblk * B * K) * 4));
    auto pack_blocks = [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        float* dst = xp + b * B * K;
        const int64_t tn = std::min(B, n - b * B);
        for (int64_t t = 0; t < tn; ++t) {
          const float* src = x + (b * B + t) * K;
          for (int64_t c = 0; c < K; ++c) dst[c * B + t] = src[c];
        }
        for (int64_t t = tn; t < B; ++t)
          for (int64_t c = 0; c < K; ++c) dst[c * B + t] = 0.0f;
      }
    };
    if (nt == 1 || nblk == 1) {
      pack_blocks(0, nblk);
    } else {
      pool.run([&](int i, int) {
        if (i < nt) pack_blocks(nblk * i / nt, nblk * (i + 1) / nt);
      });
    }
    a.xp = xp;
  }
  if (type == DType::FP8_E4M3 && n == 1 && !a.invariant && k.quantize) {  // SIMD targets
    static thread_local Scratch x8scratch;
    auto* x8 = reinterpret_cast<float*>(x8scratch.get(size_t(w.cols()) * 4));
    a.x8_unscale = scale_for_fp8_decode(x, w.cols(), x8);
    a.x8 = x8;
  }
  run_panels(k, a, n_panels(w.rows()), nt, pool);
}

void matmul(const PackedMatrix& w, const float* x, int64_t n, float* y, ThreadPool& pool,
            MatmulOptions opt) {
  matmul_with(active_isa(), w, x, n, y, pool, opt);
}

bool NormedInput::quantised_weights(DType t) {
  return quantised_type(t);
}

void NormedInput::prepare(const float* x, const int64_t* rows, int64_t n, const float* norm_weight,
                          int64_t dim, float eps, DType weight_type, ThreadPool& pool) {
  prepare_with(active_isa(), x, rows, n, norm_weight, dim, eps, weight_type, pool);
}

void NormedInput::prepare_with(Isa isa, const float* x, const int64_t* rows, int64_t n,
                               const float* norm_weight, int64_t dim, float eps, DType weight_type,
                               ThreadPool& pool) {
  const detail::IsaMatmul& k = isa_table(isa);
  isa_ = isa;
  n_ = n;
  dim_ = dim;
  quantised_ = quantised_type(weight_type) && k.norm_quantize && dim % kQuantBlock == 0;
  const int64_t nb = dim / kQuantBlock;
  const size_t cells = size_t(std::max<int64_t>(n, 0) * dim);
  if (quantised_) {
    if (q_.size() < cells) q_.resize(cells);
    if (d_.size() < cells / kQuantBlock) d_.resize(cells / kQuantBlock);
    if (sums_.size() < cells / kQuantBlock) sums_.resize(cells / kQuantBlock);
  } else if (floats_.size() < cells) {
    floats_.resize(cells);
  }
  auto normalise = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* xt = x + (rows ? rows[t] : t) * dim;
      if (quantised_)  // plain sums (offset -1): each product derives its own correction
        k.norm_quantize(xt, norm_weight, rms_inverse(xt, dim, eps), dim, q_.data() + t * dim,
                        d_.data() + t * nb, sums_.data() + t * nb, -1);
      else
        rmsnorm(floats_.data() + t * dim, xt, norm_weight, dim, eps);
    }
  };
  // Row work is a few hundred nanoseconds: split only when there is enough of it (as matmul's
  // own quantisation does).
  const int nt = int(std::min<int64_t>(pool.size(), n));
  if (nt <= 1 || n * dim < 16384) {
    normalise(0, n);
  } else {
    pool.run([&](int i, int) {
      if (i < nt) normalise(n * i / nt, n * (i + 1) / nt);
    });
  }
}

void matmul(const PackedMatrix& w, const NormedInput& x, float* y, ThreadPool& pool,
            MatmulOptions opt) {
  if (w.cols() != x.dim())
    throw std::invalid_argument("matmul: the normalised input has " + std::to_string(x.dim()) +
                                " columns, the matrix " + std::to_string(w.cols()));
  if (!x.quantised()) return matmul_with(x.isa_, w, x.floats(), x.n(), y, pool, opt);
  if (!quantised_type(w.type()))
    throw std::invalid_argument("matmul: a quantised normalised input meets " +
                                std::string(dtype_name(w.type())) + " weights");
  const int64_t n = x.n();
  if (n <= 0 || w.rows() <= 0) return;
  const detail::IsaMatmul& k = isa_table(x.isa_);
  const int64_t K = w.cols(), nb = K / kQuantBlock;
  const int64_t ng = minimum_sums_per_token(w.type(), K);
  const int64_t n16 = w.type() == DType::Q6_K ? K / 16 : 0;
  const int32_t offset = activation_offset(w.type(), k);
  static thread_local Scratch scratch;
  const size_t s_bytes = (size_t(n * nb) * 4 + 63) & ~size_t(63);
  const size_t m_bytes = (size_t(n * ng) * 4 + 63) & ~size_t(63);
  uint8_t* buf = scratch.get(s_bytes + m_bytes + size_t(n * n16) * 4 + 64);
  const int32_t* xs = x.sums_.data();
  if (offset != -1) {  // the kernels' starting value: -offset * sum(q)
    auto* corrected = reinterpret_cast<int32_t*>(buf);
    for (int64_t i = 0; i < n * nb; ++i) corrected[i] = -offset * x.sums_[size_t(i)];
    xs = corrected;
  }
  auto* xm = reinterpret_cast<float*>(buf + s_bytes);
  auto* xs16 = reinterpret_cast<int32_t*>(buf + s_bytes + m_bytes);
  for (int64_t t = 0; t < n && ng + n16 > 0; ++t)
    minimum_sums(w.type(), x.q_.data() + t * K, x.d_.data() + t * nb, x.sums_.data() + t * nb, K,
                 xm + t * ng, xs16 + t * n16);
  detail::GemmArgs a = gemm_args(w, n, y, opt);
  a.xq = x.q_.data();
  a.xd = x.d_.data();
  a.xs = xs;
  a.kq = K;
  a.xm = xm;
  a.xs16 = xs16;
  run_panels(k, a, n_panels(w.rows()), threads_for_product(w.weight_bytes(), n, pool.size()), pool);
}

}  // namespace shrike::kernels
