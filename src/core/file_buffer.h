// Memory that holds model data: a read-only file mapping and an aligned heap buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace shrike {

// Errors about an input file: the message already names the file and what is wrong with it.
class FileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A whole file mapped read-only. Move-only; unmaps on destruction.
class MappedFile {
 public:
  // Throws FileError("PATH: cannot open: ...") when the file cannot be opened or mapped.
  static MappedFile open(const std::string& path);
  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept { *this = std::move(o); }
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// 64-byte aligned heap memory (cache line and AVX-512 width). Large buffers are advised for
// transparent huge pages: weights decoded from a plain file mapping ran 2-3x slower on these VMs.
struct AlignedFree {
  void operator()(void* p) const;
};
using AlignedBytes = std::unique_ptr<uint8_t[], AlignedFree>;
AlignedBytes aligned_alloc_bytes(size_t n);

template <typename T>
struct AlignedArray {
  AlignedBytes bytes;
  size_t count = 0;
  explicit AlignedArray(size_t n = 0) : bytes(aligned_alloc_bytes(n * sizeof(T))), count(n) {}
  T* data() { return reinterpret_cast<T*>(bytes.get()); }
  const T* data() const { return reinterpret_cast<const T*>(bytes.get()); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  size_t size() const { return count; }
};

}  // namespace shrike
