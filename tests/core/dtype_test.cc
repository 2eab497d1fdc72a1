// Number formats: f16/bf16 conversions, and Q8_0 / Q4_0 exactly as GGUF defines them.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/cpu_features.h"
#include "core/dtype.h"

namespace shrike {
namespace {

__attribute__((target("f16c"))) float hw_half_to_float(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) uint16_t hw_float_to_half(float f) {
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(Fp16, EveryHalfConvertsExactlyAsTheHardwareDoes) {
  if (!cpu_features().avx2) GTEST_SKIP() << "SKIPPED: no F16C on this CPU to compare with";
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
  if (!cpu_features().avx2) GTEST_SKIP() << "SKIPPED: no F16C on this CPU to compare with";
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
  b.d = 0x4000;  // 2.0
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
  EXPECT_FALSE(dtype_from_name("q5_k").has_value());
  EXPECT_EQ(dtype_row_bytes(DType::Q4_0, 64), 36);
  EXPECT_EQ(dtype_row_bytes(DType::Q8_0, 64), 68);
  EXPECT_EQ(dtype_row_bytes(DType::BF16, 3), 6);
  EXPECT_TRUE(dtype_is_known(30));
  EXPECT_FALSE(dtype_is_known(3));  // Q4_1 exists in GGUF but is not supported here
}

}  // namespace
}  // namespace shrike
