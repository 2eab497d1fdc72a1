// Number formats: f16/bf16 conversions, Q8_0 / Q4_0 exactly as GGUF defines them, and shrike's
// own types (docs/formats.md): FP8 e4m3, Q8_C, Q4_G128.
#include "core/dtype.h"

#include <gtest/gtest.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cmath>
#include <cstring>
#include <random>

#include "core/cpu_features.h"

namespace shrike {
namespace {

// The hardware's own conversions to compare with: F16C on x86-64 (with AVX2), FCVT on aarch64
// (every armv8-a core has it; GCC's __fp16 compiles to it).
#if defined(__x86_64__)
bool have_hw_half() {
  return cpu_features().avx2;
}
__attribute__((target("f16c"))) float hw_half_to_float(uint16_t h) {
  return _cvtsh_ss(h);
}
__attribute__((target("f16c"))) uint16_t hw_float_to_half(float f) {
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
#elif defined(__aarch64__)
bool have_hw_half() {
  return true;
}
float hw_half_to_float(uint16_t h) {
  __fp16 x;
  std::memcpy(&x, &h, 2);
  return float(x);
}
uint16_t hw_float_to_half(float f) {
  const __fp16 x = __fp16(f);
  uint16_t h;
  std::memcpy(&h, &x, 2);
  return h;
}
#else
bool have_hw_half() {
  return false;
}
float hw_half_to_float(uint16_t) {
  return 0.0f;
}
uint16_t hw_float_to_half(float) {
  return 0;
}
#endif

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(Fp16, EveryHalfConvertsExactlyAsTheHardwareDoes) {
  if (!have_hw_half()) GTEST_SKIP() << "SKIPPED: no hardware half conversion to compare with";
  for (uint32_t h = 0; h < 65536; ++h) {
    const float mine = fp16_to_fp32(uint16_t(h)), hw = hw_half_to_float(uint16_t(h));
    if (std::isnan(hw)) {
      EXPECT_TRUE(std::isnan(mine)) << h;
      continue;
    }
    ASSERT_EQ(bits(mine), bits(hw)) << "half 0x" << std::hex << h;
    ASSERT_EQ(fp32_to_fp16(mine), uint16_t(h)) << "round trip of half 0x" << std::hex << h;
  }
}

TEST(Fp16, FloatToHalfRoundsToNearestEvenLikeTheHardware) {
  if (!have_hw_half()) GTEST_SKIP() << "SKIPPED: no hardware half conversion to compare with";
  std::mt19937 rng(1);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), hw_float_to_half(f)) << "float bits 0x" << std::hex << u;
  }
  // Ties: 1 + 2^-11 lies halfway between 1 and the next half; even wins (down to 1.0).
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // rounds up to even
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);  // first value that rounds to infinity
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7BFF);
}

TEST(Bf16, RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(bf16_to_fp32(0x3F80), 1.0f);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even (1.0).
  EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(fp32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::nanf("")))));
}

// Hand-made blocks; every expected value worked out from the GGUF definition by hand.
TEST(Q8_0, DequantisesExactlyAsDefined) {
  BlockQ8_0 b[2];
  b[0].d = 0x3C00;  // 1.0
  b[1].d = 0x3555;  // 1365/4096 = 0.333251953125
  for (int j = 0; j < 32; ++j) {
    b[0].qs[j] = int8_t(j - 16);
    b[1].qs[j] = int8_t(j % 2 ? 127 : -128);
  }
  b[1].qs[0] = 3;
  float out[64];
  dequantize_row(DType::Q8_0, b, out, 64);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], float(j - 16)) << j;
  EXPECT_EQ(out[32], 4095.0f / 4096.0f);
  EXPECT_EQ(out[33], 127.0f * 1365.0f / 4096.0f);
  EXPECT_EQ(out[34], -128.0f * 1365.0f / 4096.0f);
}

TEST(Q4_0, DequantisesExactlyAsDefined) {
  BlockQ4_0 b;
  b.d = 0x4000;                                                         // 2.0
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((15 - j) << 4));  // low: j, high: 15-j
  float out[32];
  dequantize_row(DType::Q4_0, &b, out, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 2.0f * float(j - 8)) << "element " << j << " is the low nibble of byte " << j;
    EXPECT_EQ(out[j + 16], 2.0f * float(7 - j)) << "element " << j + 16 << " is the high nibble";
  }
}

