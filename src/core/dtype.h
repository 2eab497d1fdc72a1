// Weight and activation element types, numbered exactly as GGUF's ggml_type so a type id read
// from a file can be used directly. Block-quantised layouts follow the GGUF definitions.
// shrike's own types (ids 1024 and up, far from ggml's) are described in docs/formats.md;
// llama.cpp refuses a file holding them, with an unknown-type error, rather than misreading it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace shrike {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q8_0 = 8,
  // k-quants and i-quants, read from downloaded GGUFs (core/kquants.h); the reference
  // quantisers here write Q4_K, Q5_K and Q6_K (synth uses them), `shrike quantize` not yet.
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  IQ4_NL = 20,
  IQ4_XS = 23,
  BF16 = 30,
  // shrike types (docs/formats.md):
  Q8_C = 1024,      // int8 per element; one f32 scale per row in the tensor NAME.scale
  Q4_G128 = 1025,   // asymmetric 4-bit in groups of 128: f16 scale, f16 minimum, 64 bytes
  FP8_E4M3 = 1026,  // OCP FP8 e4m3 per element; one f32 scale per row in NAME.scale
};

// Elements per quantisation block: 1 for plain float types, 32 for Q8_0 / Q4_0.
constexpr int64_t kQuantBlock = 32;

// Q8_0: 32 signed 8-bit values sharing one f16 scale. value[i] = d * qs[i].  (34 bytes)
struct BlockQ8_0 {
  uint16_t d;  // f16 bits
  int8_t qs[kQuantBlock];
};
static_assert(sizeof(BlockQ8_0) == 34);

// Q4_0: 32 unsigned 4-bit values with an f16 scale and an implicit offset of 8.
// qs[j] holds element j in its low nibble and element j+16 in its high nibble.
// value[i] = d * (nibble(i) - 8).  (18 bytes)
struct BlockQ4_0 {
  uint16_t d;  // f16 bits
  uint8_t qs[kQuantBlock / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// Q4_G128: 128 unsigned 4-bit values with an f16 scale and an f16 minimum (the group's min).
// qs[j] holds element j in its low nibble and element j+64 in its high nibble.
// value[i] = d * nibble(i) + m.  (68 bytes: 4.25 bits per weight)
constexpr int64_t kQ4G128Block = 128;
struct BlockQ4_G128 {
  uint16_t d;  // f16 bits
  uint16_t m;  // f16 bits
  uint8_t qs[kQ4G128Block / 2];
};
static_assert(sizeof(BlockQ4_G128) == 68);

// Types whose rows carry one f32 scale kept outside the row (Q8_C, FP8_E4M3): the file stores
// the elements as tensor NAME and the scales as tensor NAME.scale (f32, one per row).
bool dtype_has_row_scale(DType t);

// OCP FP8 e4m3 ("e4m3fn"): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, 0x7f /
// 0xff are NaN; largest finite value 448. Encoding rounds to nearest even and saturates to
// +-448 (a NaN stays NaN).
float fp8_e4m3_to_fp32(uint8_t v);
uint8_t fp32_to_fp8_e4m3(float f);

// Name as GGUF/llama.cpp prints it ("f32", "q8_0", "q4_K", ...).
std::string_view dtype_name(DType t);
// Parses a name dtype_name gives (case-insensitive; "fp8_e4m3" too); nullopt when unknown.
std::optional<DType> dtype_from_name(std::string_view name);
// Whether shrike's quantisers write the type (all but Q2_K, Q3_K, IQ4_NL and IQ4_XS, which are
// read only).
bool dtype_is_writable(DType t);
// The k-quant and i-quant types (core/kquants.h).
bool dtype_is_kquant(DType t);
// True when the numeric id is one of the types above.
bool dtype_is_known(uint32_t id);
// Elements per block (1, 32, 128 or 256).
int64_t dtype_block_elems(DType t);
// Bytes per block (4, 2, 2, 34, 18; 1, 68, 1; the k-quants' sizeof). Row-scale types exclude
// their scales.
int64_t dtype_block_bytes(DType t);
// Bytes for a row of n elements; n must be a multiple of the block size.
inline int64_t dtype_row_bytes(DType t, int64_t n) {
  return n / dtype_block_elems(t) * dtype_block_bytes(t);
}

// IEEE half <-> float, round-to-nearest-even, exact for every value (subnormals, inf, NaN).
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
// bfloat16: the top 16 bits of a float; conversion rounds to nearest even and keeps NaN a NaN.
inline float bf16_to_fp32(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t fp32_to_bf16(float f);

// Reference dequantisation of n elements (n a multiple of the block size for Q types).
// row_scale: the row's scale for row-scale types (ignored by the others).
void dequantize_row(DType t, const void* src, float* dst, int64_t n, float row_scale = 1.0f);
// Reference quantisation, as llama.cpp's reference quantisers define it (round to nearest,
// scale = absmax / 127 for Q8_0; scale = max / -8 for Q4_0). shrike types: Q8_C scale =
// absmax / 127 per row; FP8_E4M3 scale = absmax / 448 per row; Q4_G128 d = (max - min) / 15,
// m = min per group of 128, q = round((x - m) / d) clamped to 0..15. Q4_K / Q5_K / Q6_K: see
// core/kquants.h. std::invalid_argument for a type shrike does not write (dtype_is_writable).
// row_scale receives the row's scale for row-scale types (required for them, else unused).
void quantize_row(DType t, const float* src, void* dst, int64_t n, float* row_scale = nullptr);

}  // namespace shrike
