// The k-quant and i-quant layouts: blocks built byte by byte from ggml's layout description
// decode to the values it defines; shrike's quantisers round-trip within one step. (The
// independent check, llama.cpp on the same files, is bench/experiments/kquant_crosscheck.sh.)
#include "core/kquants.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/dtype.h"

namespace shrike {
namespace {

// ggml's 12-byte packing of 8 six-bit scales and minima, written out for the test: bytes 0..3
// scale j's 6 bits + scale j+4's top 2; bytes 4..7 min j's 6 bits + min j+4's top 2; bytes
// 8..11 scale j+4's low 4 bits and min j+4's low 4 bits.
void pack_by_hand(const int* sc, const int* m, uint8_t* q) {
  for (int j = 0; j < 4; ++j) {
    q[j] = uint8_t(sc[j] | ((sc[j + 4] >> 4) << 6));
    q[j + 4] = uint8_t(m[j] | ((m[j + 4] >> 4) << 6));
    q[j + 8] = uint8_t((sc[j + 4] & 0xf) | ((m[j + 4] & 0xf) << 4));
  }
}

TEST(KQuants, Q4KScalesAndElementsFollowTheLayout) {
  BlockQ4_K b{};
  const int sc[8] = {1, 7, 63, 33, 17, 48, 5, 62}, m[8] = {0, 63, 2, 40, 31, 16, 59, 9};
  pack_by_hand(sc, m, b.scales);
  for (int j = 0; j < 8; ++j) {
    uint8_t s, mm;
    kquant_scale_min(j, b.scales, &s, &mm);
    EXPECT_EQ(s, sc[j]) << j;
    EXPECT_EQ(mm, m[j]) << j;
  }
  b.d = fp32_to_fp16(0.5f);
  b.dmin = fp32_to_fp16(0.25f);
  for (int i = 0; i < 128; ++i) b.qs[i] = uint8_t((i * 7) & 0xff);
  std::vector<float> y(256);
  dequantize_q4_k(&b, y.data(), 256);
  // Element 64c + 32h + l is nibble h of qs[32c + l], in sub-block 2c + h.
  for (int e = 0; e < 256; ++e) {
    const int c = e / 64, h = (e / 32) % 2, l = e % 32, sub = 2 * c + h;
    const int q = (b.qs[32 * c + l] >> (4 * h)) & 0xf;
    EXPECT_FLOAT_EQ(y[size_t(e)], 0.5f * float(sc[sub]) * float(q) - 0.25f * float(m[sub])) << e;
  }
}

TEST(KQuants, Q5KFifthBitComesFromQh) {
  BlockQ5_K b{};
  const int sc[8] = {1, 1, 1, 1, 1, 1, 1, 1}, m[8] = {};
  pack_by_hand(sc, m, b.scales);
  b.d = fp32_to_fp16(1.0f);
  b.dmin = fp32_to_fp16(1.0f);
  b.qh[3] = 0x24;  // bits 2 and 5: elements 64 + 3 (sub-block 2) and 128 + 32 + 3 (sub-block 5)
  std::vector<float> y(256);
  dequantize_q5_k(&b, y.data(), 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[size_t(e)], (e == 67 || e == 163) ? 16.0f : 0.0f) << e;
}

TEST(KQuants, Q6KElementsFollowTheLayout) {
  std::mt19937 rng(5);
  BlockQ6_K b{};
  for (auto& v : b.ql) v = uint8_t(rng());
  for (auto& v : b.qh) v = uint8_t(rng());
  for (int s = 0; s < 16; ++s) b.scales[s] = int8_t(int(rng() % 255) - 127);
  b.d = fp32_to_fp16(0.125f);
  std::vector<float> y(256);
  dequantize_q6_k(&b, y.data(), 256);
  // ggml: in each half of 128, l < 32 gives elements l, l+32, l+64, l+96 from the low nibble
  // of ql[l], ql[l+32], the high nibble of ql[l], ql[l+32], and bit pairs 0, 1, 2, 3 of qh[l].
  for (int half = 0; half < 2; ++half)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* ql = b.ql + 64 * half;
      const uint8_t qh = b.qh[32 * half + l];
      const int q[4] = {
          (ql[l] & 0xf) | ((qh & 3) << 4), (ql[l + 32] & 0xf) | (((qh >> 2) & 3) << 4),
          (ql[l] >> 4) | (((qh >> 4) & 3) << 4), (ql[l + 32] >> 4) | ((qh >> 6) << 4)};
      for (int k = 0; k < 4; ++k) {
        const int e = 128 * half + 32 * k + l;
        EXPECT_FLOAT_EQ(y[size_t(e)], 0.125f * float(b.scales[e / 16]) * float(q[k] - 32)) << e;
      }
    }
}

TEST(KQuants, Iq4NlUsesTheNonUniformGrid) {
  BlockIQ4_NL b{};
  b.d = fp32_to_fp16(2.0f);
  for (int l = 0; l < 16; ++l) b.qs[l] = uint8_t(l | ((15 - l) << 4));
  std::vector<float> y(32);
  dequantize_iq4_nl(&b, y.data(), 32);
  EXPECT_EQ(y[0], -254.0f);
  EXPECT_EQ(y[8], 2.0f);
  EXPECT_EQ(y[15], 226.0f);
  EXPECT_EQ(y[16], 226.0f);  // high nibble of qs[0] = 15
}

TEST(KQuants, Iq4XsScalesHaveAnOffsetOf32) {
  BlockIQ4_XS b{};
  b.d = fp32_to_fp16(1.0f);
  b.scales_l[0] = 0x21;           // sub-block 0: low 1, sub-block 1: low 2
  b.scales_h = 0x3 << 2;          // sub-block 1: high bits 3 -> 2 | 48 = 50
  for (auto& q : b.qs) q = 0x88;  // grid value 1 everywhere
  std::vector<float> y(256);
  dequantize_iq4_xs(&b, y.data(), 256);
  EXPECT_EQ(y[0], 1.0f - 32.0f);
  EXPECT_EQ(y[32], 50.0f - 32.0f);
  EXPECT_EQ(y[64], -32.0f);
}

TEST(KQuants, Q3KSignAndScaleLayout) {
  BlockQ3_K b{};
  b.d = fp32_to_fp16(1.0f);
  // Scale j: low 4 bits in nibble j / 8 of byte j % 8, high 2 bits in bits 2 * (j / 4) of byte
  // 8 + j % 4. Sub-block 0: 33 (+1); sub-block 9: 34 (+2); every other scale 32 (0).
  for (int j = 0; j < 16; ++j) {
    const int s = j == 0 ? 33 : j == 9 ? 34 : 32;
    b.scales[j % 8] |= uint8_t((s & 0xf) << (4 * (j / 8)));
    b.scales[8 + j % 4] |= uint8_t((s >> 4) << (2 * (j / 4)));
  }
  // Sub-block j is elements 16j..16j+15: half j / 8, shift 2 * ((j % 8) / 2), bytes
  // qs[32 * half + 16 * (j % 2) + l]; its hmask bit is 1 << (j / 2) in hmask[16 * (j % 2) + l].
  b.qs[0] = 3;           // element 0: low bits 3, hmask bit clear -> 3 - 4 = -1
  b.qs[48] = 1;          // element 144 (sub-block 9: half 1, shift 0): low bits 1
  b.hmask[16] = 1 << 4;  // and its high bit set -> 1
  std::vector<float> y(256);
  dequantize_q3_k(&b, y.data(), 256);
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[144], 2.0f);
  EXPECT_EQ(y[1], -4.0f);  // q 0, hmask clear: -4 times scale +1
  EXPECT_EQ(y[20], 0.0f);  // scale 0
}