TEST(Q8_0, QuantiseMatchesTheReferenceDefinition) {
  // absmax 127 -> d = 1 exactly; values round half away from zero.
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = float(j) - 15.5f;
  x[31] = 127.0f;
  BlockQ8_0 b;
  quantize_row(DType::Q8_0, x, &b, 32);
  EXPECT_EQ(b.d, 0x3C00);
  EXPECT_EQ(b.qs[0], -16);  // -15.5 rounds away from zero
  EXPECT_EQ(b.qs[15], -1);  // -0.5 -> -1
  EXPECT_EQ(b.qs[16], 1);   // 0.5 -> 1
  EXPECT_EQ(b.qs[31], 127);
}

TEST(Q4_0, QuantiseMatchesTheReferenceDefinition) {
  // The signed value of largest magnitude (-16) maps to nibble 0: d = -16 / -8 = 2.
  float x[32] = {};
  x[0] = -16.0f;
  x[1] = 14.0f;   // 14/2 + 8.5 = 15.5 -> 15
  x[2] = 3.0f;    // 1.5 + 8.5 = 10
  x[17] = -1.0f;  // -0.5 + 8.5 = 8
  BlockQ4_0 b;
  quantize_row(DType::Q4_0, x, &b, 32);
  EXPECT_EQ(b.d, 0x4000);
  EXPECT_EQ(b.qs[0] & 15, 0);
  EXPECT_EQ(b.qs[1] & 15, 15);
  EXPECT_EQ(b.qs[2] & 15, 10);
  EXPECT_EQ(b.qs[1] >> 4, 8);
  EXPECT_EQ(b.qs[3] & 15, 8);  // zero -> 8
}

TEST(DType, NamesSizesAndIds) {
  EXPECT_EQ(dtype_from_name("Q8_0"), DType::Q8_0);
  EXPECT_FALSE(dtype_from_name("q7_k").has_value());
  EXPECT_EQ(dtype_from_name("q5_k"), DType::Q5_K);  // llama.cpp prints q5_K
  EXPECT_EQ(dtype_row_bytes(DType::Q4_0, 64), 36);
  EXPECT_EQ(dtype_row_bytes(DType::Q8_0, 64), 68);
  EXPECT_EQ(dtype_row_bytes(DType::BF16, 3), 6);
  EXPECT_TRUE(dtype_is_known(30));
  EXPECT_FALSE(dtype_is_known(3));  // Q4_1 exists in GGUF but is not supported here
  EXPECT_EQ(dtype_from_name("fp8"), DType::FP8_E4M3);
  EXPECT_EQ(dtype_from_name("FP8_E4M3"), DType::FP8_E4M3);
  EXPECT_EQ(dtype_from_name("q4_g128"), DType::Q4_G128);
  EXPECT_EQ(dtype_from_name("q8_c"), DType::Q8_C);
  EXPECT_EQ(dtype_row_bytes(DType::Q4_G128, 256), 136);
  EXPECT_EQ(dtype_row_bytes(DType::Q8_C, 172), 172);  // scales live in NAME.scale
  EXPECT_TRUE(dtype_is_known(1024) && dtype_is_known(1025) && dtype_is_known(1026));
  EXPECT_TRUE(dtype_has_row_scale(DType::Q8_C) && dtype_has_row_scale(DType::FP8_E4M3));
  EXPECT_FALSE(dtype_has_row_scale(DType::Q8_0) || dtype_has_row_scale(DType::Q4_G128));
}

