#include "core/dtype.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/kquants.h"

namespace shrike {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
    case DType::Q8_0:
      return "q8_0";
    case DType::Q4_0:
      return "q4_0";
    case DType::Q8_C:
      return "q8_c";
    case DType::Q4_G128:
      return "q4_g128";
    case DType::FP8_E4M3:
      return "fp8";
    case DType::Q2_K:
      return "q2_K";
    case DType::Q3_K:
      return "q3_K";
    case DType::Q4_K:
      return "q4_K";
    case DType::Q5_K:
      return "q5_K";
    case DType::Q6_K:
      return "q6_K";
    case DType::IQ4_NL:
      return "iq4_nl";
    case DType::IQ4_XS:
      return "iq4_xs";
  }
  return "unknown";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  std::string s(name);
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (s == "fp8_e4m3") return DType::FP8_E4M3;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q8_C,
                  DType::Q4_G128, DType::FP8_E4M3, DType::Q2_K, DType::Q3_K, DType::Q4_K,
                  DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS}) {
    std::string n(dtype_name(t));
    for (char& c : n) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (n == s) return t;
  }
  return std::nullopt;
}

bool dtype_is_known(uint32_t id) {
  switch (id) {
    case 0:
    case 1:
    case 2:
    case 8:
    case 10:
    case 11:
    case 12:
    case 13:
    case 14:
    case 20:
    case 23:
    case 30:
    case 1024:
    case 1025:
    case 1026:
      return true;
    default:
      return false;
  }
}

bool dtype_is_kquant(DType t) {
  switch (t) {
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

bool dtype_is_writable(DType t) {
  return t != DType::Q2_K && t != DType::Q3_K && t != DType::IQ4_NL && t != DType::IQ4_XS;
}

bool dtype_has_row_scale(DType t) {
  return t == DType::Q8_C || t == DType::FP8_E4M3;
}

int64_t dtype_block_elems(DType t) {
  if (t == DType::Q4_G128) return kQ4G128Block;
  if (t == DType::IQ4_NL) return 32;
  if (dtype_is_kquant(t)) return kSuperBlock;
  return (t == DType::Q8_0 || t == DType::Q4_0) ? kQuantBlock : 1;
}

int64_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::F32:
      return 4;
    case DType::F16:
    case DType::BF16:
      return 2;
    case DType::Q8_0:
      return sizeof(BlockQ8_0);
    case DType::Q4_0:
      return sizeof(BlockQ4_0);
    case DType::Q8_C:
    case DType::FP8_E4M3:
      return 1;
    case DType::Q4_G128:
      return sizeof(BlockQ4_G128);
    case DType::Q2_K:
      return sizeof(BlockQ2_K);
    case DType::Q3_K:
      return sizeof(BlockQ3_K);
    case DType::Q4_K:
      return sizeof(BlockQ4_K);
    case DType::Q5_K:
      return sizeof(BlockQ5_K);
    case DType::Q6_K:
      return sizeof(BlockQ6_K);
    case DType::IQ4_NL:
      return sizeof(BlockIQ4_NL);
    case DType::IQ4_XS:
      return sizeof(BlockIQ4_XS);
  }
  return 0;
}

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        mant <<= 1;
        ++e;
      } while ((mant & 0x400) == 0);
      mant &= 0x3ff;
      bits = sign | uint32_t(127 - 15 - e) << 23 | mant << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t fp32_to_fp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000);
  const uint32_t absx = x & 0x7fffffff;
  if (absx > 0x7f800000) return sign | 0x7e00;   // NaN
  if (absx >= 0x477ff000) return sign | 0x7c00;  // overflow (>= 65520 rounds to inf)
  if (absx < 0x38800000) {                       // result is subnormal or zero
    // value = absx as float; subnormal unit is 2^-24
    float a;
    std::memcpy(&a, &absx, 4);
    const float scaled = a * 16777216.0f;            // exact: multiply by 2^24
    return sign | uint16_t(std::nearbyint(scaled));  // default rounding mode: nearest-even
  }
  // normal: rebias exponent, round mantissa from 23 to 10 bits, nearest-even
  uint32_t m = absx - (uint32_t(127 - 15) << 23);
  m += 0xfff + ((m >> 13) & 1);
  return sign | uint16_t(m >> 13);
}

