// The SIMD layout of Q4_K / Q5_K / Q6_K panels (matmul_internal.h) from ggml's file blocks and
// back. Repacking puts each 4-column group of the 16 rows side by side (one int32 lane per row,
// what vpdpbusd / SDOT consume) and unpacks the 6-bit scales of Q4_K / Q5_K to bytes, so the
// kernels never shuffle. The way back serves the portable kernel and dequantize_row: the file
// block is rebuilt byte for byte and dequantised by core/kquants.cc, ggml's own arithmetic.
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "core/kquants.h"
#include "kernels/matmul_internal.h"

namespace shrike::kernels::detail {

namespace {

constexpr uint16_t kF16Sign = 0x8000;

int64_t super_bytes(DType t) {
  switch (t) {
    case DType::Q4_K:
      return kQ4KSuperBytes;
    case DType::Q5_K:
      return kQ5KSuperBytes;
    case DType::Q6_K:
      return kQ6KSuperBytes;
    default:
      throw std::logic_error("kquant_pack: " + std::string(dtype_name(t)) + " is not repacked");
  }
}

// Q4_K / Q5_K (Block): d, -dmin, scales and minima, the nibble groups (and Q5_K's fifth bits).
template <class Block>
void pack_q45(const Block& b, uint8_t* o, int lane) {
  const uint16_t neg_dmin = b.dmin ^ kF16Sign;
  std::memcpy(o + lane * 2, &b.d, 2);
  std::memcpy(o + 32 + lane * 2, &neg_dmin, 2);
  for (int i = 0; i < 8; ++i) {
    uint8_t sc, m;
    kquant_scale_min(i, b.scales, &sc, &m);
    o[kKScaleOffset + i * kPanel + lane] = sc;
    o[kKMinOffset + i * kPanel + lane] = m;
  }
  for (int g = 0; g < 32; ++g)  // g = 8c + k: qs[32c + 4k ..] = qs[4g ..]
    std::memcpy(o + kKQuantOffset + g * 64 + lane * 4, b.qs + 4 * g, 4);
  if constexpr (std::is_same_v<Block, BlockQ5_K>)
    for (int k = 0; k < 8; ++k)
      std::memcpy(o + kQ5KHighOffset + k * 64 + lane * 4, b.qh + 4 * k, 4);
}

template <class Block>
void unpack_q45(const uint8_t* o, int lane, Block& b) {
  uint16_t neg_dmin;
  std::memcpy(&b.d, o + lane * 2, 2);
  std::memcpy(&neg_dmin, o + 32 + lane * 2, 2);
  b.dmin = neg_dmin ^ kF16Sign;
  // ggml's 12-byte packing (kquant_scale_min reads it): sub-blocks 0..3 in the low 6 bits of
  // bytes 0..3 (scales) and 4..7 (minima); 4..7 split into low nibbles in bytes 8..11 and top
  // two bits in bits 6..7 of bytes 0..7.
  uint8_t sc[8], m[8];
  for (int i = 0; i < 8; ++i) {
    sc[i] = o[kKScaleOffset + i * kPanel + lane];
    m[i] = o[kKMinOffset + i * kPanel + lane];
  }
  for (int j = 0; j < 4; ++j) {
    b.scales[j] = uint8_t((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    b.scales[j + 4] = uint8_t((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    b.scales[j + 8] = uint8_t((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
  for (int g = 0; g < 32; ++g) std::memcpy(b.qs + 4 * g, o + kKQuantOffset + g * 64 + lane * 4, 4);
  if constexpr (std::is_same_v<Block, BlockQ5_K>)
    for (int k = 0; k < 8; ++k)
      std::memcpy(b.qh + 4 * k, o + kQ5KHighOffset + k * 64 + lane * 4, 4);
}

void pack_q6(const BlockQ6_K& b, uint8_t* o, int lane) {
  std::memcpy(o + lane * 2, &b.d, 2);
  for (int j = 0; j < 16; ++j) o[kQ6KScaleOffset + j * kPanel + lane] = uint8_t(b.scales[j]);
  for (int g = 0; g < 32; ++g)  // g = 16n + k: ql[64n + 4k ..] = ql[4g ..]
    std::memcpy(o + kQ6KQuantOffset + g * 64 + lane * 4, b.ql + 4 * g, 4);
  for (int g = 0; g < 16; ++g)  // g = 8n + k: qh[32n + 4k ..] = qh[4g ..]
    std::memcpy(o + kQ6KHighOffset + g * 64 + lane * 4, b.qh + 4 * g, 4);
}

void unpack_q6(const uint8_t* o, int lane, BlockQ6_K& b) {
  std::memcpy(&b.d, o + lane * 2, 2);
  for (int j = 0; j < 16; ++j) b.scales[j] = int8_t(o[kQ6KScaleOffset + j * kPanel + lane]);
  for (int g = 0; g < 32; ++g)
    std::memcpy(b.ql + 4 * g, o + kQ6KQuantOffset + g * 64 + lane * 4, 4);
  for (int g = 0; g < 16; ++g) std::memcpy(b.qh + 4 * g, o + kQ6KHighOffset + g * 64 + lane * 4, 4);
}

}  // namespace

bool kquant_repacked(DType t) {
  return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K;
}

void pack_kquant_row(DType t, const uint8_t* file_row, int64_t cols, uint8_t* panel, int lane) {
  const int64_t sb_bytes = super_bytes(t), row_block = dtype_row_bytes(t, kSuperBlock);
  for (int64_t s = 0; s < cols / kSuperBlock; ++s) {
    const uint8_t* src = file_row + s * row_block;
    uint8_t* o = panel + s * sb_bytes;
    if (t == DType::Q6_K) {
      BlockQ6_K b;
      std::memcpy(&b, src, sizeof b);
      pack_q6(b, o, lane);
    } else if (t == DType::Q5_K) {
      BlockQ5_K b;
      std::memcpy(&b, src, sizeof b);
      pack_q45(b, o, lane);
    } else {
      BlockQ4_K b;
      std::memcpy(&b, src, sizeof b);
      pack_q45(b, o, lane);
    }
  }
}

void unpack_kquant_row(DType t, const uint8_t* panel, int lane, int64_t cols, uint8_t* file_row) {
  const int64_t sb_bytes = super_bytes(t), row_block = dtype_row_bytes(t, kSuperBlock);
  for (int64_t s = 0; s < cols / kSuperBlock; ++s) {
    const uint8_t* o = panel + s * sb_bytes;
    uint8_t* dst = file_row + s * row_block;
    if (t == DType::Q6_K) {
      BlockQ6_K b;
      unpack_q6(o, lane, b);
      std::memcpy(dst, &b, sizeof b);
    } else if (t == DType::Q5_K) {
      BlockQ5_K b;
      unpack_q45(o, lane, b);
      std::memcpy(dst, &b, sizeof b);
    } else {
      BlockQ4_K b;
      unpack_q45(o, lane, b);
      std::memcpy(dst, &b, sizeof b);
    }
  }
}

}  // namespace shrike::kernels::detail
