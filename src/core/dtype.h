// Weight and activation element types, numbered exactly as GGUF's ggml_type so a type id read
// from a file can be used directly. Block-quantised layouts follow the GGUF definitions.
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
  BF16 = 30,
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

// Name as GGUF/llama.cpp prints it ("f32", "q8_0", ...).
std::string_view dtype_name(DType t);
// Parses "f32|f16|bf16|q8_0|q4_0" (case-insensitive); nullopt when unknown.
std::optional<DType> dtype_from_name(std::string_view name);
// True when the numeric id is one of the types above.
bool dtype_is_known(uint32_t id);
// Elements per block (1 or 32).
int64_t dtype_block_elems(DType t);
// Bytes per block (4, 2, 2, 34, 18).
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
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
// Reference quantisation, as llama.cpp's reference quantisers define it (round to nearest,
// scale = absmax / 127 for Q8_0; scale = max / -8 for Q4_0).
void quantize_row(DType t, const float* src, void* dst, int64_t n);

}  // namespace shrike