uint16_t fp32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return uint16_t((u >> 16) | 64);  // quiet NaN
  u += 0x7fff + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}

float fp8_e4m3_to_fp32(uint8_t v) {
  const int e = (v >> 3) & 15, m = v & 7;
  if (e == 15 && m == 7) return std::numeric_limits<float>::quiet_NaN();
  const float a = e == 0 ? std::ldexp(float(m), -9) : std::ldexp(float(8 + m), e - 10);
  return (v & 0x80) ? -a : a;
}

uint8_t fp32_to_fp8_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::fabs(f);
  if (a >= 448.0f) return sign | 0x7e;  // saturate: e4m3fn has no infinity
  int code;
  if (a < 0.015625f) {  // below the smallest normal 2^-6: steps of 2^-9 (8 steps reach 2^-6)
    code = int(std::nearbyint(a * 512.0f));
  } else {
    int e;
    std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1): the leading bit is 2^(e-1)
    const int q = int(std::nearbyint(std::ldexp(a, 4 - e)));  // 8..16 steps of 2^(e-4)
    code = ((e - 1 + 7) << 3) + (q - 8);                      // q = 16 carries into the exponent
  }
  return sign | uint8_t(std::min(code, 0x7e));
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n, float row_scale) {
  switch (t) {
    case DType::Q2_K:
      return dequantize_q2_k(static_cast<const BlockQ2_K*>(src), dst, n);
    case DType::Q3_K:
      return dequantize_q3_k(static_cast<const BlockQ3_K*>(src), dst, n);
    case DType::Q4_K:
      return dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, n);
    case DType::Q5_K:
      return dequantize_q5_k(static_cast<const BlockQ5_K*>(src), dst, n);
    case DType::Q6_K:
      return dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, n);
    case DType::IQ4_NL:
      return dequantize_iq4_nl(static_cast<const BlockIQ4_NL*>(src), dst, n);
    case DType::IQ4_XS:
      return dequantize_iq4_xs(static_cast<const BlockIQ4_XS*>(src), dst, n);
    case DType::F32:
      std::memcpy(dst, src, size_t(n) * 4);
      return;
    case DType::F16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
      return;
    }
    case DType::BF16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
      return;
    }
    case DType::Q8_0: {
      auto* b = static_cast<const BlockQ8_0*>(src);
      for (int64_t i = 0; i < n / kQuantBlock; ++i) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < kQuantBlock; ++j) dst[i * kQuantBlock + j] = float(b[i].qs[j]) * d;
      }
      return;
    }
    case DType::Q4_0: {
      auto* b = static_cast<const BlockQ4_0*>(src);
      for (int64_t i = 0; i < n / kQuantBlock; ++i) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < kQuantBlock / 2; ++j) {
          dst[i * kQuantBlock + j] = float((b[i].qs[j] & 0x0f) - 8) * d;
          dst[i * kQuantBlock + j + 16] = float((b[i].qs[j] >> 4) - 8) * d;
        }
      }
      return;
    }
    case DType::Q8_C: {
      auto* q = static_cast<const int8_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = float(q[i]) * row_scale;
      return;
    }
    case DType::FP8_E4M3: {
      auto* q = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp8_e4m3_to_fp32(q[i]) * row_scale;
      return;
    }
    case DType::Q4_G128: {
      auto* b = static_cast<const BlockQ4_G128*>(src);
      constexpr int64_t G = kQ4G128Block;
      for (int64_t i = 0; i < n / G; ++i) {
        const float d = fp16_to_fp32(b[i].d), m = fp16_to_fp32(b[i].m);
        for (int j = 0; j < G / 2; ++j) {
          dst[i * G + j] = float(b[i].qs[j] & 0x0f) * d + m;
          dst[i * G + j + G / 2] = float(b[i].qs[j] >> 4) * d + m;
        }
      }
      return;
    }
  }
}

