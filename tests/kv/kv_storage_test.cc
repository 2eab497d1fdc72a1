#include "kv/kv_storage.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "core/dtype.h"
#include "kernels/ops.h"

namespace shrike::kv {
namespace {

// A value that names where it belongs, so a misplaced float shows where it came from.
float tag(int64_t layer, int64_t block, int64_t slot, int64_t head, int64_t d, bool value) {
  return float(value ? -1 : 1) *
         float(1 + d + 10 * head + 100 * slot + 1000 * block + 10000 * layer);
}

TEST(KvStorage, RejectsBadDimensions) {
  EXPECT_THROW(KvStorage(0, 4, 16, 2, 8), std::invalid_argument);
  EXPECT_THROW(KvStorage(1, 4, 16, 2, 0), std::invalid_argument);
  EXPECT_THROW(KvStorage(1, -4, 16, 2, 8), std::invalid_argument);
  EXPECT_THROW(KvStorage(1 << 20, 1 << 20, 1 << 20, 1 << 20, 8), std::invalid_argument);
}

TEST(KvStorage, RejectsAFormatListOfTheWrongLength) {
  EXPECT_THROW(KvStorage(2, 4, 16, 2, 8, std::vector<KvFormat>{KvFormat::Int8}),
               std::invalid_argument);
  EXPECT_THROW(KvStorage(1, 4, 16, 2, 8, std::vector<KvFormat>{}), std::invalid_argument);
  EXPECT_NO_THROW(KvStorage(2, 4, 16, 2, 8, {KvFormat::Int8, KvFormat::F16}));
}

TEST(KvStorage, SizesAndAlignment) {
  KvStorage kv(3, 5, 4, 2, 8);
  EXPECT_EQ(kv.block_elems(), 4 * 2 * 8);
  EXPECT_EQ(kv.format(0), KvFormat::F32);
  EXPECT_EQ(kv.bytes(), size_t(2 * 3 * 5 * 4 * 2 * 8) * sizeof(float));
  EXPECT_EQ(kv.block_bytes(), size_t(2 * 3 * 4 * 2 * 8) * sizeof(float));
  EXPECT_EQ(kv.bytes_per_token(), double(2 * 3 * 2 * 8 * sizeof(float)));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(kv.keys(0, 0)) % 64, 0u);
  // Blocks of one layer, then the next layer, without overlap.
  EXPECT_EQ(kv.keys(0, 1) - kv.keys(0, 0), kv.block_elems());
  EXPECT_EQ(kv.keys(1, 0) - kv.keys(0, 0), 5 * kv.block_elems());
  EXPECT_EQ(kv.values(2, 4) - kv.values(0, 0), (2 * 5 + 4) * kv.block_elems());
}

TEST(KvStorage, StoreIsHeadMajorWithinABlock) {
  constexpr int64_t kLayers = 2, kBlocks = 3, kBlock = 4, kHeads = 3, kDim = 5;
  KvStorage kv(kLayers, kBlocks, kBlock, kHeads, kDim);
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t b = 0; b < kBlocks; ++b) {
      for (int64_t s = 0; s < kBlock; ++s) {
        std::vector<float> k(size_t(kHeads * kDim)), v(k.size());
        for (int64_t h = 0; h < kHeads; ++h) {
          for (int64_t d = 0; d < kDim; ++d) {
            k[size_t(h * kDim + d)] = tag(l, b, s, h, d, false);
            v[size_t(h * kDim + d)] = tag(l, b, s, h, d, true);
          }
        }
        kv.store(l, BlockId(b), s, k.data(), v.data());
      }
    }
  }
  // [kv_head][slot][d] inside each block: head h of slot s starts at (h * block_size + s) * dim.
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t b = 0; b < kBlocks; ++b) {
      const float* kb = kv.keys(l, BlockId(b));
      const float* vb = kv.values(l, BlockId(b));
      for (int64_t h = 0; h < kHeads; ++h) {
        for (int64_t s = 0; s < kBlock; ++s) {
          for (int64_t d = 0; d < kDim; ++d) {
            const int64_t at = (h * kBlock + s) * kDim + d;
            ASSERT_EQ(kb[at], tag(l, b, s, h, d, false)) << l << " " << b << " " << s << " " << h;
            ASSERT_EQ(vb[at], tag(l, b, s, h, d, true)) << l << " " << b << " " << s << " " << h;
          }
        }
      }
    }
  }
}

