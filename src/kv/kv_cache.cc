#include "kv/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "core/dtype.h"

namespace shrike::kv {

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

}  // namespace shrike::kv