void quantize_row(DType t, const float* src, void* dst, int64_t n, float* row_scale) {
  switch (t) {
    case DType::Q4_K:
      return quantize_q4_k(src, static_cast<BlockQ4_K*>(dst), n);
    case DType::Q5_K:
      return quantize_q5_k(src, static_cast<BlockQ5_K*>(dst), n);
    case DType::Q6_K:
      return quantize_q6_k(src, static_cast<BlockQ6_K*>(dst), n);
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
      throw std::invalid_argument("quantize_row: shrike reads " + std::string(dtype_name(t)) +
                                  " but does not write it");
    case DType::F32:
      std::memcpy(dst, src, size_t(n) * 4);
      return;
    case DType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
      return;
    }
    case DType::BF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
      return;
    }
    case DType::Q8_0: {
      auto* b = static_cast<BlockQ8_0*>(dst);
      for (int64_t i = 0; i < n / kQuantBlock; ++i) {
        const float* x = src + i * kQuantBlock;
        float amax = 0;
        for (int j = 0; j < kQuantBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = fp32_to_fp16(d);
        for (int j = 0; j < kQuantBlock; ++j) b[i].qs[j] = int8_t(std::lround(x[j] * id));
      }
      return;
    }
    case DType::Q4_0: {
      auto* b = static_cast<BlockQ4_0*>(dst);
      for (int64_t i = 0; i < n / kQuantBlock; ++i) {
        const float* x = src + i * kQuantBlock;
        float amax = 0, max = 0;  // the signed value with the largest magnitude
        for (int j = 0; j < kQuantBlock; ++j) {
          if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
          }
        }
        const float d = max / -8.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = fp32_to_fp16(d);
        for (int j = 0; j < kQuantBlock / 2; ++j) {
          const int q0 = std::min(15, int(x[j] * id + 8.5f));
          const int q1 = std::min(15, int(x[j + 16] * id + 8.5f));
          b[i].qs[j] = uint8_t(q0 | (q1 << 4));
        }
      }
      return;
    }
    case DType::Q8_C: {
      if (!row_scale) throw std::invalid_argument("quantize_row: q8_c needs a row_scale output");
      float amax = 0;
      for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(src[i]));
      const float d = amax / 127.0f;
      const float id = d != 0 ? 1.0f / d : 0.0f;
      auto* q = static_cast<int8_t*>(dst);
      for (int64_t i = 0; i < n; ++i)
        q[i] = int8_t(std::clamp<long>(std::lround(src[i] * id), -127, 127));
      *row_scale = d;
      return;
    }
    case DType::FP8_E4M3: {
      if (!row_scale) throw std::invalid_argument("quantize_row: fp8 needs a row_scale output");
      float amax = 0;
      for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(src[i]));
      const float d = amax / 448.0f;
      const float id = d != 0 ? 1.0f / d : 0.0f;
      auto* q = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) q[i] = fp32_to_fp8_e4m3(src[i] * id);
      *row_scale = d;
      return;
    }
    case DType::Q4_G128: {
      // The codes are computed against the stored (f16-rounded) scale and minimum, so the
      // rounding of d and m costs no extra error beyond one step.
      auto* b = static_cast<BlockQ4_G128*>(dst);
      constexpr int64_t G = kQ4G128Block;
      for (int64_t i = 0; i < n / G; ++i) {
        const float* x = src + i * G;
        float lo = x[0], hi = x[0];
        for (int j = 1; j < G; ++j) {
          lo = std::min(lo, x[j]);
          hi = std::max(hi, x[j]);
        }
        b[i].d = fp32_to_fp16((hi - lo) / 15.0f);
        b[i].m = fp32_to_fp16(lo);
        const float d = fp16_to_fp32(b[i].d), m = fp16_to_fp32(b[i].m);
        const float id = d != 0 ? 1.0f / d : 0.0f;
        auto code = [&](float v) {
          return int(std::clamp(std::nearbyint((v - m) * id), 0.0f, 15.0f));
        };
        for (int j = 0; j < G / 2; ++j)
          b[i].qs[j] = uint8_t(code(x[j]) | (code(x[j + G / 2]) << 4));
      }
      return;
    }
  }
}

}  // namespace shrike
