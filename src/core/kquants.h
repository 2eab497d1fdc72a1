// The GGUF "k-quant" and "i-quant" block layouts that downloaded models use (Q4_K_M files hold
// Q4_K and Q6_K tensors, Q5_K_M files Q5_K and Q6_K, ...): super-blocks of 256 elements whose
// sub-block scales (and minima) are themselves quantised, and IQ4_NL / IQ4_XS, 4-bit indices
// into a fixed non-uniform table. The byte layouts are ggml's (ggml-common.h); the values each
// block stands for are defined by the dequantisers below, which follow ggml's reference
// dequantisation element for element (checked against llama.cpp on the same files:
// bench/experiments/kquant_crosscheck.sh).
#pragma once

#include <cstdint>

namespace shrike {

// Elements per k-quant super-block (ggml's QK_K).
constexpr int64_t kSuperBlock = 256;

// Q2_K: 16 sub-blocks of 16; each scale byte holds a 4-bit scale (low) and a 4-bit minimum
// (high). value = d * scale * q - dmin * min, q in 0..3.  (84 bytes: 2.625 bits per weight)
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d, dmin;  // f16 bits
};
static_assert(sizeof(BlockQ2_K) == 84);

// Q3_K: 16 sub-blocks of 16 with 6-bit scales (offset 32) packed into 12 bytes; 2 low bits in
// qs and the third bit in hmask (a clear bit subtracts 4). value = d * (scale - 32) * q,
// q in -4..3.  (110 bytes: 3.4375 bits per weight)
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;  // f16 bits
};
static_assert(sizeof(BlockQ3_K) == 110);

// Q4_K: 8 sub-blocks of 32 with 6-bit scales and minima packed into 12 bytes.
// value = d * scale * q - dmin * min, q in 0..15.  (144 bytes: 4.5 bits per weight)
struct BlockQ4_K {
  uint16_t d, dmin;  // f16 bits
  uint8_t scales[12];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144);

// Q5_K: Q4_K with a fifth bit per element in qh. q in 0..31.  (176 bytes: 5.5 bits per weight)
struct BlockQ5_K {
  uint16_t d, dmin;  // f16 bits
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ5_K) == 176);

// Q6_K: 16 sub-blocks of 16 with int8 scales; 4 low bits in ql, 2 high bits in qh.
// value = d * scale * (q - 32), q in 0..63.  (210 bytes: 6.5625 bits per weight)
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;  // f16 bits
};
static_assert(sizeof(BlockQ6_K) == 210);

// IQ4_NL: 32 elements, value = d * kIq4nlValues[nibble]; low nibbles are elements 0..15, high
// nibbles 16..31 (Q4_0's order).  (18 bytes)
struct BlockIQ4_NL {
  uint16_t d;  // f16 bits
  uint8_t qs[16];
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// IQ4_XS: 8 sub-blocks of 32 with 6-bit scales (offset 32; 4 low bits in scales_l, 2 high bits
// in scales_h), values from the IQ4_NL table.  (136 bytes: 4.25 bits per weight)
struct BlockIQ4_XS {
  uint16_t d;  // f16 bits
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// The non-uniform 4-bit grid of IQ4_NL and IQ4_XS.
extern const int8_t kIq4nlValues[16];

// Q4_K / Q5_K: sub-block j's 6-bit scale and minimum from the 12 packed bytes.
void kquant_scale_min(int j, const uint8_t* scales, uint8_t* scale, uint8_t* min);

// n / 256 super-blocks (n / 32 blocks for IQ4_NL) to floats.
void dequantize_q2_k(const BlockQ2_K* b, float* y, int64_t n);
void dequantize_q3_k(const BlockQ3_K* b, float* y, int64_t n);
void dequantize_q4_k(const BlockQ4_K* b, float* y, int64_t n);
void dequantize_q5_k(const BlockQ5_K* b, float* y, int64_t n);
void dequantize_q6_k(const BlockQ6_K* b, float* y, int64_t n);
void dequantize_iq4_nl(const BlockIQ4_NL* b, float* y, int64_t n);
void dequantize_iq4_xs(const BlockIQ4_XS* b, float* y, int64_t n);

// Round-to-nearest quantisers for the types shrike writes (Q4_K, Q5_K, Q6_K). Each sub-block's
// scale (and minimum) is chosen from its range, the sub-block scales are quantised against the
// super-block's largest, and the codes are computed against the stored scales, so the rounding
// of the scales costs at most one step. (llama.cpp's own quantisers search scales iteratively;
// the layout, not the search, is what the two engines must agree on.)
void quantize_q4_k(const float* x, BlockQ4_K* b, int64_t n);
void quantize_q5_k(const float* x, BlockQ5_K* b, int64_t n);
void quantize_q6_k(const float* x, BlockQ6_K* b, int64_t n);

}  // namespace shrike
