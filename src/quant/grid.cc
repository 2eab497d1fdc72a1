#include "quant/grid.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/kquants.h"

namespace shrike::quant {

bool type_fits(DType type, int64_t cols) {
  return cols > 0 && cols % dtype_block_elems(type) == 0;
}

RowQuantizer::RowQuantizer(DType type, int64_t cols) : type_(type), cols_(cols) {
  if (!type_fits(type, cols))
    throw std::invalid_argument("quantize: rows of " + std::to_string(cols) +
                                " values cannot be stored as " + std::string(dtype_name(type)));
  switch (type) {
    case DType::Q8_0:
    case DType::Q4_0:
      group_ = kQuantBlock;
      break;
    case DType::Q4_G128:
      group_ = kQ4G128Block;
      break;
    case DType::Q8_C:
    case DType::FP8_E4M3:
      group_ = cols;
      break;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      group_ = kSuperBlock;
      kblocks_.assign(size_t(dtype_row_bytes(type, cols)), 0);
      col_step_.assign(size_t(cols), 0.0f);
      col_offset_.assign(size_t(cols), 0.0f);
      break;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
      throw std::invalid_argument("quantize: shrike does not write " +
                                  std::string(dtype_name(type)) + " (it reads it)");
    default:
      group_ = 1;
      break;
  }
  const size_t groups = size_t(cols / group_);
  scale_.assign(groups, 1.0f);
  minimum_.assign(groups, 0.0f);
  inv_scale_.assign(groups, 1.0f);
  scale_f16_.assign(groups, 0);
  minimum_f16_.assign(groups, 0);
  codes_.assign(size_t(cols), 0);
}

void RowQuantizer::set_group_params(int64_t c0, const float* x) {
  const size_t g = size_t(c0 / group_);
  auto absmax = [&] {
    float a = 0;
    for (int64_t j = 0; j < group_; ++j) a = std::max(a, std::fabs(x[j]));
    return a;
  };
  switch (type_) {
    case DType::Q8_0:
    case DType::Q8_C:
    case DType::FP8_E4M3: {
      const float d = absmax() / (type_ == DType::FP8_E4M3 ? 448.0f : 127.0f);
      inv_scale_[g] = d != 0 ? 1.0f / d : 0.0f;
      if (type_ == DType::Q8_0) {  // the file holds the scale as f16
        scale_f16_[g] = fp32_to_fp16(d);
        scale_[g] = fp16_to_fp32(scale_f16_[g]);
      } else {
        scale_[g] = d;
      }
      return;
    }
    case DType::Q4_0: {
      float amax = 0, max = 0;  // the signed value of largest magnitude, as the reference
      for (int64_t j = 0; j < group_; ++j)
        if (std::fabs(x[j]) > amax) {
          amax = std::fabs(x[j]);
          max = x[j];
        }
      const float d = max / -8.0f;
      inv_scale_[g] = d != 0 ? 1.0f / d : 0.0f;
      scale_f16_[g] = fp32_to_fp16(d);
      scale_[g] = fp16_to_fp32(scale_f16_[g]);
      return;
    }
    case DType::Q4_G128: {
      float lo = x[0], hi = x[0];
      for (int64_t j = 1; j < group_; ++j) {
        lo = std::min(lo, x[j]);
        hi = std::max(hi, x[j]);
      }
      scale_f16_[g] = fp32_to_fp16((hi - lo) / 15.0f);
      minimum_f16_[g] = fp32_to_fp16(lo);
      scale_[g] = fp16_to_fp32(scale_f16_[g]);
      minimum_[g] = fp16_to_fp32(minimum_f16_[g]);
      inv_scale_[g] = scale_[g] != 0 ? 1.0f / scale_[g] : 0.0f;
      return;
    }
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: {
      // The reference quantiser chooses the super-block's scales (and writes codes that write()
      // replaces); each column's step and offset are what its dequantiser computes.
      const int64_t bytes = dtype_row_bytes(type_, kSuperBlock);
      uint8_t* block = kblocks_.data() + g * size_t(bytes);
      quantize_row(type_, x, block, kSuperBlock, nullptr);
      float* step = col_step_.data() + c0;
      float* offset = col_offset_.data() + c0;
      if (type_ == DType::Q6_K) {
        BlockQ6_K b;
        std::memcpy(&b, block, sizeof b);
        const float d = fp16_to_fp32(b.d);
        for (int e = 0; e < 256; ++e) {
          step[e] = d * float(b.scales[e / 16]);
          offset[e] = 0.0f;
        }
      } else {  // Q4_K and Q5_K share the head: d, dmin, 12 bytes of scales and minima
        BlockQ4_K head{};
        std::memcpy(&head, block, 16);
        const float d = fp16_to_fp32(head.d), dmin = fp16_to_fp32(head.dmin);
        for (int j = 0; j < 8; ++j) {
          uint8_t sc, m;
          kquant_scale_min(j, head.scales, &sc, &m);
          for (int l = 0; l < 32; ++l) {
            step[32 * j + l] = d * float(sc);
            offset[32 * j + l] = dmin * float(m);
          }
        }
      }
      return;
    }
    default:
      return;  // float types have no parameters
  }
}

float RowQuantizer::quantize(int64_t c, float v) {
  const size_t g = size_t(c / group_);
  int32_t& q = codes_[size_t(c)];
  switch (type_) {
    case DType::Q8_0:
    case DType::Q8_C:
      q = int32_t(std::clamp<long>(std::lround(v * inv_scale_[g]), -127, 127));
      return float(q) * scale_[g];
    case DType::Q4_0:
      q = std::clamp(int(v * inv_scale_[g] + 8.5f), 0, 15);
      return float(q - 8) * scale_[g];
    case DType::Q4_G128:
      q = int32_t(std::clamp(std::nearbyint((v - minimum_[g]) * inv_scale_[g]), 0.0f, 15.0f));
      return float(q) * scale_[g] + minimum_[g];
    case DType::FP8_E4M3:
      q = fp32_to_fp8_e4m3(v * inv_scale_[g]);
      return fp8_e4m3_to_fp32(uint8_t(q)) * scale_[g];
    case DType::Q4_K:
    case DType::Q5_K: {  // as core/kquants.cc rounds against the stored scales
      const float es = col_step_[size_t(c)], em = col_offset_[size_t(c)];
      const int levels = type_ == DType::Q4_K ? 15 : 31;
      q = es > 0 ? std::clamp(int(std::nearbyint((v + em) / es)), 0, levels) : 0;
      return es * float(q) - em;
    }
    case DType::Q6_K: {
      const float es = col_step_[size_t(c)];
      q = (es != 0 ? std::clamp(int(std::nearbyint(v / es)), -32, 31) : 0) + 32;
      return es * float(q - 32);
    }
    case DType::F16:
      q = fp32_to_fp16(v);
      return fp16_to_fp32(uint16_t(q));
    case DType::BF16:
      q = fp32_to_bf16(v);
      return bf16_to_fp32(uint16_t(q));
    default: {
      std::memcpy(&q, &v, 4);
      return v;
    }
  }
}

void RowQuantizer::write(void* dst, float* row_scale) const {
  auto* out = static_cast<uint8_t*>(dst);
  switch (type_) {
    case DType::Q8_0: {
      auto* b = static_cast<BlockQ8_0*>(dst);
      for (int64_t i = 0; i < cols_ / kQuantBlock; ++i) {
        b[i].d = scale_f16_[size_t(i)];
        for (int j = 0; j < kQuantBlock; ++j)
          b[i].qs[j] = int8_t(codes_[size_t(i * kQuantBlock + j)]);
      }
      return;
    }
    case DType::Q4_0: {
      auto* b = static_cast<BlockQ4_0*>(dst);
      for (int64_t i = 0; i < cols_ / kQuantBlock; ++i) {
        b[i].d = scale_f16_[size_t(i)];
        const int32_t* q = codes_.data() + i * kQuantBlock;
        for (int j = 0; j < kQuantBlock / 2; ++j) b[i].qs[j] = uint8_t(q[j] | (q[j + 16] << 4));
      }
      return;
    }
    case DType::Q4_G128: {
      auto* b = static_cast<BlockQ4_G128*>(dst);
      constexpr int64_t G = kQ4G128Block;
      for (int64_t i = 0; i < cols_ / G; ++i) {
        b[i].d = scale_f16_[size_t(i)];
        b[i].m = minimum_f16_[size_t(i)];
        const int32_t* q = codes_.data() + i * G;
        for (int j = 0; j < G / 2; ++j) b[i].qs[j] = uint8_t(q[j] | (q[j + G / 2] << 4));
      }
      return;
    }
    case DType::Q8_C:
    case DType::FP8_E4M3:
      for (int64_t c = 0; c < cols_; ++c) out[c] = uint8_t(codes_[size_t(c)]);
      if (row_scale) *row_scale = scale_[0];
      return;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      write_kquant_codes(out);
      return;
    case DType::F16:
    case DType::BF16:
      for (int64_t c = 0; c < cols_; ++c) {
        const auto h = uint16_t(codes_[size_t(c)]);
        std::memcpy(out + 2 * c, &h, 2);
      }
      return;
    default:
      std::memcpy(out, codes_.data(), size_t(cols_) * 4);
      return;
  }
}

// The super-blocks' scales as set_group_params kept them, with the codes packed as
// core/kquants.cc packs them.
void RowQuantizer::write_kquant_codes(uint8_t* out) const {
  const int64_t bytes = dtype_row_bytes(type_, kSuperBlock);
  for (int64_t s = 0; s < cols_ / kSuperBlock; ++s) {
    const int32_t* q = codes_.data() + s * kSuperBlock;
    const uint8_t* kept = kblocks_.data() + s * bytes;
    uint8_t* dst = out + s * bytes;
    if (type_ == DType::Q4_K) {
      BlockQ4_K b;
      std::memcpy(&b, kept, sizeof b);
      for (int j = 0; j < 4; ++j)
        for (int l = 0; l < 32; ++l)
          b.qs[32 * j + l] = uint8_t(q[64 * j + l] | (q[64 * j + 32 + l] << 4));
      std::memcpy(dst, &b, sizeof b);
    } else if (type_ == DType::Q5_K) {
      BlockQ5_K b;
      std::memcpy(&b, kept, sizeof b);
      std::memset(b.qh, 0, sizeof b.qh);
      for (int j = 0; j < 4; ++j)
        for (int l = 0; l < 32; ++l) {
          const int32_t a = q[64 * j + l], c = q[64 * j + 32 + l];
          b.qs[32 * j + l] = uint8_t((a & 0xf) | ((c & 0xf) << 4));
          b.qh[l] |= uint8_t(((a >> 4) << (2 * j)) | ((c >> 4) << (2 * j + 1)));
        }
      std::memcpy(dst, &b, sizeof b);
    } else {
      BlockQ6_K b;
      std::memcpy(&b, kept, sizeof b);
      std::memset(b.ql, 0, sizeof b.ql);
      std::memset(b.qh, 0, sizeof b.qh);
      for (int e = 0; e < 256; ++e) {
        const int32_t v = q[e];
        const int half = e / 128, r = e % 128, l = r % 32, quarter = r / 32;
        b.ql[64 * half + l + 32 * (quarter & 1)] |= uint8_t((v & 0xf) << (quarter < 2 ? 0 : 4));
        b.qh[32 * half + l] |= uint8_t((v >> 4) << (2 * quarter));
      }
      std::memcpy(dst, &b, sizeof b);
    }
  }
}

void RowQuantizer::round_to_nearest(const float* row, float* dequantized) {
  for (int64_t c0 = 0; c0 < cols_; c0 += group_) set_group_params(c0, row + c0);
  for (int64_t c = 0; c < cols_; ++c) {
    const float v = quantize(c, row[c]);
    if (dequantized) dequantized[c] = v;
  }
}

}  // namespace shrike::quant