TEST(KvStorage, StoreTouchesOnlyItsSlot) {
  KvStorage kv(1, 2, 4, 2, 3);
  const std::vector<float> k = {1, 2, 3, 4, 5, 6}, v = {-1, -2, -3, -4, -5, -6};
  kv.store(0, 1, 2, k.data(), v.data());
  const float* kb = kv.keys(0, 1);
  const std::vector<float> expect_head0 = {1, 2, 3}, expect_head1 = {4, 5, 6};
  for (int64_t i = 0; i < kv.block_elems(); ++i) {
    float want = 0;
    if (i >= 6 && i < 9) want = expect_head0[size_t(i - 6)];     // head 0, slot 2
    if (i >= 18 && i < 21) want = expect_head1[size_t(i - 18)];  // head 1, slot 2
    EXPECT_EQ(kb[i], want) << i;
    EXPECT_EQ(kv.values(0, 1)[i], -want) << i;
    EXPECT_EQ(kv.keys(0, 0)[i], 0.0f) << i;  // the other block is untouched (zero-initialised)
  }
}

TEST(KvStorage, StoreRejectsOutOfRangeCoordinates) {
  KvStorage kv(2, 3, 4, 1, 2);
  const float x[2] = {1, 2};
  EXPECT_THROW(kv.store(2, 0, 0, x, x), std::out_of_range);
  EXPECT_THROW(kv.store(0, 3, 0, x, x), std::out_of_range);
  EXPECT_THROW(kv.store(0, kNoBlock, 0, x, x), std::out_of_range);
  EXPECT_THROW(kv.store(0, 0, 4, x, x), std::out_of_range);
  EXPECT_THROW(kv.copy_block(0, 3), std::out_of_range);
}

TEST(KvStorage, CopyBlockCopiesEveryLayerAndNothingElse) {
  constexpr int64_t kLayers = 3, kBlocks = 3;
  KvStorage kv(kLayers, kBlocks, 2, 2, 4);
  const int64_t n = kv.block_elems();
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t b = 0; b < kBlocks; ++b) {
      for (int64_t i = 0; i < n; ++i) {
        kv.keys(l, BlockId(b))[i] = float(l * 1000 + b * 100 + i);
        kv.values(l, BlockId(b))[i] = -float(l * 1000 + b * 100 + i);
      }
    }
  }
  kv.copy_block(2, 0);
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(kv.keys(l, 0)[i], float(l * 1000 + 200 + i));
      EXPECT_EQ(kv.values(l, 0)[i], -float(l * 1000 + 200 + i));
      EXPECT_EQ(kv.keys(l, 1)[i], float(l * 1000 + 100 + i));  // untouched
      EXPECT_EQ(kv.keys(l, 2)[i], float(l * 1000 + 200 + i));  // source unchanged
    }
  }
}

TEST(KvStorage, F16HalvesTheBytesAndKeepsTheLayout) {
  KvStorage kv(3, 5, 4, 2, 8, KvFormat::F16);
  EXPECT_EQ(kv.format(2), KvFormat::F16);
  EXPECT_EQ(kv.block_elems(), 4 * 2 * 8);
  EXPECT_EQ(kv.bytes(), size_t(2 * 3 * 5 * 4 * 2 * 8) * 2);
  EXPECT_EQ(kv.block_bytes(), size_t(2 * 3 * 4 * 2 * 8) * 2);
  EXPECT_EQ(kv.bytes_per_token(), double(2 * 3 * 2 * 8 * 2));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(kv.keys_f16(0, 0)) % 64, 0u);
  EXPECT_EQ(kv.keys_f16(0, 1) - kv.keys_f16(0, 0), kv.block_elems());
  EXPECT_EQ(kv.values_f16(2, 4) - kv.values_f16(0, 0), (2 * 5 + 4) * kv.block_elems());
  // The element type is part of the contract: reading halves as floats (or back) is refused.
  EXPECT_THROW(kv.keys(0, 0), std::logic_error);
  EXPECT_THROW(static_cast<const KvStorage&>(kv).values(0, 0), std::logic_error);
  KvStorage f32(1, 1, 1, 1, 1);
  EXPECT_THROW(f32.keys_f16(0, 0), std::logic_error);
}

