// safetensors files (Hugging Face's weight format): an 8-byte little-endian header length, a JSON
// header mapping each tensor name to {dtype, shape, data_offsets} (plus an optional
// "__metadata__" object of strings), then the raw data. Reading maps the file and validates the
// whole header before any tensor is handed out; sharded checkpoints are joined through
// model.safetensors.index.json. Specification: github.com/huggingface/safetensors (README).
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

namespace shrike::safetensors {

// Headers larger than this are refused: real ones are kilobytes to a few megabytes, and the length
// is the first thing a corrupt file gets wrong.
constexpr uint64_t kMaxHeaderBytes = uint64_t(100) << 20;

struct Tensor {
  std::string name;
  std::string dtype;           // as the file writes it: "F32", "BF16", "I64", ...
  std::optional<DType> type;   // F32, F16 or BF16; nullopt for the dtypes shrike does not read
  std::vector<int64_t> shape;  // row-major, outermost first (the file's order)
  uint64_t offset = 0;         // of the data, from the start of the file
  uint64_t bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping; valid while the file lives
  int64_t elements() const;
};

class SafetensorsFile {
 public:
  // Maps and validates the file. Throws FileError with one line "PATH: what is wrong": header
  // length past the end of the file or above kMaxHeaderBytes, header not JSON or not an object,
  // a tensor entry that is not an object or lacks (or mistypes) dtype, shape or data_offsets, an
  // unknown dtype, negative or absurd dimensions, offsets past the data or ending before they
  // begin, a byte count that is not dtype size x elements, tensors that overlap, duplicate names,
  // __metadata__ that is not an object of strings.
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::vector<Tensor>& tensors() const { return tensors_; }  // sorted by name
  const Tensor* find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  MappedFile file_;
  std::vector<Tensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// The weights of a model folder: model.safetensors.index.json's shards when that file exists,
// otherwise model.safetensors.
class Checkpoint {
 public:
  // Throws FileError naming the folder or file: neither file present, an index that is not JSON
  // or lacks a weight_map object of strings, a shard name that leaves the folder or is missing, a
  // tensor the index places in a shard that does not hold it, anything SafetensorsFile::open
  // rejects.
  static Checkpoint open_dir(const std::string& dir);
  // One file on its own.
  static Checkpoint open_file(const std::string& path);

  const std::string& path() const { return path_; }  // the index or the single file
  const Tensor* find(std::string_view name) const;
  // Throws FileError "PATH: missing tensor 'NAME'".
  const Tensor& get(std::string_view name) const;
  // The file holding a tensor (for messages).
  const std::string& file_of(std::string_view name) const;
  std::vector<std::string> names() const;

 private:
  std::string path_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, std::pair<const Tensor*, size_t>, std::less<>> tensors_;  // -> file index
};

// "F32" / "F16" / "BF16" for the types safetensors can hold; throws std::invalid_argument for
// quantised types.
std::string_view dtype_string(DType t);

// Builds a safetensors file as the reference writer does: the header padded with spaces so the
// data starts 8-aligned, tensors packed back to back without gaps (the reference reader rejects
// gaps), wider dtypes first so every tensor stays aligned to its element size.
class Writer {
 public:
  // shape: row-major, outermost first. data holds elements x dtype size bytes; it is copied.
  void add(const std::string& name, DType type, const std::vector<int64_t>& shape, const void* data,
           size_t bytes);
  void set_metadata(const std::string& key, const std::string& value);
  // The file's bytes, and writing them; throws FileError naming the path when it cannot.
  std::vector<uint8_t> bytes() const;
  void write(const std::string& path) const;

 private:
  struct Pending {
    std::string name;
    DType type;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
  };
  std::vector<Pending> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Writes model.safetensors.index.json for shards: weight_map maps each name to its file name.
void write_index(const std::string& path, const std::map<std::string, std::string>& weight_map);

}  // namespace shrike::safetensors
