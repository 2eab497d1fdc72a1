// Private interface between the matmul dispatcher (matmul.cc, baseline ISA) and the per-ISA
// kernel translation units. Only plain structs and function declarations live here: no inline or
// template code, so nothing compiled with AVX-512 flags can be shared with baseline code.
//
// Packed layout (the same for every ISA; all kernels read it):
//   Rows are grouped in panels of kPanel = 16 (the last panel is zero-padded). Panel p occupies
//   panel_bytes bytes starting at p * panel_bytes.
//   F32 / F16 / BF16: column-major inside the panel: for c in [0, cols): the 16 rows' elements of
//     column c (64 or 32 bytes), so one vector load feeds 16 dot products.
//   Q8_0 / Q4_0: for each block b of 32 columns: 16 f16 scales (32 bytes), then the quants in
//     groups of 4 columns x 16 rows (64 bytes, row r at bytes 4r..4r+3 — one int32 lane per row,
//     what vpdpbusd consumes). (Scales and quants in two separate streams per panel measured
//     much slower for decode.)
//       Q8_0: 8 groups; group g holds columns 4g..4g+3 of each row stored as unsigned w + 128.
//       Q4_0: 4 groups; group g holds file bytes qs[4g..4g+3] of each row, so the low nibbles are
//             columns 4g..4g+3 and the high nibbles columns 16+4g..16+4g+3 (unsigned 0..15).
//     A panel is 16 rows * cols/32 blocks * 34 (Q8_0) or 18 (Q4_0) bytes, exactly the file size.
//   Q8_C: the 16 rows' f32 scales (64 bytes), then for each block of 32 columns (cols rounded up
//     to 32, the padding columns hold 0) the quants as Q8_0 has them: 8 groups of 4 columns x 16
//     rows, stored as w + 128. 64 + 512 * ceil(cols/32) bytes.
//   Q4_G128: for each group of 128 columns: 16 f16 scales d (32 bytes), 16 f16 minima m (32
//     bytes), then 16 groups of 4 file bytes x 16 rows (64 bytes each): group j holds qs[4j..4j+3]
//     of each row, so its low nibbles are columns 4j..4j+3 and its high nibbles columns
//     64+4j..64+4j+3. Block b of 32 columns is the low (b = 0, 1) or high (b = 2, 3) nibbles of
//     groups 8(b%2)..8(b%2)+7. 16 * 68 bytes per group: exactly the file size.
//   FP8_E4M3: the 16 rows' f32 scales (64 bytes), then column-major bytes as the float types
//     (16 per column), padded to a multiple of 64 bytes.
//   Q4_K / Q5_K / Q6_K (kquant_pack.cc): per super-block of 256 columns, the 16 rows' scales
//     unpacked to one byte each, then the quants in groups of 4 bytes x 16 rows as Q4_G128 has
//     them (one int32 lane per row):
//       Q4_K: 16 f16 d (32 bytes), 16 f16 -dmin (32; the sign flipped so the minimum adds with
//             an FMA), the 8 sub-blocks' 6-bit scales (8 x 16 bytes, sub-block-major) and
//             minima (8 x 16), then for each chunk c of 64 columns 8 groups of file bytes
//             qs[32c + 4k .. +3]: low nibbles are columns 64c + 4k.., sub-block 2c; high nibbles
//             64c + 32 + 4k.., sub-block 2c + 1. 2,368 bytes (the file's 16 x 144 = 2,304 + 64).
//       Q5_K: Q4_K's 2,368 bytes, then 8 groups of file bytes qh[4k .. +3]: bit 2c of a byte is
//             the fifth bit of its low-nibble column in chunk c, bit 2c + 1 of the high one.
//             2,880 bytes (file: 2,816).
//       Q6_K: 16 f16 d, the 16 sub-blocks' int8 scales (16 x 16 bytes), then for each half n of
//             128 columns 16 groups of ql[64n + 4k .. +3] (low nibble: column 128n + 4k..,
//             high: + 64), and after both halves' nibbles, for each half 8 groups of
//             qh[32n + 4k .. +3] (bits 2i, 2i + 1: the top two bits of column 128n + 32i + 4k..).
//             3,360 bytes: exactly the file's 16 x 210.
//   BF16 pairs (F16 / BF16 weights packed while set_bf16_dot is on, PackedMatrix::bf16_pairs):
//     for each pair j of columns (2j, 2j + 1; an odd last column pairs with 0), 64 bytes: row r
//     at bytes 4r..4r+3, its bf16 of column 2j then of column 2j + 1 (one int32 lane per row,
//     what vdpbf16ps consumes). F16 weights are rounded to bf16 (to nearest even) at packing.
//   Q2_K / Q3_K / IQ4_NL / IQ4_XS: the 16 rows' file bytes one after another (row-major,
//     core/kquants.h); read by the portable kernel only, so far.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace shrike::kernels::detail {

constexpr int64_t kPanel = 16;

int64_t panel_bytes(DType t, int64_t cols);
// Column pairs of a BF16-pair panel (cols / 2 rounded up); its panels are 64 bytes per pair.
int64_t bf16_pair_count(int64_t cols);

