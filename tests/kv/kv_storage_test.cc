#include "kv/kv_storage.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

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

TEST(KvStorage, SizesAndAlignment) {
  KvStorage kv(3, 5, 4, 2, 8);
  EXPECT_EQ(kv.block_floats(), 4 * 2 * 8);
  EXPECT_EQ(kv.bytes(), size_t(2 * 3 * 5 * 4 * 2 * 8) * sizeof(float));
  EXPECT_EQ(kv.bytes_per_token(), size_t(2 * 3 * 2 * 8) * sizeof(float));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(kv.keys(0, 0)) % 64, 0u);
  // Blocks of one layer, then the next layer, without overlap.
  EXPECT_EQ(kv.keys(0, 1) - kv.keys(0, 0), kv.block_floats());
  EXPECT_EQ(kv.keys(1, 0) - kv.keys(0, 0), 5 * kv.block_floats());
  EXPECT_EQ(kv.values(2, 4) - kv.values(0, 0), (2 * 5 + 4) * kv.block_floats());
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
  for (int64_t i = 0; i < kv.block_floats(); ++i) {
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
  const int64_t n = kv.block_floats();
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

}  // namespace
}  // namespace shrike::kv
