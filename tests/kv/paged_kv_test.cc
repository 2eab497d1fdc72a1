// The paged view and the contiguous cache built on it: rollback (truncate, then write the
// positions again) gives the attention of a cache that never held the rejected positions, in
// every format, including when the block holding the new end is shared with another sequence.
#include "kv/paged_kv.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "kv/block_table.h"
#include "kv/contiguous_kv.h"

namespace shrike::kv {
namespace {

constexpr int64_t kLayers = 2, kHeads = 2, kKvHeads = 1, kHeadDim = 8, kBlock = 4;

// The K (or V) row of a position in one layer; `version` tells a rejected write from the real one.
std::vector<float> row(int64_t layer, int64_t pos, int version, bool value) {
  std::mt19937 rng(uint32_t(1 + layer * 7919 + pos * 104729 + version * 1299709 + (value ? 3 : 0)));
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> r(size_t(kKvHeads * kHeadDim));
  for (float& x : r) x = d(rng);
  return r;
}

// Writes positions [from, to) of every layer with the given version, as a forward call would.
void write(KvCache& kv, int64_t from, int64_t to, int version) {
  kv.begin_forward(from, to - from);
  for (int64_t l = 0; l < kLayers; ++l)
    for (int64_t p = from; p < to; ++p)
      kv.store(l, p, row(l, p, version, false).data(), row(l, p, version, true).data());
}

// Attention of one query at position `pos` over positions 0..pos, every layer.
std::vector<float> attend(const KvCache& kv, int64_t pos) {
  ThreadPool pool(1);
  std::vector<float> q(size_t(kHeads * kHeadDim)), out(q.size()), all;
  for (size_t i = 0; i < q.size(); ++i) q[i] = float(i % 5) - 2.0f;
  for (int64_t l = 0; l < kLayers; ++l) {
    const kernels::AttentionShape s{1, pos, kHeads, kKvHeads, kHeadDim, 0.35f};
    kernels::attention(s, q.data(), kv.keys(l), kv.values(l), out.data(), pool);
    all.insert(all.end(), out.begin(), out.end());
  }
  return all;
}

// Expects `kv` to attend as a cache that never held a rejected position: one written in order, a
// run of positions per (end, version) pair.
void expect_attention(const KvCache& kv, KvFormat format,
                      const std::vector<std::pair<int64_t, int>>& runs) {
  const int64_t n = runs.back().first;
  KvStorage storage(kLayers, (n + kBlock - 1) / kBlock, kBlock, kKvHeads, kHeadDim, format);
  std::vector<BlockId> blocks(size_t(storage.n_blocks()));
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = BlockId(i);
  PagedKvView ref(storage);
  ref.bind(blocks);
  int64_t from = 0;
  for (const auto& [end, version] : runs) {
    write(ref, from, end, version);
    from = end;
  }
  for (int64_t p = 0; p < n; ++p) EXPECT_EQ(attend(kv, p), attend(ref, p)) << "position " << p;
}

class Rollback : public ::testing::TestWithParam<KvFormat> {};

TEST_P(Rollback, TruncateThenReextendEqualsNeverWritten) {
  // Sequence a: 6 accepted positions, then 5 speculative ones (into a third block) rejected.
  BlockPool pool(8, kBlock);
  KvStorage storage(kLayers, 8, kBlock, kKvHeads, kHeadDim, GetParam());
  BlockTable a;
  ASSERT_TRUE(a.ensure(pool, 11));
  PagedKvView view(storage);
  view.bind(a.blocks());
  write(view, 0, 6, 0);
  write(view, 6, 11, 1);  // rejected
  const Truncation t = a.truncate(pool, 6);
  EXPECT_EQ(t.kept, 6);
  EXPECT_FALSE(t.needs_copy());
  EXPECT_EQ(pool.blocks_in_use(), 2);
  ASSERT_TRUE(a.ensure(pool, 9));
  view.bind(a.blocks());
  write(view, 6, 9, 0);  // the real continuation

  expect_attention(view, GetParam(), {{9, 0}});

  a.release(pool);
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST_P(Rollback, ASharedBlockIsCopiedAndTheOtherSequenceKeepsItsRows) {
  BlockPool pool(8, kBlock);
  KvStorage storage(kLayers, 8, kBlock, kKvHeads, kHeadDim, GetParam());
  const std::vector<int32_t> tokens(12, 7);
  BlockTable a, b;
  ASSERT_TRUE(a.ensure(pool, 12));
  PagedKvView va(storage), vb(storage);
  va.bind(a.blocks());
  write(va, 0, 12, 0);
  a.register_full_blocks(pool, tokens.data(), 12);
  const std::vector<float> a_before = attend(va, 11);
  // b shares a's first two blocks (the prefix cache), writes on, then rolls back into block 1.
  ASSERT_EQ(b.attach_cached_prefix(pool, tokens.data(), 12), 8);
  ASSERT_TRUE(b.ensure(pool, 12));
  vb.bind(b.blocks());
  write(vb, 8, 12, 1);
  const Truncation t = b.truncate(pool, 6);
  ASSERT_TRUE(t.needs_copy());
  storage.copy_block(t.copy_src, t.copy_dst);
  ASSERT_TRUE(b.ensure(pool, 10));
  vb.bind(b.blocks());
  write(vb, 6, 10, 2);  // overwrites slots 2, 3 of b's copy, not a's block
  EXPECT_EQ(attend(va, 11), a_before);

  expect_attention(vb, GetParam(), {{6, 0}, {10, 2}});
  a.release(pool);
  b.release(pool);
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

INSTANTIATE_TEST_SUITE_P(Formats, Rollback,
                         ::testing::Values(KvFormat::F32, KvFormat::F16, KvFormat::Int8),
                         [](const auto& info) { return std::string(kv_format_name(info.param)); });

TEST(ContiguousKvCache, TruncateThenReextendEqualsNeverWritten) {
  for (const KvType type : {KvType::F32, KvType::F16, KvType::Int8, KvType::Int8Mixed}) {
    KvCacheOptions o;
    o.type = type;
    o.sinks = 1;
    o.window = 8;
    const KvDims dims{kLayers, kKvHeads, kHeadDim};
    ContiguousKvCache kv(dims, 16, o), ref(dims, 16, o);
    write(kv, 0, 5, 0);
    kv.end_forward(true);
    // Rejected positions written without a decision in between (int8-mixed decides only when a
    // call computes logits): their copies go, the kept positions' copies stay.
    write(kv, 5, 9, 1);
    kv.truncate(5);
    EXPECT_EQ(kv.n_positions(), 5);
    if (kv.mixed()) {
      EXPECT_EQ(kv.mixed()->n_positions(), 5);
    }
    write(kv, 5, 7, 0);
    write(ref, 0, 5, 0);
    ref.end_forward(true);
    write(ref, 5, 7, 0);
    for (int64_t p = 0; p < 7; ++p)
      EXPECT_EQ(attend(kv, p), attend(ref, p)) << kv_type_name(type) << " position " << p;
    // The copies in use match (int8-mixed keeps the rejected positions' slots allocated, free,
    // until it next compacts).
    if (kv.mixed()) {
      EXPECT_EQ(kv.mixed()->f16_bytes(), ref.mixed()->f16_bytes());
    } else {
      EXPECT_EQ(kv.bytes_in_use(), ref.bytes_in_use()) << kv_type_name(type);
    }
  }
}

TEST(MixedPrecisionKv, TruncateForgetsThePositionsAndTheirCopies) {
  KvCacheOptions o;
  o.type = KvType::Int8Mixed;
  o.sinks = 1;
  o.window = 2;
  o.heavy_fraction = 0;
  MixedPrecisionKv m(o, KvDims{kLayers, kKvHeads, kHeadDim});
  m.begin(0, 6);
  EXPECT_EQ(m.f16_positions(0), 6);
  m.truncate(4);
  EXPECT_EQ(m.n_positions(), 4);
  EXPECT_EQ(m.f16_positions(0), 4);
  EXPECT_THROW(m.kept(0, 4), std::out_of_range);
  m.truncate(10);  // longer: unchanged
  EXPECT_EQ(m.n_positions(), 4);
  m.settle();  // positions 1 and 2 leave the window: no heavy hitters kept
  EXPECT_EQ(m.kept(0, 0), MixedPrecisionKv::Kept::Sink);
  EXPECT_EQ(m.kept(0, 1), MixedPrecisionKv::Kept::Int8);
  EXPECT_EQ(m.kept(0, 3), MixedPrecisionKv::Kept::Recent);
  EXPECT_THROW(m.truncate(-1), std::out_of_range);
}

}  // namespace
}  // namespace shrike::kv