// e4m3fn by its definition: sign, 4 exponent bits with bias 7, 3 mantissa bits, subnormals at
// exponent 0, only S.1111.111 is NaN (no infinities).
double fp8_by_definition(uint8_t v) {
  const int s = v >> 7, e = (v >> 3) & 15, m = v & 7;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

TEST(Fp8E4M3, EveryCodeDecodesAsDefinedAndRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    const auto v = uint8_t(c);
    if ((v & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(fp8_e4m3_to_fp32(v)));
      continue;
    }
    EXPECT_EQ(double(fp8_e4m3_to_fp32(v)), fp8_by_definition(v)) << c;
    EXPECT_EQ(fp32_to_fp8_e4m3(fp8_e4m3_to_fp32(v)), v) << c;
  }
  EXPECT_EQ(fp8_e4m3_to_fp32(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_fp32(0x01), std::ldexp(1.0f, -9));
}

TEST(Fp8E4M3, EncodingRoundsToNearestEvenAndSaturates) {
  // Brute force: the nearest code (ties to the even mantissa), for values across the range.
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> expo(-12.0f, 9.5f);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::ldexp(1.0f, 0) * std::pow(2.0f, expo(rng)) * (i % 2 ? -1.0f : 1.0f);
    const uint8_t got = fp32_to_fp8_e4m3(x);
    if (std::fabs(x) >= 448.0f) {
      EXPECT_EQ(got & 0x7f, 0x7e) << x;
      continue;
    }
    double best = 1e30;
    int best_code = -1;
    for (int c = 0; c < 0x7f; ++c) {
      const double d = std::fabs(std::fabs(double(x)) - fp8_by_definition(uint8_t(c)));
      if (d < best || (d == best && (c & 1) == 0)) {
        best = d;
        best_code = c;
      }
    }
    EXPECT_EQ(got & 0x7f, best_code) << x;
    EXPECT_EQ(got >> 7, x < 0 ? 1 : 0) << x;
  }
  EXPECT_EQ(fp32_to_fp8_e4m3(1000.0f), 0x7e);
  EXPECT_EQ(fp32_to_fp8_e4m3(-1e9f), 0xfe);
  EXPECT_EQ(fp32_to_fp8_e4m3(std::ldexp(1.0f, -11)), 0x00);  // a quarter step rounds to zero
  EXPECT_EQ(fp32_to_fp8_e4m3(std::ldexp(1.5f, -9)), 0x02);   // a tie goes to the even code
}

TEST(ShrikeTypes, QuantiseAndDequantiseAsDefined) {
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 0.1f);
  std::vector<float> x(256);
  for (float& v : x) v = d(rng);
  x[17] = 0.9f;
  // Q8_C: scale absmax/127, round to nearest.
  std::vector<int8_t> q(256);
  float scale = 0;
  quantize_row(DType::Q8_C, x.data(), q.data(), 256, &scale);
  EXPECT_FLOAT_EQ(scale, 0.9f / 127);
  EXPECT_EQ(q[17], 127);
  std::vector<float> back(256);
  dequantize_row(DType::Q8_C, q.data(), back.data(), 256, scale);
  for (int i = 0; i < 256; ++i) EXPECT_NEAR(back[size_t(i)], x[size_t(i)], scale / 2 + 1e-7f);
  EXPECT_THROW(quantize_row(DType::Q8_C, x.data(), q.data(), 256), std::invalid_argument);
  // FP8: scale absmax/448; relative error at most 2^-4 for normal values.
  std::vector<uint8_t> f8(256);
  quantize_row(DType::FP8_E4M3, x.data(), f8.data(), 256, &scale);
  EXPECT_FLOAT_EQ(scale, 0.9f / 448);
  dequantize_row(DType::FP8_E4M3, f8.data(), back.data(), 256, scale);
  for (int i = 0; i < 256; ++i)
    EXPECT_NEAR(back[size_t(i)], x[size_t(i)], std::fabs(x[size_t(i)]) / 16 + scale / 512);
  // Q4_G128: per group of 128, d = (max-min)/15, m = min, so both ends are exact up to f16.
  std::vector<BlockQ4_G128> b(2);
  quantize_row(DType::Q4_G128, x.data(), b.data(), 256);
  dequantize_row(DType::Q4_G128, b.data(), back.data(), 256);
  for (int g = 0; g < 2; ++g) {
    float lo = 1e9f, hi = -1e9f;
    for (int i = 0; i < 128; ++i) {
      lo = std::min(lo, x[size_t(g * 128 + i)]);
      hi = std::max(hi, x[size_t(g * 128 + i)]);
    }
    EXPECT_EQ(fp16_to_fp32(b[size_t(g)].m), fp16_to_fp32(fp32_to_fp16(lo)));
    const float step = fp16_to_fp32(b[size_t(g)].d);
    EXPECT_NEAR(step, (hi - lo) / 15, 1e-3f * step);
    for (int i = 0; i < 128; ++i) {
      const int j = g * 128 + i;
      const int nib = i < 64 ? b[size_t(g)].qs[i] & 15 : b[size_t(g)].qs[i - 64] >> 4;
      EXPECT_EQ(back[size_t(j)], float(nib) * step + fp16_to_fp32(b[size_t(g)].m));
      EXPECT_NEAR(back[size_t(j)], x[size_t(j)],
                  step / 2 + 2e-3f * std::fabs(x[size_t(j)]) + 1e-4f);
    }
  }
}

}  // namespace
}  // namespace shrike
