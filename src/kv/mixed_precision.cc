#include "kv/mixed_precision.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/dtype.h"

namespace shrike::kv {

// ---- MixedPrecisionKv ------------------------------------------------------------------------

MixedPrecisionKv::MixedPrecisionKv(const KvCacheOptions& opt, const KvDims& c)
    : opt_(opt), n_kv_heads_(c.n_kv_heads), kv_dim_(c.kv_dim()), head_dim_(c.head_dim) {
  if (!opt.mixed()) throw std::invalid_argument("MixedPrecisionKv needs the int8-mixed type");
  opt.validate(c.n_layers);
  layers_.resize(size_t(c.n_layers));
  for (int64_t l = 0; l < c.n_layers; ++l) layers_[size_t(l)].tracked = !opt.fp16_layer(l);
}

// Room for `capacity` slots: copies, and sums laid out [kv_head][capacity] (so they move).
void MixedPrecisionKv::reserve_slots(Layer& l, int64_t capacity) {
  l.k16.resize(size_t(capacity * kv_dim_));
  l.v16.resize(size_t(capacity * kv_dim_));
  if (sums_wanted()) {
    std::vector<float> sums(size_t(n_kv_heads_ * capacity), 0.0f);
    const int64_t keep = std::min(capacity, l.capacity);
    for (int64_t g = 0; g < n_kv_heads_; ++g)
      std::copy_n(l.sums.begin() + std::ptrdiff_t(g * l.capacity), keep,
                  sums.begin() + std::ptrdiff_t(g * capacity));
    l.sums.swap(sums);
  }
  l.capacity = capacity;
}

int32_t MixedPrecisionKv::take_slot(Layer& l) {
  int32_t s;
  if (!l.free.empty()) {
    s = l.free.back();
    l.free.pop_back();
  } else {
    if (l.n_slots == l.capacity) reserve_slots(l, std::max<int64_t>(16, 2 * l.capacity));
    s = int32_t(l.n_slots++);
  }
  for (int64_t g = 0; g < n_kv_heads_ && sums_wanted(); ++g) l.sums[size_t(g * l.capacity + s)] = 0;
  return s;
}

void MixedPrecisionKv::drop_copy(Layer& l, int64_t pos) {
  int32_t& s = l.slot[size_t(pos)];
  if (s >= 0) l.free.push_back(s);
  s = -1;
}

// Renumbers the copies in use 0..used-1, in position order, and frees the rest of the slot
// memory (a prompt needs a slot per position until its logits call decides; afterwards most are
// free).
void MixedPrecisionKv::compact(Layer& l) {
  const int64_t used = l.n_slots - int64_t(l.free.size());
  const int64_t capacity = std::max<int64_t>(16, used + used / 4);
  Layer c;
  c.k16.resize(size_t(capacity * kv_dim_));
  c.v16.resize(c.k16.size());
  if (sums_wanted()) c.sums.assign(size_t(n_kv_heads_ * capacity), 0.0f);
  int32_t next = 0;
  for (int32_t& s : l.slot) {
    if (s < 0) continue;
    std::copy_n(l.k16.begin() + std::ptrdiff_t(s) * kv_dim_, kv_dim_,
                c.k16.begin() + std::ptrdiff_t(next) * kv_dim_);
    std::copy_n(l.v16.begin() + std::ptrdiff_t(s) * kv_dim_, kv_dim_,
                c.v16.begin() + std::ptrdiff_t(next) * kv_dim_);
    for (int64_t g = 0; g < n_kv_heads_ && sums_wanted(); ++g)
      c.sums[size_t(g * capacity + next)] = l.sums[size_t(g * l.capacity + s)];
    s = next++;
  }
  l.k16.swap(c.k16);
  l.v16.swap(c.v16);
  l.sums.swap(c.sums);
  std::vector<int32_t>().swap(l.free);
  l.n_slots = used;
  l.capacity = capacity;
}

void MixedPrecisionKv::truncate(int64_t n) {
  if (n < 0) throw std::out_of_range("MixedPrecisionKv::truncate: negative length");
  if (n >= n_) return;
  for (Layer& l : layers_) {
    if (!l.tracked) continue;
    for (int64_t p = n; p < n_; ++p) drop_copy(l, p);
    l.slot.resize(size_t(n));
  }
  decided_ = std::min(decided_, n);
  n_ = n;
}

void MixedPrecisionKv::begin(int64_t pos0, int64_t n) {
  if (pos0 < 0 || n < 0) throw std::out_of_range("MixedPrecisionKv::begin: negative position");
  const int64_t keep = std::min(pos0, n_);
  truncate(keep);  // forget what is rewritten
  n_ = pos0 + n;
  for (Layer& l : layers_) {
    if (!l.tracked) continue;
    l.slot.resize(size_t(n_), -1);
    for (int64_t p = keep; p < pos0; ++p) drop_copy(l, p);  // never stored here
    for (int64_t p = pos0; p < n_; ++p) l.slot[size_t(p)] = take_slot(l);
  }
}

void MixedPrecisionKv::store(int64_t layer, int64_t pos, const float* k, const float* v) {
  Layer& l = layers_[size_t(layer)];
  if (!l.tracked) return;
  if (pos < 0 || pos >= n_ || l.slot[size_t(pos)] < 0)
    throw std::logic_error("MixedPrecisionKv::store: position " + std::to_string(pos) +
                           " was not given to begin()");
  const size_t at = size_t(l.slot[size_t(pos)]) * size_t(kv_dim_);
  for (int64_t i = 0; i < kv_dim_; ++i) {
    l.k16[at + size_t(i)] = fp32_to_fp16(k[i]);
    l.v16[at + size_t(i)] = fp32_to_fp16(v[i]);
  }
}

void MixedPrecisionKv::attach(int64_t layer, kernels::KvRows& k, kernels::KvRows& v) const {
  const Layer& l = layers_[size_t(layer)];
  if (!l.tracked || !k.is_int8() || !v.is_int8()) return;
  for (auto [rows, copies] : {std::pair{&k, &l.k16}, std::pair{&v, &l.v16}}) {
    rows->f16_slot = l.slot.data();
    rows->f16_rows = copies->data();
    rows->f16_slot_stride = kv_dim_;
    rows->f16_head_stride = head_dim_;
  }
}

WeightSums MixedPrecisionKv::weight_sums(int64_t layer) {
  Layer& l = layers_[size_t(layer)];
  if (!sums_wanted() || !l.tracked || l.capacity == 0) return {};
  return {l.sums.data(), l.capacity, l.slot.data()};
}

double MixedPrecisionKv::weight_sum(int64_t layer, int64_t pos) const {
  const Layer& l = layers_[size_t(layer)];
  if (!sums_wanted() || !l.tracked || pos < 0 || pos >= n_ || l.slot[size_t(pos)] < 0) return 0;
  double total = 0;  // kv heads in order: the same bits every time
  for (int64_t g = 0; g < n_kv_heads_; ++g)
    total += l.sums[size_t(g * l.capacity + l.slot[size_t(pos)])];
  return std::isnan(total) ? -std::numeric_limits<double>::infinity() : total;
}

void MixedPrecisionKv::settle() {
  const int64_t limit = n_ - opt_.window;  // positions below it have left the window
  const int64_t first = std::max(decided_, opt_.sinks);
  if (limit <= first) return;  // nothing left the window since the last decision
  decided_ = limit;
  // The heavy-hitter budget: heavy_fraction of the positions outside sinks and window.
  const auto budget = int64_t(std::floor(opt_.heavy_fraction * double(limit - opt_.sinks)));
  struct Ranked {
    double weight;
    int64_t pos;
  };
  // More weight first; on a tie the earlier position (a total order: the same choice every time).
  const auto better = [](const Ranked& a, const Ranked& b) {
    return a.weight > b.weight || (a.weight == b.weight && a.pos < b.pos);
  };
  std::vector<Ranked> held;
  for (size_t li = 0; li < layers_.size(); ++li) {
    Layer& l = layers_[li];
    if (!l.tracked) continue;
    // The heavy hitters so far and the positions that just left the window.
    held.clear();
    for (int64_t p = opt_.sinks; p < limit; ++p)
      if (l.slot[size_t(p)] >= 0) held.push_back({weight_sum(int64_t(li), p), p});
    if (int64_t(held.size()) > budget) {
      std::nth_element(held.begin(), held.begin() + budget, held.end(), better);
      for (auto it = held.begin() + budget; it != held.end(); ++it) drop_copy(l, it->pos);
    }
    if (int64_t(l.free.size()) > std::max<int64_t>(16, l.n_slots / 2)) compact(l);
  }
}

void MixedPrecisionKv::clear() {
  for (Layer& l : layers_) {
    const bool tracked = l.tracked;
    l = Layer{};
    l.tracked = tracked;
  }
  n_ = 0;
  decided_ = 0;
}

MixedPrecisionKv::Kept MixedPrecisionKv::kept(int64_t layer, int64_t pos) const {
  const Layer& l = layers_[size_t(layer)];
  if (pos < 0 || pos >= n_) throw std::out_of_range("MixedPrecisionKv::kept: no such position");
  if (!l.tracked || l.slot[size_t(pos)] < 0) return Kept::Int8;
  if (pos < opt_.sinks) return Kept::Sink;
  return pos >= decided_ ? Kept::Recent : Kept::Heavy;
}

int64_t MixedPrecisionKv::f16_positions(int64_t layer) const {
  const Layer& l = layers_[size_t(layer)];
  return l.tracked ? l.n_slots - int64_t(l.free.size()) : 0;
}

size_t MixedPrecisionKv::f16_bytes() const {
  size_t slots = 0;
  for (int64_t l = 0; l < int64_t(layers_.size()); ++l) slots += size_t(f16_positions(l));
  return slots * size_t(kv_dim_) * 2 * sizeof(uint16_t);
}

size_t MixedPrecisionKv::bytes() const {
  size_t b = 0;
  for (const Layer& l : layers_)
    b += l.slot.size() * sizeof(int32_t) + l.free.size() * sizeof(int32_t) +
         (l.k16.size() + l.v16.size()) * sizeof(uint16_t) + l.sums.size() * sizeof(float);
  return b;
}

size_t MixedPrecisionKv::index_bytes_per_token(const KvCacheOptions& opt, const KvDims& c) {
  int64_t tracked = 0;
  for (int64_t l = 0; l < c.n_layers; ++l) tracked += opt.fp16_layer(l) ? 0 : 1;
  return size_t(tracked) * sizeof(int32_t);
}

size_t MixedPrecisionKv::copy_bytes_per_token(const KvCacheOptions& opt, const KvDims& c) {
  const size_t per_layer = size_t(2 * c.kv_dim()) * sizeof(uint16_t) +
                           (opt.heavy_fraction > 0 ? size_t(c.n_kv_heads) * sizeof(float) : 0);
  return index_bytes_per_token(opt, c) / sizeof(int32_t) * per_layer;
}

}  // namespace shrike::kv
