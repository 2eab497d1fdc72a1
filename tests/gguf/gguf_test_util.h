// Helpers for the GGUF tests: scratch files and a byte builder for hand-assembled (often
// deliberately broken) GGUF files.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace shrike::gguf::testing {

// A path in a per-process scratch folder, so parallel test processes do not collide.
inline std::filesystem::path temp_dir() {
  return std::filesystem::temp_directory_path() /
         ("shrike_gguf_test_" + std::to_string(::getpid()));
}

inline std::string temp_path(const std::string& name) {
  std::filesystem::create_directories(temp_dir());
  return (temp_dir() / name).string();
}

// Removes the scratch folder when the test program ends (registered in one test file).
class TempDirCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(temp_dir(), ec);
  }
};

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  ASSERT_TRUE(f.good()) << path;
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// Little-endian GGUF byte builder. Each call appends; nothing is validated.
struct Raw {
  std::vector<uint8_t> b;

  template <typename T>
  Raw& put(T v) {
    uint8_t x[sizeof(T)];
    std::memcpy(x, &v, sizeof(T));
    b.insert(b.end(), x, x + sizeof(T));
    return *this;
  }
  Raw& u8(uint8_t v) { return put(v); }
  Raw& u32(uint32_t v) { return put(v); }
  Raw& u64(uint64_t v) { return put(v); }
  Raw& str(const std::string& s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Raw& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  // Key and value type; the caller appends the value.
  Raw& key(const std::string& k, ValueType t) { return str(k).u32(uint32_t(t)); }
  Raw& kv_u32(const std::string& k, uint32_t v) { return key(k, ValueType::UInt32).u32(v); }
  Raw& kv_str(const std::string& k, const std::string& v) {
    return key(k, ValueType::String).str(v);
  }
  Raw& tensor_info(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type,
                   uint64_t offset) {
    str(name).u32(uint32_t(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  Raw& pad(size_t align = 32) {
    b.resize((b.size() + align - 1) / align * align, 0);
    return *this;
  }
  Raw& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
  // Writes the bytes to a scratch file and returns its path.
  std::string save(const std::string& name) const {
    const std::string p = temp_path(name);
    write_bytes(p, b);
    return p;
  }
};

// The FileError message GgufFile::open throws, or a marker when it opens fine. Any other
// exception escapes and fails the test.
inline std::string open_error(const std::string& path) {
  try {
    GgufFile::open(path);
  } catch (const FileError& e) {
    return e.what();
  }
  return "<opened without error>";
}

// The message must be one line naming the file and containing `phrase`.
inline void expect_error(const std::string& msg, const std::string& path,
                         const std::string& phrase) {
  EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
  EXPECT_NE(msg.find(phrase), std::string::npos) << "expected '" << phrase << "' in: " << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

#define EXPECT_OPEN_FAILS(path, phrase)                                                  \
  do {                                                                                   \
    const std::string p__ = (path);                                                      \
    ::shrike::gguf::testing::expect_error(::shrike::gguf::testing::open_error(p__), p__, \
                                          (phrase));                                     \
  } while (0)

// The FileError message `fn()` throws.
template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const FileError& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace shrike::gguf::testing
