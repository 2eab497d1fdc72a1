// GGUF v3 writer. The layout is the standard one llama.cpp and gguf-py produce: header, metadata
// in insertion order, tensor infos in insertion order, zero padding to the alignment, then each
// tensor's data padded to the alignment so every offset is a multiple of it.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "gguf/gguf.h"

namespace shrike::gguf {

namespace {

constexpr uint64_t kDefaultAlignment = 32;

uint64_t align_up(uint64_t n, uint64_t a) {
  return (n + a - 1) / a * a;
}

// Little-endian byte sink.
class Buffer {
 public:
  template <typename T>
  void put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    if constexpr (std::endian::native == std::endian::big) std::reverse(b, b + sizeof(T));
    bytes.insert(bytes.end(), b, b + sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  void pad_to(uint64_t align) { bytes.resize(align_up(bytes.size(), align), 0); }

  std::vector<uint8_t> bytes;
};

// One scalar of type t, from the field a reader fills for it.
void put_scalar(Buffer& b, ValueType t, int64_t i, uint64_t u, double f) {
  switch (t) {
    case ValueType::UInt8:
      b.put<uint8_t>(uint8_t(u));
      break;
    case ValueType::Int8:
      b.put<int8_t>(int8_t(i));
      break;
    case ValueType::UInt16:
      b.put<uint16_t>(uint16_t(u));
      break;
    case ValueType::Int16:
      b.put<int16_t>(int16_t(i));
      break;
    case ValueType::UInt32:
      b.put<uint32_t>(uint32_t(u));
      break;
    case ValueType::Int32:
      b.put<int32_t>(int32_t(i));
      break;
    case ValueType::UInt64:
      b.put<uint64_t>(u);
      break;
    case ValueType::Int64:
      b.put<int64_t>(i);
      break;
    case ValueType::Float32:
      b.put<float>(float(f));
      break;
    case ValueType::Float64:
      b.put<double>(f);
      break;
    case ValueType::Bool:
      b.put<uint8_t>(i ? 1 : 0);
      break;
    default:
      throw std::logic_error("GgufWriter: not a scalar type");
  }
}

void put_value(Buffer& b, const Value& v) {
  b.put<uint32_t>(uint32_t(v.type));
  if (v.type == ValueType::String) {
    b.put_string(v.s);
    return;
  }
  if (v.type != ValueType::Array) {
    put_scalar(b, v.type, v.i, v.u, v.f);
    return;
  }
  b.put<uint32_t>(uint32_t(v.elem_type));
  switch (v.elem_type) {
    case ValueType::String:
      b.put<uint64_t>(v.strings.size());
      for (const std::string& s : v.strings) b.put_string(s);
      return;
    case ValueType::Float32:
    case ValueType::Float64:
      b.put<uint64_t>(v.floats.size());
      for (double f : v.floats) put_scalar(b, v.elem_type, 0, 0, f);
      return;
    case ValueType::Array:  // a reader keeps no contents for arrays of arrays
      throw std::invalid_argument("GgufWriter: arrays of arrays cannot be written");
    default:  // integers and bools: a reader keeps every element as int64
      b.put<uint64_t>(v.ints.size());
      for (int64_t x : v.ints) put_scalar(b, v.elem_type, x, uint64_t(x), 0);
      return;
  }
}

}  // namespace

void GgufWriter::set_value(const std::string& key, Value v) {
  for (Entry& e : metadata_)
    if (e.key == key) {
      e.value = std::move(v);
      return;
    }
  metadata_.push_back({key, std::move(v)});
}

void GgufWriter::set_uint32(const std::string& key, uint32_t v) {
  Value x;
  x.type = ValueType::UInt32;
  x.u = v;
  set_value(key, std::move(x));
}

void GgufWriter::set_int32(const std::string& key, int32_t v) {
  Value x;
  x.type = ValueType::Int32;
  x.i = v;
  set_value(key, std::move(x));
}

void GgufWriter::set_uint64(const std::string& key, uint64_t v) {
  Value x;
  x.type = ValueType::UInt64;
  x.u = v;
  set_value(key, std::move(x));
}

void GgufWriter::set_float32(const std::string& key, float v) {
  Value x;
  x.type = ValueType::Float32;
  x.f = v;
  set_value(key, std::move(x));
}

void GgufWriter::set_bool(const std::string& key, bool v) {
  Value x;
  x.type = ValueType::Bool;
  x.i = v ? 1 : 0;
  set_value(key, std::move(x));
}

void GgufWriter::set_string(const std::string& key, const std::string& v) {
  Value x;
  x.type = ValueType::String;
  x.s = v;
  set_value(key, std::move(x));
}

void GgufWriter::set_string_array(const std::string& key, const std::vector<std::string>& v) {
  Value x;
  x.type = ValueType::Array;
  x.elem_type = ValueType::String;
  x.strings = v;
  x.array_size = v.size();
  set_value(key, std::move(x));
}

void GgufWriter::set_float32_array(const std::string& key, const std::vector<float>& v) {
  Value x;
  x.type = ValueType::Array;
  x.elem_type = ValueType::Float32;
  x.floats.assign(v.begin(), v.end());
  x.array_size = v.size();
  set_value(key, std::move(x));
}

void GgufWriter::set_int32_array(const std::string& key, const std::vector<int32_t>& v) {
  Value x;
  x.type = ValueType::Array;
  x.elem_type = ValueType::Int32;
  x.ints.assign(v.begin(), v.end());
  x.array_size = v.size();
  set_value(key, std::move(x));
}

// Caller mistakes are std::invalid_argument, not FileError: no file is involved yet.
void GgufWriter::add_tensor(const std::string& name, DType type, const std::vector<int64_t>& dims,
                            const void* data, size_t bytes) {
  const std::string what = "GgufWriter::add_tensor '" + name + "': ";
  if (name.empty()) throw std::invalid_argument(what + "empty name");
  for (const PendingTensor& t : tensors_)
    if (t.name == name) throw std::invalid_argument(what + "duplicate name");
  if (!dtype_is_known(uint32_t(type))) throw std::invalid_argument(what + "unknown type");
  if (dims.empty() || dims.size() > 4) throw std::invalid_argument(what + "needs 1 to 4 dims");
  int64_t elements = 1;
  for (int64_t d : dims)
    if (d <= 0 || __builtin_mul_overflow(elements, d, &elements))
      throw std::invalid_argument(what + "bad dimension");
  if (dims[0] % dtype_block_elems(type) != 0)
    throw std::invalid_argument(what + "ne0 is not a multiple of the block size");
  const uint64_t expected =
      uint64_t(elements / dtype_block_elems(type)) * uint64_t(dtype_block_bytes(type));
  if (bytes != expected)
    throw std::invalid_argument(what + "got " + std::to_string(bytes) + " bytes, expected " +
                                std::to_string(expected));
  const auto* p = static_cast<const uint8_t*>(data);
  tensors_.push_back({name, type, dims, std::vector<uint8_t>(p, p + bytes)});
}

uint64_t GgufWriter::alignment() const {
  for (const Entry& e : metadata_)
    if (e.key == "general.alignment") {
      if (e.value.type != ValueType::UInt32 || e.value.u == 0 || !std::has_single_bit(e.value.u))
        throw std::invalid_argument(
            "GgufWriter: general.alignment must be a uint32 non-zero power of two");
      return e.value.u;
    }
  return kDefaultAlignment;
}

void GgufWriter::write(const std::string& path) const {
  const uint64_t align = alignment();
  Buffer b;
  b.bytes.insert(b.bytes.end(), {'G', 'G', 'U', 'F'});
  b.put<uint32_t>(3);
  b.put<uint64_t>(tensors_.size());
  b.put<uint64_t>(metadata_.size());
  for (const Entry& e : metadata_) {
    b.put_string(e.key);
    put_value(b, e.value);
  }
  uint64_t offset = 0;  // relative to the data section
  for (const PendingTensor& t : tensors_) {
    b.put_string(t.name);
    b.put<uint32_t>(uint32_t(t.dims.size()));
    for (int64_t d : t.dims) b.put<uint64_t>(uint64_t(d));
    b.put<uint32_t>(uint32_t(t.type));
    b.put<uint64_t>(offset);
    offset = align_up(offset + t.data.size(), align);
  }
  // Like ggml's gguf writer, pad even when there are no tensors: the data section is aligned.
  b.pad_to(align);

  // The header is assembled in memory; tensor data goes straight from the pending copies to the
  // file so a large model is not held twice.
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw FileError(path + ": cannot create: " + std::strerror(errno));
  static const uint8_t kZeros[256] = {};
  bool ok = std::fwrite(b.bytes.data(), 1, b.bytes.size(), f) == b.bytes.size();
  for (const PendingTensor& t : tensors_) {
    if (!ok) break;
    const size_t pad = size_t(align_up(t.data.size(), align) - t.data.size());
    ok = std::fwrite(t.data.data(), 1, t.data.size(), f) == t.data.size();
    for (size_t left = pad; ok && left > 0;) {
      const size_t n = std::min(left, sizeof(kZeros));
      ok = std::fwrite(kZeros, 1, n, f) == n;
      left -= n;
    }
  }
  int err = ok ? 0 : errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) throw FileError(path + ": cannot write: " + std::strerror(err));
}

}  // namespace shrike::gguf