// f16 stores are head-major like f32 ones, and each value is the f32 one rounded to the nearest
// half (ties to even), as core's reference conversion rounds it.
TEST(KvStorage, F16StoreIsHeadMajorAndRoundsToNearestEven) {
  constexpr int64_t kLayers = 2, kBlocks = 2, kBlock = 3, kHeads = 2, kDim = 5;
  KvStorage kv(kLayers, kBlocks, kBlock, kHeads, kDim, KvFormat::F16);
  // tag() values above 2048 are not halves: they exercise the rounding; scaled down they are
  // below 2^-14 (subnormal halves) for small tags.
  const auto value = [](int64_t l, int64_t b, int64_t s, int64_t h, int64_t d, bool v) {
    const float t = tag(l, b, s, h, d, v);
    return (l + b) % 2 == 0 ? t * 1.37f : t * 1e-9f;
  };
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t b = 0; b < kBlocks; ++b) {
      for (int64_t s = 0; s < kBlock; ++s) {
        std::vector<float> k(size_t(kHeads * kDim)), v(k.size());
        for (int64_t h = 0; h < kHeads; ++h) {
          for (int64_t d = 0; d < kDim; ++d) {
            k[size_t(h * kDim + d)] = value(l, b, s, h, d, false);
            v[size_t(h * kDim + d)] = value(l, b, s, h, d, true);
          }
        }
        kv.store(l, BlockId(b), s, k.data(), v.data());
      }
    }
  }
  for (int64_t l = 0; l < kLayers; ++l) {
    for (int64_t b = 0; b < kBlocks; ++b) {
      for (int64_t h = 0; h < kHeads; ++h) {
        for (int64_t s = 0; s < kBlock; ++s) {
          for (int64_t d = 0; d < kDim; ++d) {
            const int64_t at = (h * kBlock + s) * kDim + d;
            ASSERT_EQ(kv.keys_f16(l, BlockId(b))[at], fp32_to_fp16(value(l, b, s, h, d, false)))
                << l << " " << b << " " << s << " " << h << " " << d;
            ASSERT_EQ(kv.values_f16(l, BlockId(b))[at], fp32_to_fp16(value(l, b, s, h, d, true)))
                << l << " " << b << " " << s << " " << h << " " << d;
          }
        }
      }
    }
  }
}

TEST(KvStorage, F16StoreOfEdgeValues) {
  const float inf = std::numeric_limits<float>::infinity();
  // 1 + 2^-11 is halfway between 1 and the next half: ties go to the even one (1.0); 1 + 3*2^-11
  // is halfway between two halves whose even one is the larger.
  const std::vector<float> k = {
      1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65504.0f, 65520.0f, -1e9f, 0x1p-24f, 0x1p-26f, -0.0f};
  const std::vector<uint16_t> want = {0x3c00, 0x3c02, 0x7bff, 0x7c00,
                                      0xfc00, 0x0001, 0x0000, 0x8000};
  const std::vector<float> v = {inf, -inf, std::nanf(""), 0.5f, -2.0f, 1e-5f, 3.14159f, 0.1f};
  KvStorage kv(1, 1, 1, 1, int64_t(k.size()), KvFormat::F16);
  kv.store(0, 0, 0, k.data(), v.data());
  for (size_t i = 0; i < k.size(); ++i) EXPECT_EQ(kv.keys_f16(0, 0)[i], want[i]) << i;
  EXPECT_EQ(kv.values_f16(0, 0)[0], 0x7c00);
  EXPECT_EQ(kv.values_f16(0, 0)[1], 0xfc00);
  EXPECT_TRUE(std::isnan(fp16_to_fp32(kv.values_f16(0, 0)[2])));
  for (size_t i = 3; i < v.size(); ++i) {
    EXPECT_EQ(kv.values_f16(0, 0)[i], fp32_to_fp16(v[i])) << i;
    // Half an ulp: 2^-11 relative for normal halves, 2^-25 absolute for subnormal ones (1e-5).
    EXPECT_LE(std::fabs(fp16_to_fp32(kv.values_f16(0, 0)[i]) - v[i]),
              std::max(std::fabs(v[i]) * 0x1p-11f, 0x1p-25f))
        << i;
  }
}