// The repacked k-quants (above): bytes of one super-block of one panel and where its parts start.
constexpr int64_t kQ4KSuperBytes = 2368, kQ5KSuperBytes = 2880, kQ6KSuperBytes = 3360;
constexpr int64_t kKScaleOffset = 64, kKMinOffset = 192, kKQuantOffset = 320;
constexpr int64_t kQ5KHighOffset = 2368;
constexpr int64_t kQ6KScaleOffset = 32, kQ6KQuantOffset = 288, kQ6KHighOffset = 2336;
// Whether type is packed per super-block (Q4_K, Q5_K, Q6_K) and read by the SIMD kernels.
bool kquant_repacked(DType t);
// Row `lane` of a panel from its file row (cols / 256 super-blocks), and back (kquant_pack.cc).
void pack_kquant_row(DType t, const uint8_t* file_row, int64_t cols, uint8_t* panel, int lane);
void unpack_kquant_row(DType t, const uint8_t* panel, int lane, int64_t cols, uint8_t* file_row);

struct GemmArgs {
  DType type;
  const uint8_t* w;     // packed weights
  int64_t panel_bytes;  // bytes per panel
  int64_t rows, cols, n;
  // Float activations [n][cols] (F32 / F16 / BF16).
  const float* x;
  // Optional packed copy of x for float types, blocks of kXBlock tokens (the last block
  // zero-padded): xp[(t / 16) * 16 * cols + c * 16 + t % 16]. Null when not packed.
  const float* xp;
  // FP8 decode (n = 1, not batch-invariant): x * 2^k (k chosen from max|x|, see matmul.cc) for
  // the kernels that read e4m3 bytes as f32 bit patterns worth value * 2^-120; their sums are
  // multiplied by x8_unscale = 2^(120 - k) (and the row scales) at the end. Null otherwise.
  const float* x8;
  float x8_unscale;
  // Quantised activations (Q8_0 / Q4_0 / Q8_C / Q4_G128): xq [n][kq] int8 (kq = cols rounded
  // up to 32, the padding quantised from zeros), xd [n][kq/32] scales, xs [n][kq/32] =
  // -offset * sum(xq of the block) (the accumulator's starting value; for Q4_G128, whose nibbles
  // need no offset, offset = -1: xs is the block's plain sum).
  const int8_t* xq;
  const float* xd;
  const int32_t* xs;
  int64_t kq;
  // Q4_G128: xm [n][cols/128] = sum over the group's 4 blocks, in order, of xd * float(xs): the
  // group's sum of quantised activations, which multiplies the minimum m. Q4_K / Q5_K:
  // xm [n][kq/32] = xd * float(plain block sum), per block.
  const float* xm;
  // Q6_K: xs16 [n][kq/16] = -32 * the sum of each 16 quantised activations (the codes' offset).
  const int32_t* xs16;
  // BF16-pair weights: the activations rounded to bf16, [n][2 * bf16_pair_count(cols)] (an odd
  // last column followed by 0).
  const uint16_t* xbf;
  bool bf16_pairs;  // the weights are packed as BF16 pairs (the F16 / BF16 type says the source)
  float* y;         // [n][rows]
  // Sum in the batched kernels' order even for n = 1 (MatmulOptions::batch_invariant).
  bool invariant;
  // The matrix is large enough (kStreamingBytes) to stream from L3 or memory rather than stay
  // in L1/L2: small batches read several panels at once, with software prefetch.
  bool streaming;
};

// Quantises one row of n (multiple of 32) floats per block of 32: d = absmax/127,
// q = round(x/d), s = -offset * sum(q).
using QuantizeRowFn = void (*)(const float* x, int64_t n, int8_t* q, float* d, int32_t* s,
                               int32_t offset);
// RMSNorm fused with QuantizeRowFn: quantises (x[i] * inv) * weight[i] (n a multiple of 32).
using NormQuantizeRowFn = void (*)(const float* x, const float* weight, float inv, int64_t n,
                                   int8_t* q, float* d, int32_t* s, int32_t offset);
// Computes the outputs of panels [p0, p1) for all n tokens.
using GemmFn = void (*)(const GemmArgs& a, int64_t p0, int64_t p1);

struct IsaMatmul {
  GemmFn gemm;
  QuantizeRowFn quantize;
  int32_t q8_offset;     // activation-sum correction for Q8_0 / Q8_C (128: weights read as w + 128)
  int64_t panel_align;   // thread ranges are cut at multiples of this many panels
  int64_t x_pack_min_n;  // float types: pack x (GemmArgs::xp) when n >= this; 0 = never
  NormQuantizeRowFn norm_quantize = nullptr;  // null where quantize is
};

constexpr int64_t kXBlock = 16;
constexpr size_t kStreamingBytes = 512 * 1024;

// The BF16-pair kernels (matmul_bf16.cc; x86-64 builds, CPUs with AVX512_BF16 only): the
// product, and x [n][cols] rounded to bf16 rows as GemmArgs::xbf holds them.
GemmFn bf16_pair_gemm();
void bf16_round_rows(const float* x, int64_t n, int64_t cols, uint16_t* out);

IsaMatmul isa_matmul_scalar();
IsaMatmul isa_matmul_avx2();
IsaMatmul isa_matmul_avx512();
IsaMatmul isa_matmul_avx512vnni();
IsaMatmul isa_matmul_neon();
IsaMatmul isa_matmul_neon_dot();

}  // namespace shrike::kernels::detail
