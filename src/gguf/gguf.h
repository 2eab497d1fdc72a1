// GGUF v2/v3 files: reading (memory-mapped, every offset and size validated before use) and
// writing. Specification: ggml's docs/gguf.md.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/file_buffer.h"

namespace shrike::gguf {

// Metadata value types, numbered as in the specification.
// clang-format off
enum class ValueType : uint32_t {
  UInt8 = 0, Int8 = 1, UInt16 = 2, Int16 = 3, UInt32 = 4, Int32 = 5, Float32 = 6, Bool = 7,
  String = 8, Array = 9, UInt64 = 10, Int64 = 11, Float64 = 12,
};
// clang-format on
std::string_view value_type_name(ValueType t);

// One metadata value. Scalars keep their declared type; arrays keep their element type.
struct Value {
  ValueType type = ValueType::UInt8;
  ValueType elem_type = ValueType::UInt8;  // arrays only
  // Exactly one of these is meaningful, chosen by type (arrays: by elem_type).
  int64_t i = 0;                     // signed integers and bool
  uint64_t u = 0;                    // unsigned integers
  double f = 0;                      // floats
  std::string s;                     // strings
  std::vector<int64_t> ints;         // arrays of integers or bools (unsigned stored as int64)
  std::vector<double> floats;        // arrays of floats
  std::vector<std::string> strings;  // arrays of strings
  // Arrays of arrays are valid GGUF; they are read (and validated) but their contents dropped.
  uint64_t array_size = 0;
};

struct TensorInfo {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> dims;      // GGUF order: dims[0] (ne0) is the innermost, contiguous one
  uint64_t offset = 0;            // absolute offset of the data in the file
  uint64_t bytes = 0;             // size of the data
  const uint8_t* data = nullptr;  // into the mapping; valid while the GgufFile lives
  int64_t elements() const;
};

class GgufFile {
 public:
  // Opens, maps and validates the whole header. Throws FileError whose message is one line:
  // "PATH: what is wrong" (truncated, wrong magic, unknown version, absurd counts or dimensions,
  // unknown tensor type, tensor data past the end of the file, misaligned offset, ...).
  static GgufFile open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  size_t file_size() const { return file_.size(); }

  // Metadata. Typed getters throw FileError naming the file and key when the key is missing or
  // has another type: "PATH: metadata 'KEY' is string, expected an integer".
  bool has(std::string_view key) const;
  const Value* find(std::string_view key) const;
  std::vector<std::string> keys() const;
  std::string get_string(std::string_view key) const;
  // Any integer type; throws when negative or out of range for the return type.
  uint64_t get_uint(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  // Float32 or Float64.
  double get_float(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<double> get_float_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  // Default when absent; still throws when present with the wrong type.
  std::string get_string_or(std::string_view key, std::string def) const;
  uint64_t get_uint_or(std::string_view key, uint64_t def) const;
  double get_float_or(std::string_view key, double def) const;
  bool get_bool_or(std::string_view key, bool def) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  // Throws FileError "PATH: missing tensor 'NAME'".
  const TensorInfo& tensor(std::string_view name) const;

 private:
  MappedFile file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, Value, std::less<>> metadata_;
  std::vector<std::string> key_order_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  friend class Reader;
};

// Builds a GGUF v3 file in memory order: metadata in insertion order, then tensor infos, then
// tensor data aligned to `general.alignment` (32). llama.cpp loads what this writes.
class GgufWriter {
 public:
  void set_uint32(const std::string& key, uint32_t v);
  void set_int32(const std::string& key, int32_t v);
  void set_uint64(const std::string& key, uint64_t v);
  void set_float32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_float32_array(const std::string& key, const std::vector<float>& v);
  void set_int32_array(const std::string& key, const std::vector<int32_t>& v);
  // Any value as a reader returned it (copying metadata between files). Adds or, for a
  // repeated key (which a reader would reject as a duplicate), replaces in place.
  void set_value(const std::string& key, Value v);
  // dims in GGUF order (ne0 first). data holds dtype_row_bytes(type, dims[0]) * rows bytes; it is
  // copied.
  void add_tensor(const std::string& name, DType type, const std::vector<int64_t>& dims,
                  const void* data, size_t bytes);
  // Writes the file; throws FileError naming the path when it cannot.
  void write(const std::string& path) const;

 private:
  struct Entry {
    std::string key;
    Value value;
  };
  struct PendingTensor {
    std::string name;
    DType type;
    std::vector<int64_t> dims;
    std::vector<uint8_t> data;
  };
  // general.alignment when the caller set it (as uint32), else the default 32.
  uint64_t alignment() const;
  std::vector<Entry> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace shrike::gguf
