// GGUF reader. The file is untrusted input: every count, length, type id, dimension and offset
// is checked against the bytes actually present before it is used, so a corrupt or hostile file
// yields one FileError line and never a crash, an out-of-bounds read or an unbounded allocation.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <string>

#include "gguf/gguf.h"

namespace shrike::gguf {

namespace {

constexpr uint32_t kMaxDims = 4;
// Arrays of arrays recurse; a bound keeps a file of nested headers from exhausting the stack.
constexpr int kMaxArrayDepth = 8;
// Smallest encodings, used to bound counts by the bytes left before allocating anything:
// a metadata pair is key length + key type + a one-byte value; a tensor info is name length +
// n_dims + type + offset (an empty name and no dims would still need that much).
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;

// Untrusted names go into one-line messages: escape control bytes and cap the length.
std::string printable(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 80; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += char(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (s.size() > 80) out += "...";
  return out;
}

// Size in bytes of a fixed-size scalar, or 0 for string/array.
uint64_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::UInt8:
    case ValueType::Int8:
    case ValueType::Bool:
      return 1;
    case ValueType::UInt16:
    case ValueType::Int16:
      return 2;
    case ValueType::UInt32:
    case ValueType::Int32:
    case ValueType::Float32:
      return 4;
    case ValueType::UInt64:
    case ValueType::Int64:
    case ValueType::Float64:
      return 8;
    case ValueType::String:
    case ValueType::Array:
      return 0;
  }
  return 0;
}

bool is_integer(ValueType t) {
  switch (t) {
    case ValueType::UInt8:
    case ValueType::Int8:
    case ValueType::UInt16:
    case ValueType::Int16:
    case ValueType::UInt32:
    case ValueType::Int32:
    case ValueType::UInt64:
    case ValueType::Int64:
      return true;
    default:
      return false;
  }
}

bool is_unsigned(ValueType t) {
  return t == ValueType::UInt8 || t == ValueType::UInt16 || t == ValueType::UInt32 ||
         t == ValueType::UInt64;
}

bool is_float(ValueType t) {
  return t == ValueType::Float32 || t == ValueType::Float64;
}

// "string", "array of int32", ... for "is X, expected Y" messages.
std::string describe(const Value& v) {
  if (v.type == ValueType::Array) return "array of " + std::string(value_type_name(v.elem_type));
  return std::string(value_type_name(v.type));
}

}  // namespace

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UInt8:
      return "uint8";
    case ValueType::Int8:
      return "int8";
    case ValueType::UInt16:
      return "uint16";
    case ValueType::Int16:
      return "int16";
    case ValueType::UInt32:
      return "uint32";
    case ValueType::Int32:
      return "int32";
    case ValueType::Float32:
      return "float32";
    case ValueType::Bool:
      return "bool";
    case ValueType::String:
      return "string";
    case ValueType::Array:
      return "array";
    case ValueType::UInt64:
      return "uint64";
    case ValueType::Int64:
      return "int64";
    case ValueType::Float64:
      return "float64";
  }
  return "unknown";
}

int64_t TensorInfo::elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // the reader has already rejected products that overflow
  return n;
}

// Parses the header, metadata and tensor table through a bounds-checked cursor. `what`
// strings describe the item being read so a truncation message says where the file broke.
class Reader {
 public:
  explicit Reader(GgufFile& f) : f_(f), data_(f.file_.data()), size_(f.file_.size()) {}

