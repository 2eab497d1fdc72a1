#include "model/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "core/dtype.h"

namespace shrike::model {

using kernels::KvFormat;

// ---- Options ---------------------------------------------------------------------------------

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::F32:
      return "f32";
    case KvType::F16:
      return "f16";
    case KvType::Int8:
      return "int8";
    case KvType::Int8Mixed:
      return "int8-mixed";
  }
  return "?";
}

std::optional<KvType> kv_type_from_name(std::string_view name) {
  for (KvType t : {KvType::F32, KvType::F16, KvType::Int8, KvType::Int8Mixed})
    if (name == kv_type_name(t)) return t;
  return std::nullopt;
}

void KvCacheOptions::validate(int64_t n_layers) const {
  if (sinks < 0) throw std::invalid_argument("KV sinks must be >= 0, got " + std::to_string(sinks));
  if (window < 0)
    throw std::invalid_argument("KV window must be >= 0, got " + std::to_string(window));
  if (!(heavy_fraction >= 0 && heavy_fraction <= 1))
    throw std::invalid_argument("KV heavy-hitter fraction must be in [0, 1], got " +
                                std::to_string(heavy_fraction));
  if (!fp16_layers.empty() && !mixed())
    throw std::invalid_argument(std::string("f16 KV layers apply to the int8-mixed cache, not ") +
                                kv_type_name(type));
  for (int64_t l : fp16_layers)
    if (l < 0 || l >= n_layers)
      throw std::invalid_argument("f16 KV layer " + std::to_string(l) + " outside the model's " +
                                  std::to_string(n_layers) + " layers");
}

bool KvCacheOptions::fp16_layer(int64_t layer) const {
  return mixed() && std::find(fp16_layers.begin(), fp16_layers.end(), layer) != fp16_layers.end();
}

std::vector<KvFormat> KvCacheOptions::layer_formats(int64_t n_layers) const {
  std::vector<KvFormat> f(size_t(std::max<int64_t>(0, n_layers)));
  for (int64_t l = 0; l < n_layers; ++l) {
    switch (type) {
      case KvType::F32:
        f[size_t(l)] = KvFormat::F32;
        break;
      case KvType::F16:
        f[size_t(l)] = KvFormat::F16;
        break;
      case KvType::Int8:
        f[size_t(l)] = KvFormat::Int8;
        break;
      case KvType::Int8Mixed:
        f[size_t(l)] = fp16_layer(l) ? KvFormat::F16 : KvFormat::Int8;
        break;
    }
  }
  return f;
}

std::string KvCacheOptions::describe() const {
  std::ostringstream s;
  s << kv_type_name(type);
  if (!mixed()) return s.str();
  s << " (sinks " << sinks << ", window " << window << ", heavy " << heavy_fraction * 100 << "%";
  if (!fp16_layers.empty()) {
    s << ", f16 layers ";
    for (size_t i = 0; i < fp16_layers.size(); ++i) s << (i ? "," : "") << fp16_layers[i];
  }
  s << ")";
  return s.str();
}

// ---- MixedPrecisionKv ------------------------------------------------------------------------

MixedPrecisionKv::MixedPrecisionKv(const KvCacheOptions& opt, const ModelConfig& c)
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