// Within one quantisation step (the sub-block's scale) of the input, and finer with more bits.
TEST(KQuants, WrittenTypesRoundTripWithinAStep) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t n = 4096;
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  for (int64_t i = 0; i < 256; ++i) x[size_t(i)] *= 1e-3f;  // a quiet super-block
  double rms[3];
  int k = 0;
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    ASSERT_TRUE(dtype_is_writable(t));
    std::vector<uint8_t> q(size_t(dtype_row_bytes(t, n)));
    quantize_row(t, x.data(), q.data(), n);
    std::vector<float> y(n);
    dequantize_row(t, q.data(), y.data(), n);
    const int sub = t == DType::Q6_K ? 16 : 32, levels = t == DType::Q4_K ? 15 : 31;
    double se = 0;
    for (int64_t s = 0; s < n / sub; ++s) {
      float lo = 0, hi = 0;
      for (int l = 0; l < sub; ++l) {
        lo = std::min(lo, x[size_t(s * sub + l)]);
        hi = std::max(hi, x[size_t(s * sub + l)]);
      }
      const float step = t == DType::Q6_K ? std::max(-lo, hi) / 32.0f : (hi - lo) / float(levels);
      // Half a step of rounding with the scale rounded up to the next 6-bit (8-bit for Q6_K)
      // multiple of the super-block's; Q6_K's value of largest magnitude maps to -32, so one of
      // the other sign can sit a whole step beyond +31.
      const float bound = (t == DType::Q6_K ? 1.0f : 0.5f) * step * 1.1f + 1e-3f * step;
      for (int l = 0; l < sub; ++l) {
        const size_t i = size_t(s * sub + l);
        EXPECT_LE(std::fabs(y[i] - x[i]), bound + 1e-7f) << dtype_name(t) << " " << i;
        se += double(y[i] - x[i]) * double(y[i] - x[i]);
      }
    }
    rms[k++] = std::sqrt(se / double(n));
  }
  EXPECT_LT(rms[1], rms[0] * 0.6);
  EXPECT_LT(rms[2], rms[1] * 0.8);
}

TEST(KQuants, NamesIdsAndWhatIsWritten) {
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL,
                  DType::IQ4_XS}) {
    EXPECT_TRUE(dtype_is_known(uint32_t(t)));
    EXPECT_TRUE(dtype_is_kquant(t));
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t);
    EXPECT_EQ(dtype_row_bytes(t, 256), dtype_block_bytes(t) * (256 / dtype_block_elems(t)));
  }
  EXPECT_EQ(dtype_from_name("Q4_K"), DType::Q4_K);
  EXPECT_EQ(dtype_block_bytes(DType::Q4_K), 144);
  EXPECT_EQ(dtype_block_elems(DType::IQ4_NL), 32);
  EXPECT_FALSE(dtype_is_known(15));  // Q8_K: an activation type, never in a model file
  float x[256] = {};
  uint8_t out[256];
  EXPECT_THROW(quantize_row(DType::Q2_K, x, out, 256), std::invalid_argument);
  EXPECT_THROW(quantize_row(DType::IQ4_XS, x, out, 256), std::invalid_argument);
}

}  // namespace
}  // namespace shrike