TEST(KvStorage, F16CopyBlockCopiesTheHalvesExactly) {
  KvStorage kv(2, 3, 2, 2, 4, KvFormat::F16);
  const int64_t n = kv.block_elems();
  for (int64_t l = 0; l < 2; ++l) {
    for (int64_t i = 0; i < n; ++i) {
      kv.keys_f16(l, 1)[i] = uint16_t(0x3000 + l * 256 + i);  // includes no NaN pattern
      kv.values_f16(l, 1)[i] = uint16_t(0xb000 + l * 256 + i);
    }
  }
  kv.copy_block(1, 2);
  for (int64_t l = 0; l < 2; ++l) {
    EXPECT_EQ(0, std::memcmp(kv.keys_f16(l, 2), kv.keys_f16(l, 1), size_t(n) * 2)) << l;
    EXPECT_EQ(0, std::memcmp(kv.values_f16(l, 2), kv.values_f16(l, 1), size_t(n) * 2)) << l;
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(kv.keys_f16(l, 0)[i], 0) << l << " " << i;
  }
}

// int8: head_dim + 4 bytes per (position, kv head), quants padded to 4 bytes before the scales.
TEST(KvStorage, Int8SizesAndLayout) {
  KvStorage kv(3, 5, 4, 2, 8, KvFormat::Int8);
  const size_t block = 4 * 2 * 8 + 4 * 2 * 4;  // quants, then scales
  EXPECT_EQ(kv.layer_block_bytes(1), block);
  EXPECT_EQ(kv.block_bytes(), 2 * 3 * block);
  EXPECT_EQ(kv.bytes(), 5 * 2 * 3 * block);
  EXPECT_EQ(kv.bytes_per_token(), double(2 * 3 * 2 * (8 + 4)));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(kv.keys_int8(0, 0)) % 64, 0u);
  EXPECT_EQ(kv.keys_int8(0, 1) - kv.keys_int8(0, 0), std::ptrdiff_t(block));
  EXPECT_EQ(reinterpret_cast<const int8_t*>(kv.key_scales(0, 1)) - kv.keys_int8(0, 1), 64);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(kv.value_scales(2, 3)) % 4, 0u);
  EXPECT_THROW(kv.keys(0, 0), std::logic_error);
  EXPECT_THROW(kv.keys_f16(0, 0), std::logic_error);
  KvStorage f16(1, 1, 1, 1, 1, KvFormat::F16);
  EXPECT_THROW(f16.keys_int8(0, 0), std::logic_error);
  EXPECT_THROW(f16.key_scales(0, 0), std::logic_error);
  // Odd sizes: the quants are padded so that the scales stay aligned.
  KvStorage odd(1, 2, 3, 1, 5, KvFormat::Int8);
  EXPECT_EQ(odd.layer_block_bytes(0), size_t(16 + 3 * 4));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(odd.key_scales(0, 1)) % 4, 0u);
}

