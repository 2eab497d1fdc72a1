#include "safetensors/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <stdexcept>

namespace shrike::safetensors {
namespace {

using nlohmann::json;

// Every dtype the format defines, with its element size; only F32, F16 and BF16 map to a DType.
struct DtypeInfo {
  const char* name;
  uint64_t size;
  std::optional<DType> type;
};
constexpr DtypeInfo kDtypes[] = {
    {"F64", 8, std::nullopt},     {"F32", 4, DType::F32},       {"F16", 2, DType::F16},
    {"BF16", 2, DType::BF16},     {"I64", 8, std::nullopt},     {"I32", 4, std::nullopt},
    {"I16", 2, std::nullopt},     {"I8", 1, std::nullopt},      {"U64", 8, std::nullopt},
    {"U32", 4, std::nullopt},     {"U16", 2, std::nullopt},     {"U8", 1, std::nullopt},
    {"BOOL", 1, std::nullopt},    {"F8_E4M3", 1, std::nullopt}, {"F8_E5M2", 1, std::nullopt},
    {"F8_E8M0", 1, std::nullopt},
};

const DtypeInfo* find_dtype(std::string_view name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

// nlohmann's messages are one line already; make sure of it.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

// Parses JSON and reports the first key repeated within one object (nlohmann would silently keep
// the last, so a tensor listed twice would go unnoticed).
json parse_json(std::string_view text, const std::string& path, const char* what) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto cb = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == json::parse_event_t::key && !open_objects.empty()) {
      const std::string& k = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), cb);
  } catch (const json::exception& e) {
    throw FileError(path + ": " + what + " is not valid JSON: " + one_line(e.what()));
  }
  if (!duplicate.empty()) throw FileError(path + ": " + what + " names '" + duplicate + "' twice");
  return j;
}

// Elements of a shape, or nullopt when a dimension is negative, not an integer or the product
// overflows 2^62 (no real tensor comes close).
bool shape_elements(const json& shape, std::vector<int64_t>& dims, uint64_t& elements,
                    std::string& why) {
  elements = 1;
  for (const auto& d : shape) {
    if (!d.is_number_integer()) {
      why = "a shape entry that is not an integer";
      return false;
    }
    if (!d.is_number_unsigned()) {
      why = "a negative dimension";
      return false;
    }
    const uint64_t v = d.get<uint64_t>();
    if (v > (uint64_t(1) << 40) || (v != 0 && elements > (uint64_t(1) << 62) / v)) {
      why = "an absurd shape";
      return false;
    }
    elements *= v;
    dims.push_back(int64_t(v));
  }
  return true;
}