  void parse() {
    read_header();
    read_metadata();
    read_alignment();
    read_tensor_infos();
    place_tensors();
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const { throw FileError(f_.path() + ": " + msg); }

  uint64_t left() const { return size_ - pos_; }

  // `what` + `suffix` name the item; they are joined only on failure, keeping the hot path (large
  // vocabulary arrays) free of string building.
  void need(uint64_t n, const std::string& what, const char* suffix = "") const {
    if (n > left())
      fail("truncated: " + what + suffix + " needs " + std::to_string(n) + " bytes at offset " +
           std::to_string(pos_) + ", file is " + std::to_string(size_) + " bytes");
  }

  // Little-endian load; GGUF is little-endian and so is every host this engine targets, but
  // assembling bytes keeps the reader correct (and UB-free on unaligned offsets) regardless.
  template <typename T>
  T read(const std::string& what, const char* suffix = "") {
    need(sizeof(T), what, suffix);
    std::make_unsigned_t<T> u = 0;
    if constexpr (sizeof(T) == 1) {
      u = data_[pos_];
    } else {
      for (size_t i = 0; i < sizeof(T); ++i)
        u |= std::make_unsigned_t<T>(data_[pos_ + i]) << (8 * i);
    }
    pos_ += sizeof(T);
    T v;
    std::memcpy(&v, &u, sizeof(T));
    return v;
  }

  std::string read_string(const std::string& what) {
    const uint64_t len = read<uint64_t>(what, " string length");
    if (len > left()) need(len, what + " (" + std::to_string(len) + "-byte string)");
    std::string s(reinterpret_cast<const char*>(data_ + pos_), size_t(len));
    pos_ += len;
    return s;
  }

  ValueType read_value_type(const std::string& what, const std::string& owner) {
    const uint32_t t = read<uint32_t>(what);
    if (t > uint32_t(ValueType::Float64))
      fail(owner + " has unknown value type " + std::to_string(t));
    return ValueType(t);
  }

  void read_header() {
    need(4, "magic");
    if (std::memcmp(data_, "GGUF", 4) != 0)
      fail("not a GGUF file (magic '" + printable({reinterpret_cast<const char*>(data_), 4}) +
           "')");
    pos_ = 4;
    const uint32_t version = read<uint32_t>("version");
    if (version == 1) fail("unsupported GGUF version 1 (v1 used 32-bit counts; reconvert it)");
    if (version != 2 && version != 3) {
      // A big-endian GGUF reads as a huge version; say so instead of a bare number.
      const bool swapped = __builtin_bswap32(version) == 2 || __builtin_bswap32(version) == 3;
      fail("unsupported GGUF version " + std::to_string(version) +
           (swapped ? " (big-endian file; only little-endian is supported)" : ""));
    }
    f_.version_ = version;
    tensor_count_ = read<uint64_t>("tensor count");
    kv_count_ = read<uint64_t>("metadata count");
    // Bound both counts by the smallest encoding of each item before anything is reserved.
    if (kv_count_ > left() / kMinKvBytes)
      fail("absurd metadata count " + std::to_string(kv_count_) + " for a file of " +
           std::to_string(size_) + " bytes (truncated or corrupt)");
    if (tensor_count_ > (left() - kv_count_ * kMinKvBytes) / kMinTensorInfoBytes)
      fail("absurd tensor count " + std::to_string(tensor_count_) + " for a file of " +
           std::to_string(size_) + " bytes (truncated or corrupt)");
  }

  void read_metadata() {
    f_.key_order_.reserve(size_t(kv_count_));
    for (uint64_t k = 0; k < kv_count_; ++k) {
      const std::string where = "metadata key " + std::to_string(k);
      std::string key = read_string(where);
      const std::string owner = "metadata '" + printable(key) + "'";
      if (f_.metadata_.count(key)) fail("duplicate " + owner);
      Value v;
      v.type = read_value_type(owner + " type", owner);
      read_value(v, owner, 0);
      f_.key_order_.push_back(key);
      f_.metadata_.emplace(std::move(key), std::move(v));
    }
  }

  // Reads a scalar of type t into v (integers to i/u, floats to f, strings to s).
  // `what` names the value in truncation messages.
  void read_scalar(ValueType t, Value& v, const std::string& what) {
    switch (t) {
      case ValueType::UInt8:
        v.u = read<uint8_t>(what);
        break;
      case ValueType::Int8:
        v.i = read<int8_t>(what);
        break;
      case ValueType::UInt16:
        v.u = read<uint16_t>(what);
        break;
      case ValueType::Int16:
        v.i = read<int16_t>(what);
        break;
      case ValueType::UInt32:
        v.u = read<uint32_t>(what);
        break;
      case ValueType::Int32:
        v.i = read<int32_t>(what);
        break;
      case ValueType::UInt64:
        v.u = read<uint64_t>(what);
        break;
      case ValueType::Int64:
        v.i = read<int64_t>(what);
        break;
      case ValueType::Float32:
        v.f = std::bit_cast<float>(read<uint32_t>(what));
        break;
      case ValueType::Float64:
        v.f = std::bit_cast<double>(read<uint64_t>(what));
        break;
      case ValueType::Bool: {
        const uint8_t b = read<uint8_t>(what);
        if (b > 1) fail(what + " is an invalid bool " + std::to_string(b));
        v.i = b;
        break;
      }
      case ValueType::String:
        v.s = read_string(what);
        break;
      case ValueType::Array:
        break;  // handled by read_value
    }
  }

  void read_value(Value& v, const std::string& owner, int depth) {
    if (v.type != ValueType::Array) return read_scalar(v.type, v, owner + " value");
    if (depth >= kMaxArrayDepth)
      fail(owner + " has arrays nested deeper than " + std::to_string(kMaxArrayDepth));
    v.elem_type = read_value_type(owner + " array type", owner);
    const uint64_t count = read<uint64_t>(owner + " array count");
    v.array_size = count;
    // Strings need at least their 8-byte length, nested arrays their type and count.
    const uint64_t min_elem = v.elem_type == ValueType::String  ? 8
                              : v.elem_type == ValueType::Array ? 12
                                                                : scalar_size(v.elem_type);
    if (count > left() / min_elem)
      fail(owner + " has absurd array count " + std::to_string(count) + " (" +
           std::to_string(left()) + " bytes left in the file)");
    const ValueType et = v.elem_type;
    if (is_integer(et) || et == ValueType::Bool) v.ints.reserve(size_t(count));
    if (is_float(et)) v.floats.reserve(size_t(count));
    if (et == ValueType::String) v.strings.reserve(size_t(count));
    const std::string elem_what = owner + " array element";
    for (uint64_t j = 0; j < count; ++j) {
      Value e;
      e.type = et;
      if (et == ValueType::Array) {
        read_value(e, owner, depth + 1);  // validated; contents dropped
        continue;
      }
      read_scalar(et, e, elem_what);
      if (is_unsigned(et)) {
        v.ints.push_back(int64_t(e.u));  // uint64 above INT64_MAX wraps; get_int_array rejects it
      } else if (is_integer(et) || et == ValueType::Bool) {
        v.ints.push_back(e.i);
      } else if (is_float(et)) {
        v.floats.push_back(e.f);
      } else {
        v.strings.push_back(std::move(e.s));
      }
    }
  }

  void read_alignment() {
    const Value* a = f_.find("general.alignment");
    if (!a) return;
    if (a->type != ValueType::UInt32)
      fail("metadata 'general.alignment' is " + describe(*a) + ", expected uint32");
    if (a->u == 0 || !std::has_single_bit(a->u))
      fail("metadata 'general.alignment' is " + std::to_string(a->u) +
           ", expected a non-zero power of two");
    f_.alignment_ = a->u;
  }

  void read_tensor_infos() {
    f_.tensors_.reserve(size_t(tensor_count_));
    for (uint64_t t = 0; t < tensor_count_; ++t) {
      TensorInfo ti;
      ti.name = read_string("tensor info " + std::to_string(t) + " name");
      const std::string owner = "tensor '" + printable(ti.name) + "'";
      if (ti.name.empty()) fail("tensor " + std::to_string(t) + " has an empty name");
      if (f_.tensor_index_.count(ti.name)) fail("duplicate " + owner);
      const uint32_t n_dims = read<uint32_t>(owner + " n_dims");
      if (n_dims == 0 || n_dims > kMaxDims)
        fail(owner + " has " + std::to_string(n_dims) + " dimensions (expected 1 to 4)");
      int64_t elements = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        const uint64_t ne = read<uint64_t>(owner + " dimension " + std::to_string(d));
        if (ne == 0 || ne > uint64_t(std::numeric_limits<int64_t>::max()))
          fail(owner + " has absurd dimension " + std::to_string(d) + " = " + std::to_string(ne));
        if (__builtin_mul_overflow(elements, int64_t(ne), &elements))
          fail(owner + " has absurd dimensions: the element count overflows int64");
        ti.dims.push_back(int64_t(ne));
      }
      const uint32_t type = read<uint32_t>(owner + " type");
      if (!dtype_is_known(type))
        fail(owner + " has unknown type " + std::to_string(type) +
             " (this build reads f32, f16, bf16, q8_0, q4_0, q2_K..q6_K, iq4_nl, iq4_xs and "
             "shrike's own types)");
      ti.type = DType(type);
      const int64_t block = dtype_block_elems(ti.type);
      if (ti.dims[0] % block != 0)
        fail(owner + " has ne0 " + std::to_string(ti.dims[0]) +
             ", not a multiple of the block size " + std::to_string(block) + " of " +
             std::string(dtype_name(ti.type)));
      // Bytes = blocks * block bytes; blocks fits in int64, the product may not.
      uint64_t bytes = 0;
      if (__builtin_mul_overflow(uint64_t(elements / block), uint64_t(dtype_block_bytes(ti.type)),
                                 &bytes))
        fail(owner + " has absurd dimensions: its size overflows");
      ti.bytes = bytes;
      ti.offset = read<uint64_t>(owner + " offset");  // relative for now; see place_tensors
      f_.tensor_index_.emplace(ti.name, f_.tensors_.size());
      f_.tensors_.push_back(std::move(ti));
    }
  }

