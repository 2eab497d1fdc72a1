#include "optimize/artefact_cache.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/file_buffer.h"

namespace shrike::optimize {
namespace {

constexpr uint64_t kFnvOffset = 1469598103934665603ull, kFnvPrime = 1099511628211ull;

uint64_t fnv(uint64_t h, const char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) h = (h ^ uint8_t(p[i])) * kFnvPrime;
  return h;
}

std::string hex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
  return buf;
}

}  // namespace

std::string file_hash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path + ": cannot read");
  uint64_t h = kFnvOffset;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    h = fnv(h, buf.data(), size_t(in.gcount()));
  }
  return hex(h);
}

std::string artefact_key(const std::vector<std::string>& recipe,
                         const std::vector<std::string>& input_files) {
  uint64_t h = kFnvOffset;
  // A separator byte that cannot occur in arguments keeps {"ab","c"} apart from {"a","bc"}.
  for (const auto& part : recipe) h = fnv(fnv(h, part.data(), part.size()), "\0", 1);
  h = fnv(h, "\1", 1);
  for (const auto& f : input_files) {
    const std::string fh = file_hash(f);
    h = fnv(fnv(h, fh.data(), fh.size()), "\0", 1);
  }
  return hex(h);
}

ArtefactCache::ArtefactCache(std::string manifest_path) : path_(std::move(manifest_path)) {
  std::ifstream in(path_);
  if (!in) return;
  try {
    const auto j = nlohmann::json::parse(in);
    for (const auto& [k, v] : j.at("artefacts").items()) keys_[k] = v.get<std::string>();
  } catch (const std::exception&) {
    keys_.clear();
  }
}

bool ArtefactCache::fresh(const std::string& artefact_path, const std::string& key) const {
  const auto it = keys_.find(artefact_path);
  return it != keys_.end() && it->second == key && std::filesystem::exists(artefact_path);
}

void ArtefactCache::record(const std::string& artefact_path, const std::string& key) {
  keys_[artefact_path] = key;
  save();
}

void ArtefactCache::forget(const std::string& artefact_path) {
  if (keys_.erase(artefact_path)) save();
}

void ArtefactCache::save() const {
  nlohmann::json j;
  j["artefacts"] = keys_;
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp);
    out << j.dump(1) << "\n";
    if (!out) throw FileError(tmp + ": cannot write");
  }
  std::filesystem::rename(tmp, path_);
}

}  // namespace shrike::optimize