std::string range_string(const Tensor& t) {
  return std::to_string(t.offset) + ".." + std::to_string(t.offset + t.bytes);
}

}  // namespace

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string_view dtype_string(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    default:
      break;
  }
  throw std::invalid_argument("safetensors holds no " + std::string(dtype_name(t)) + " tensors");
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.file_ = MappedFile::open(path);
  const uint64_t size = f.file_.size();
  if (size < 8)
    throw FileError(path + ": truncated: " + std::to_string(size) +
                    " bytes, too short for the 8-byte header length");
  const uint64_t header_len = read_u64_le(f.file_.data());
  if (header_len > kMaxHeaderBytes)
    throw FileError(path + ": header length " + std::to_string(header_len) +
                    " is absurd (more than " + std::to_string(kMaxHeaderBytes) + " bytes)");
  if (header_len > size - 8)
    throw FileError(path + ": header length " + std::to_string(header_len) +
                    " runs past the end of the file (" + std::to_string(size) + " bytes)");
  const std::string_view text(reinterpret_cast<const char*>(f.file_.data() + 8), header_len);
  const json header = parse_json(text, path, "header");
  if (!header.is_object()) throw FileError(path + ": header is not a JSON object");

  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw FileError(path + ": __metadata__ is not an object of strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) throw FileError(path + ": __metadata__ '" + k + "' is not a string");
        f.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = path + ": tensor '" + name + "'";
    if (!entry.is_object()) throw FileError(where + " is not a JSON object");
    const auto dtype = entry.find("dtype");
    const auto shape = entry.find("shape");
    const auto offsets = entry.find("data_offsets");
    if (dtype == entry.end()) throw FileError(where + " has no dtype");
    if (shape == entry.end()) throw FileError(where + " has no shape");
    if (offsets == entry.end()) throw FileError(where + " has no data_offsets");
    if (!dtype->is_string()) throw FileError(where + ": dtype is not a string");
    if (!shape->is_array()) throw FileError(where + ": shape is not an array");
    if (!offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned())
      throw FileError(where + ": data_offsets is not an array of two non-negative integers");

    Tensor t;
    t.name = name;
    t.dtype = dtype->get<std::string>();
    const DtypeInfo* info = find_dtype(t.dtype);
    if (!info) throw FileError(where + " has unknown dtype '" + t.dtype + "'");
    t.type = info->type;
    uint64_t elements = 0;
    std::string why;
    if (!shape_elements(*shape, t.shape, elements, why)) throw FileError(where + " has " + why);
    const uint64_t begin = (*offsets)[0].get<uint64_t>(), end = (*offsets)[1].get<uint64_t>();
    if (end < begin)
      throw FileError(where + ": data_offsets end " + std::to_string(end) +
                      " is before their begin " + std::to_string(begin));
    if (end > data_size)
      throw FileError(where + ": data_offsets " + std::to_string(begin) + ".." +
                      std::to_string(end) + " run past the end of the data (" +
                      std::to_string(data_size) + " bytes)");
    if (end - begin != elements * info->size)
      throw FileError(where + " holds " + std::to_string(end - begin) + " bytes but " + t.dtype +
                      " x " + std::to_string(elements) + " elements needs " +
                      std::to_string(elements * info->size));
    t.offset = data_start + begin;
    t.bytes = end - begin;
    t.data = f.file_.data() + t.offset;
    f.index_[t.name] = f.tensors_.size();
    f.tensors_.push_back(std::move(t));
  }

  // Overlap: after sorting by offset, each non-empty tensor must start at or after the end of the
  // previous one.
  std::vector<size_t> order(f.tensors_.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return f.tensors_[a].offset < f.tensors_[b].offset; });
  const Tensor* prev = nullptr;
  for (size_t i : order) {
    const Tensor& t = f.tensors_[i];
    if (t.bytes == 0) continue;
    if (prev && t.offset < prev->offset + prev->bytes)
      throw FileError(path + ": tensors '" + prev->name + "' (bytes " + range_string(*prev) +
                      ") and '" + t.name + "' (bytes " + range_string(t) + ") overlap");
    prev = &t;
  }
  return f;
}

const Tensor* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

// ---- Checkpoint ----

Checkpoint Checkpoint::open_file(const std::string& path) {
  Checkpoint c;
  c.path_ = path;
  c.files_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(path)));
  for (const Tensor& t : c.files_[0]->tensors()) c.tensors_[t.name] = {&t, 0};
  return c;
}