  // Turns relative offsets into absolute ones and checks alignment, bounds and overlap.
  void place_tensors() {
    const uint64_t align = f_.alignment_;
    // The data section starts at the next multiple of the alignment; it may lie past the end of
    // a file that has no tensors (vocab-only files stop right after the metadata).
    const uint64_t data_start = (pos_ + align - 1) / align * align;
    for (TensorInfo& ti : f_.tensors_) {
      const std::string owner = "tensor '" + printable(ti.name) + "'";
      if (ti.offset % align != 0)
        fail(owner + " offset " + std::to_string(ti.offset) +
             " is not a multiple of the alignment " + std::to_string(align));
      uint64_t abs = 0, end = 0;
      if (__builtin_add_overflow(data_start, ti.offset, &abs) ||
          __builtin_add_overflow(abs, ti.bytes, &end) || end > size_)
        fail(owner + " extends past end of file (offset " + std::to_string(ti.offset) +
             " in the data section at " + std::to_string(data_start) + ", size " +
             std::to_string(ti.bytes) + ", file " + std::to_string(size_) + ")");
      ti.offset = abs;
      ti.data = data_ + abs;
    }
    std::vector<const TensorInfo*> by_offset;
    by_offset.reserve(f_.tensors_.size());
    for (const TensorInfo& ti : f_.tensors_) by_offset.push_back(&ti);
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const TensorInfo& a = *by_offset[i - 1];
      const TensorInfo& b = *by_offset[i];
      if (a.offset + a.bytes > b.offset)
        fail("tensors '" + printable(a.name) + "' and '" + printable(b.name) +
             "' overlap (offsets " + std::to_string(a.offset) + " and " + std::to_string(b.offset) +
             ", sizes " + std::to_string(a.bytes) + " and " + std::to_string(b.bytes) + ")");
    }
  }

  GgufFile& f_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_ = 0;
};