void MixedPrecisionKv::begin(int64_t pos0, int64_t n) {
  if (pos0 < 0 || n < 0) throw std::out_of_range("MixedPrecisionKv::begin: negative position");
  // Forget what is rewritten.
  const int64_t keep = std::min(pos0, n_);
  for (Layer& l : layers_) {
    if (!l.tracked) continue;
    for (int64_t p = keep; p < n_; ++p) drop_copy(l, p);
  }
  decided_ = std::min(decided_, keep);
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

size_t MixedPrecisionKv::index_bytes_per_token(const KvCacheOptions& opt, const ModelConfig& c) {
  int64_t tracked = 0;
  for (int64_t l = 0; l < c.n_layers; ++l) tracked += opt.fp16_layer(l) ? 0 : 1;
  return size_t(tracked) * sizeof(int32_t);
}

size_t MixedPrecisionKv::copy_bytes_per_token(const KvCacheOptions& opt, const ModelConfig& c) {
  const size_t per_layer = size_t(2 * c.kv_dim()) * sizeof(uint16_t) +
                           (opt.heavy_fraction > 0 ? size_t(c.n_kv_heads) * sizeof(float) : 0);
  return index_bytes_per_token(opt, c) / sizeof(int32_t) * per_layer;
}

// ---- ContiguousKvCache -----------------------------------------------------------------------

ContiguousKvCache::ContiguousKvCache(int64_t n_layers, int64_t capacity, int64_t n_kv_heads,
                                     int64_t head_dim)
    : capacity_(capacity), n_kv_heads_(n_kv_heads), head_dim_(head_dim) {
  init(n_layers);
}

ContiguousKvCache::ContiguousKvCache(const ModelConfig& c, int64_t capacity,
                                     const KvCacheOptions& opt)
    : opt_(opt), capacity_(capacity), n_kv_heads_(c.n_kv_heads), head_dim_(c.head_dim) {
  opt.validate(c.n_layers);
  if (capacity < 0) throw std::invalid_argument("KV cache capacity must be >= 0");
  init(c.n_layers);
  if (opt.mixed()) mixed_.emplace(opt, c);
}

void ContiguousKvCache::init(int64_t n_layers) {
  const std::vector<KvFormat> formats = opt_.layer_formats(n_layers);
  const size_t rows = size_t(capacity_) * size_t(n_kv_heads_);  // (position, kv head) pairs
  const size_t elems = rows * size_t(head_dim_);
  layers_.resize(formats.size());
  for (size_t l = 0; l < formats.size(); ++l) {
    Layer& y = layers_[l];
    y.format = formats[l];
    size_t bytes = 0, row_bytes = 0;
    switch (y.format) {
      case KvFormat::F32:
        bytes = elems * 4, row_bytes = size_t(head_dim_) * 4;
        break;
      case KvFormat::F16:
        bytes = elems * 2, row_bytes = size_t(head_dim_) * 2;
        break;
      case KvFormat::Int8:  // quants, padded to 4 bytes, then the scales
        bytes = (elems + 3) / 4 * 4 + rows * 4, row_bytes = size_t(head_dim_) + 4;
        break;
    }
    per_token_ += 2 * size_t(n_kv_heads_) * row_bytes;
    y.k = AlignedArray<unsigned char>(bytes);
    y.v = AlignedArray<unsigned char>(bytes);
    // Zeroed: attention never reads indeterminate memory (0 bits are 0.0 in every format).
    if (bytes > 0) {
      std::memset(y.k.data(), 0, bytes);
      std::memset(y.v.data(), 0, bytes);
    }
    const unsigned char* k = y.k.data();
    const unsigned char* v = y.v.data();
    y.kf = reinterpret_cast<const float*>(k);
    y.vf = reinterpret_cast<const float*>(v);
    y.kh = reinterpret_cast<const uint16_t*>(k);
    y.vh = reinterpret_cast<const uint16_t*>(v);
    y.kq = reinterpret_cast<const int8_t*>(k);
    y.vq = reinterpret_cast<const int8_t*>(v);
    y.quant_bytes = (elems + 3) / 4 * 4;
    y.ks = reinterpret_cast<const float*>(k + y.quant_bytes);
    y.vs = reinterpret_cast<const float*>(v + y.quant_bytes);
  }
}

void ContiguousKvCache::begin_forward(int64_t pos0, int64_t n) {
  n_positions_ = pos0 + n;
  if (mixed_) mixed_->begin(pos0, n);
}

void ContiguousKvCache::store(int64_t layer, int64_t pos, const float* k, const float* v) {
  Layer& y = layers_[size_t(layer)];
  const size_t head_stride = size_t(capacity_) * size_t(head_dim_);
  const size_t at = size_t(pos) * size_t(head_dim_);
  switch (y.format) {
    case KvFormat::F32: {
      auto* kd = reinterpret_cast<float*>(y.k.data()) + at;
      auto* vd = reinterpret_cast<float*>(y.v.data()) + at;
      for (int64_t h = 0; h < n_kv_heads_; ++h) {
        std::copy(k + h * head_dim_, k + (h + 1) * head_dim_, kd + size_t(h) * head_stride);
        std::copy(v + h * head_dim_, v + (h + 1) * head_dim_, vd + size_t(h) * head_stride);
      }
      break;
    }
    case KvFormat::F16: {
      auto* kd = reinterpret_cast<uint16_t*>(y.k.data()) + at;
      auto* vd = reinterpret_cast<uint16_t*>(y.v.data()) + at;
      for (int64_t h = 0; h < n_kv_heads_; ++h)
        for (int64_t i = 0; i < head_dim_; ++i) {
          kd[size_t(h) * head_stride + size_t(i)] = fp32_to_fp16(k[h * head_dim_ + i]);
          vd[size_t(h) * head_stride + size_t(i)] = fp32_to_fp16(v[h * head_dim_ + i]);
        }
      break;
    }
    case KvFormat::Int8: {
      auto* kd = reinterpret_cast<int8_t*>(y.k.data()) + at;
      auto* vd = reinterpret_cast<int8_t*>(y.v.data()) + at;
      auto* ks = reinterpret_cast<float*>(y.k.data() + y.quant_bytes) + pos;
      auto* vs = reinterpret_cast<float*>(y.v.data() + y.quant_bytes) + pos;
      for (int64_t h = 0; h < n_kv_heads_; ++h) {
        ks[h * capacity_] =
            kernels::quantize_int8_row(k + h * head_dim_, head_dim_, kd + size_t(h) * head_stride);
        vs[h * capacity_] =
            kernels::quantize_int8_row(v + h * head_dim_, head_dim_, vd + size_t(h) * head_stride);
      }
      break;
    }
  }
  if (mixed_) mixed_->store(layer, pos, k, v);
}

kernels::KvRows ContiguousKvCache::rows(int64_t layer, bool values) const {
  const Layer& y = layers_[size_t(layer)];
  kernels::KvRows r{nullptr, capacity_, head_dim_, capacity_ * head_dim_};
  switch (y.format) {
    case KvFormat::F32:
      r.blocks = values ? &y.vf : &y.kf;
      break;
    case KvFormat::F16:
      r.half_blocks = values ? &y.vh : &y.kh;
      break;
    case KvFormat::Int8:
      r.int8_blocks = values ? &y.vq : &y.kq;
      r.scale_blocks = values ? &y.vs : &y.ks;
      r.scale_row_stride = 1;
      r.scale_head_stride = capacity_;
      break;
  }
  return r;
}

kernels::KvRows ContiguousKvCache::keys(int64_t layer) const {
  kernels::KvRows k = rows(layer, false);
  if (mixed_) {
    kernels::KvRows v = rows(layer, true);
    mixed_->attach(layer, k, v);
  }
  return k;
}

kernels::KvRows ContiguousKvCache::values(int64_t layer) const {
  kernels::KvRows v = rows(layer, true);
  if (mixed_) {
    kernels::KvRows k = rows(layer, false);
    mixed_->attach(layer, k, v);
  }
  return v;
}

WeightSums ContiguousKvCache::attention_weight_sums(int64_t layer) {
  return mixed_ ? mixed_->weight_sums(layer) : WeightSums{};
}

void ContiguousKvCache::end_forward(bool logits) {
  if (mixed_ && logits) mixed_->settle();
}

size_t ContiguousKvCache::bytes() const {
  size_t b = 0;
  for (const Layer& y : layers_) b += y.k.size() + y.v.size();
  return b + (mixed_ ? mixed_->bytes() : 0);
}

size_t ContiguousKvCache::bytes_in_use() const {
  return size_t(n_positions_) * per_token_ + (mixed_ ? mixed_->bytes() : 0);
}

double ContiguousKvCache::bytes_per_token() const {
  return n_positions_ > 0 ? double(bytes_in_use()) / double(n_positions_) : 0.0;
}

}  // namespace shrike::model