Checkpoint Checkpoint::open_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single = fs::path(dir) / "model.safetensors";
  std::error_code ec;
  if (!fs::exists(index_path, ec)) {
    if (!fs::exists(single, ec))
      throw FileError(dir + ": no model.safetensors or model.safetensors.index.json");
    return open_file(single.string());
  }

  Checkpoint c;
  c.path_ = index_path.string();
  const std::string& path = c.path_;
  std::string text;
  {
    const MappedFile m = MappedFile::open(path);
    text.assign(reinterpret_cast<const char*>(m.data()), m.size());
  }
  const json index = parse_json(text, path, "index");
  if (!index.is_object()) throw FileError(path + ": index is not a JSON object");
  const auto map = index.find("weight_map");
  if (map == index.end() || !map->is_object()) throw FileError(path + ": no weight_map object");

  std::map<std::string, size_t> shard_index;
  for (const auto& [name, shard_json] : map->items()) {
    if (!shard_json.is_string())
      throw FileError(path + ": weight_map entry '" + name + "' is not a string");
    const std::string shard = shard_json.get<std::string>();
    // A file name inside the folder: an index must not reach elsewhere on the disk.
    if (shard.empty() || shard == "." || shard == ".." || shard.find('/') != std::string::npos ||
        shard.find('\\') != std::string::npos)
      throw FileError(path + ": weight_map entry '" + name + "' names '" + shard +
                      "', which is not a file name in the model folder");
    auto it = shard_index.find(shard);
    if (it == shard_index.end()) {
      const fs::path shard_path = fs::path(dir) / shard;
      if (!fs::is_regular_file(shard_path, ec))
        throw FileError(path + ": shard '" + shard + "' (holding '" + name + "') is missing");
      it = shard_index.emplace(shard, c.files_.size()).first;
      c.files_.push_back(
          std::make_unique<SafetensorsFile>(SafetensorsFile::open(shard_path.string())));
    }
    const Tensor* t = c.files_[it->second]->find(name);
    if (!t)
      throw FileError(path + ": tensor '" + name + "' is mapped to shard '" + shard +
                      "', which does not hold it");
    c.tensors_[name] = {t, it->second};
  }
  return c;
}

const Tensor* Checkpoint::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second.first;
}

const Tensor& Checkpoint::get(std::string_view name) const {
  const Tensor* t = find(name);
  if (!t) throw FileError(path_ + ": missing tensor '" + std::string(name) + "'");
  return *t;
}

const std::string& Checkpoint::file_of(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? path_ : files_[it->second.second]->path();
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : tensors_) out.push_back(name);
  return out;
}

// ---- writing ----

void Writer::add(const std::string& name, DType type, const std::vector<int64_t>& shape,
                 const void* data, size_t bytes) {
  const std::string_view ds = dtype_string(type);  // throws for quantised types
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (uint64_t(n) * uint64_t(dtype_block_bytes(type)) != bytes)
    throw std::invalid_argument("safetensors writer: tensor '" + name + "' is " + std::string(ds) +
                                " with " + std::to_string(n) + " elements but has " +
                                std::to_string(bytes) + " bytes");
  for (const auto& t : tensors_)
    if (t.name == name)
      throw std::invalid_argument("safetensors writer: tensor '" + name + "' added twice");
  const auto* p = static_cast<const uint8_t*>(data);
  tensors_.push_back({name, type, shape, std::vector<uint8_t>(p, p + bytes)});
}

void Writer::set_metadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
}

std::vector<uint8_t> Writer::bytes() const {
  std::vector<const Pending*> order;
  for (const auto& t : tensors_) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const Pending* a, const Pending* b) {
    return dtype_block_bytes(a->type) > dtype_block_bytes(b->type);
  });
  json header = json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const Pending* t : order) {
    header[t->name] = {{"dtype", std::string(dtype_string(t->type))},
                       {"shape", t->shape},
                       {"data_offsets", {offset, offset + t->data.size()}}};
    offset += t->data.size();
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  out.insert(out.end(), text.begin(), text.end());
  for (const Pending* t : order) out.insert(out.end(), t->data.begin(), t->data.end());
  return out;
}

namespace {
void write_bytes(const std::string& path, const void* data, size_t n) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw FileError(path + ": cannot create: " + std::strerror(errno));
  const bool ok = std::fwrite(data, 1, n, f) == n;
  if (std::fclose(f) != 0 || !ok) throw FileError(path + ": cannot write");
}
}  // namespace

void Writer::write(const std::string& path) const {
  const std::vector<uint8_t> b = bytes();
  write_bytes(path, b.data(), b.size());
}

void write_index(const std::string& path, const std::map<std::string, std::string>& weight_map) {
  const json j = {{"metadata", json::object()}, {"weight_map", weight_map}};
  const std::string text = j.dump(2);
  write_bytes(path, text.data(), text.size());
}

}  // namespace shrike::safetensors