GgufFile GgufFile::open(const std::string& path) {
  GgufFile f;
  f.file_ = MappedFile::open(path);
  Reader(f).parse();
  return f;
}

// ---- metadata access ----

bool GgufFile::has(std::string_view key) const {
  return metadata_.find(key) != metadata_.end();
}

const Value* GgufFile::find(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

std::vector<std::string> GgufFile::keys() const {
  return key_order_;
}

namespace {

[[noreturn]] void wrong_type(const GgufFile& f, std::string_view key, const Value& v,
                             const char* expected) {
  throw FileError(f.path() + ": metadata '" + printable(key) + "' is " + describe(v) +
                  ", expected " + expected);
}

const Value& require(const GgufFile& f, std::string_view key) {
  const Value* v = f.find(key);
  if (!v) throw FileError(f.path() + ": missing metadata '" + printable(key) + "'");
  return *v;
}

void require_array_of(const GgufFile& f, std::string_view key, const Value& v, bool ok,
                      const char* expected) {
  if (v.type != ValueType::Array || !ok) wrong_type(f, key, v, expected);
}

}  // namespace

std::string GgufFile::get_string(std::string_view key) const {
  const Value& v = require(*this, key);
  if (v.type != ValueType::String) wrong_type(*this, key, v, "string");
  return v.s;
}

uint64_t GgufFile::get_uint(std::string_view key) const {
  const Value& v = require(*this, key);
  if (!is_integer(v.type)) wrong_type(*this, key, v, "an integer");
  if (is_unsigned(v.type)) return v.u;
  if (v.i < 0)
    throw FileError(path() + ": metadata '" + printable(key) + "' is " + std::to_string(v.i) +
                    ", expected a non-negative integer");
  return uint64_t(v.i);
}

int64_t GgufFile::get_int(std::string_view key) const {
  const Value& v = require(*this, key);
  if (!is_integer(v.type)) wrong_type(*this, key, v, "an integer");
  if (!is_unsigned(v.type)) return v.i;
  if (v.u > uint64_t(std::numeric_limits<int64_t>::max()))
    throw FileError(path() + ": metadata '" + printable(key) + "' is " + std::to_string(v.u) +
                    ", out of range for int64");
  return int64_t(v.u);
}

double GgufFile::get_float(std::string_view key) const {
  const Value& v = require(*this, key);
  if (!is_float(v.type)) wrong_type(*this, key, v, "a float");
  return v.f;
}

bool GgufFile::get_bool(std::string_view key) const {
  const Value& v = require(*this, key);
  if (v.type != ValueType::Bool) wrong_type(*this, key, v, "bool");
  return v.i != 0;
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const Value& v = require(*this, key);
  require_array_of(*this, key, v, v.elem_type == ValueType::String, "array of string");
  return v.strings;
}

std::vector<double> GgufFile::get_float_array(std::string_view key) const {
  const Value& v = require(*this, key);
  require_array_of(*this, key, v, is_float(v.elem_type), "array of float");
  return v.floats;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const Value& v = require(*this, key);
  require_array_of(*this, key, v, is_integer(v.elem_type) || v.elem_type == ValueType::Bool,
                   "array of integer");
  // uint64 elements are stored as int64; a negative one was above INT64_MAX in the file.
  if (v.elem_type == ValueType::UInt64)
    for (int64_t x : v.ints)
      if (x < 0)
        throw FileError(path() + ": metadata '" + printable(key) + "' has element " +
                        std::to_string(uint64_t(x)) + ", out of range for int64");
  return v.ints;
}

std::string GgufFile::get_string_or(std::string_view key, std::string def) const {
  return has(key) ? get_string(key) : def;
}

uint64_t GgufFile::get_uint_or(std::string_view key, uint64_t def) const {
  return has(key) ? get_uint(key) : def;
}

double GgufFile::get_float_or(std::string_view key, double def) const {
  return has(key) ? get_float(key) : def;
}

bool GgufFile::get_bool_or(std::string_view key, bool def) const {
  return has(key) ? get_bool(key) : def;
}

// ---- tensors ----

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& GgufFile::tensor(std::string_view name) const {
  const TensorInfo* t = find_tensor(name);
  if (!t) throw FileError(path() + ": missing tensor '" + printable(name) + "'");
  return *t;
}

}  // namespace shrike::gguf