// Round trip: each (position, head) row comes back as kernels::quantize_int8_row makes it,
// head-major within the block, with its scale at [kv_head][slot], within half a step of the value
// stored; other slots and blocks stay zero.
TEST(KvStorage, Int8StoreRoundTrip) {
  constexpr int64_t kLayers = 2, kBlocks = 3, kBlock = 4, kHeads = 3, kDim = 6;
  KvStorage kv(kLayers, kBlocks, kBlock, kHeads, kDim, KvFormat::Int8);
  const auto value = [](int64_t l, int64_t b, int64_t s, int64_t h, int64_t d, bool v) {
    return tag(l, b, s, h, d, v) * (d % 2 ? 0.013f : -0.007f);
  };
  for (int64_t l = 0; l < kLayers; ++l)
    for (int64_t s = 0; s < kBlock; s += 2) {  // odd slots stay empty
      std::vector<float> k(size_t(kHeads * kDim)), v(k.size());
      for (int64_t h = 0; h < kHeads; ++h)
        for (int64_t d = 0; d < kDim; ++d) {
          k[size_t(h * kDim + d)] = value(l, 1, s, h, d, false);
          v[size_t(h * kDim + d)] = value(l, 1, s, h, d, true);
        }
      kv.store(l, 1, s, k.data(), v.data());
    }
  for (int64_t l = 0; l < kLayers; ++l)
    for (int64_t s = 0; s < kBlock; ++s)
      for (int64_t h = 0; h < kHeads; ++h) {
        std::vector<float> row(kDim);
        std::vector<int8_t> want(kDim);
        for (bool is_v : {false, true}) {
          for (int64_t d = 0; d < kDim; ++d) row[size_t(d)] = value(l, 1, s, h, d, is_v);
          const float want_scale =
              s % 2 ? 0.0f : kernels::quantize_int8_row(row.data(), kDim, want.data());
          const int8_t* q =
              (is_v ? kv.values_int8(l, 1) : kv.keys_int8(l, 1)) + (h * kBlock + s) * kDim;
          const float scale = (is_v ? kv.value_scales(l, 1) : kv.key_scales(l, 1))[h * kBlock + s];
          ASSERT_EQ(scale, want_scale) << l << " " << s << " " << h << " " << is_v;
          for (int64_t d = 0; d < kDim; ++d) {
            if (s % 2) {
              ASSERT_EQ(q[d], 0);
              continue;
            }
            ASSERT_EQ(q[d], want[size_t(d)]) << l << " " << s << " " << h << " " << d;
            ASSERT_LE(std::fabs(float(q[d]) * scale - row[size_t(d)]), scale * 0.5f * 1.0001f);
          }
        }
      }
  for (BlockId b : {0, 2})
    for (int64_t i = 0; i < kv.block_elems(); ++i) ASSERT_EQ(kv.keys_int8(1, b)[i], 0) << b;
}

// Layers of different formats side by side (int8 with f16 layers), and copy-on-write of a block
// across all of them, scales included.
TEST(KvStorage, MixedLayerFormatsStoreAndCopy) {
  KvStorage kv(3, 4, 2, 2, 4, {KvFormat::Int8, KvFormat::F16, KvFormat::Int8});
  EXPECT_EQ(kv.format(0), KvFormat::Int8);
  EXPECT_EQ(kv.format(1), KvFormat::F16);
  EXPECT_EQ(kv.block_bytes(), size_t(2 * ((16 + 16) + 32 + (16 + 16))));
  EXPECT_DOUBLE_EQ(kv.bytes_per_token(), double(kv.block_bytes()) / 2);
  const std::vector<float> k = {1, -2, 3, 0.5f, 8, 7, -6, 5}, v = {-1, 2, -3, 4, 0, 0, 0, 0.25f};
  for (int64_t l = 0; l < 3; ++l) kv.store(l, 2, 1, k.data(), v.data());
  EXPECT_EQ(kv.keys_f16(1, 2)[1 * 4 + 1], fp32_to_fp16(-2));                 // head 0, slot 1
  EXPECT_EQ(kv.values_f16(1, 2)[(1 * 2 + 1) * 4 + 3], fp32_to_fp16(0.25f));  // head 1, slot 1
  EXPECT_EQ(kv.key_scales(0, 2)[0 * 2 + 1], 3.0f / 127);
  EXPECT_EQ(kv.value_scales(2, 2)[1 * 2 + 1], 0.25f / 127);
  EXPECT_EQ(kv.keys_int8(2, 2)[(1 * 2 + 1) * 4 + 0], 127);  // 8 is head 1's largest
  kv.copy_block(2, 0);
  for (int64_t l = 0; l < 3; ++l) {
    const size_t n = kv.layer_block_bytes(l);
    const auto bytes = [&](int64_t layer, BlockId b, bool values) -> const void* {
      if (kv.format(layer) == KvFormat::F16)
        return values ? kv.values_f16(layer, b) : kv.keys_f16(layer, b);
      return values ? kv.values_int8(layer, b) : kv.keys_int8(layer, b);
    };
    EXPECT_EQ(0, std::memcmp(bytes(l, 0, false), bytes(l, 2, false), n)) << l;
    EXPECT_EQ(0, std::memcmp(bytes(l, 0, true), bytes(l, 2, true), n)) << l;
    const std::vector<unsigned char> zero(n, 0);
    EXPECT_EQ(0, std::memcmp(bytes(l, 1, false), zero.data(), n)) << l;  // untouched
  }
}

}  // namespace
}  // namespace shrike::kv
