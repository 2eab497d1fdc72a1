// What every fuzz target shares. The parsers under test read files (mapped or streamed), so each
// input is written into a private scratch folder first: one per process, removed at exit, so
// parallel fuzzers (-jobs=N) never read each other's files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>

namespace shrike::fuzz {

class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "shrike-fuzz-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) std::abort();  // nothing can be fuzzed without a place to write
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline const std::string& scratch_dir() {
  static ScratchDir dir;
  return dir.path();
}

// Writes bytes to scratch_dir()/name (replacing it) and returns the path.
inline std::string write_file(const std::string& name, std::string_view bytes) {
  std::string path = scratch_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) std::abort();
  return path;
}

inline void remove_file(const std::string& name) {
  std::error_code ec;
  std::filesystem::remove(scratch_dir() + "/" + name, ec);
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Inputs made of several files join them with this line; the seeds show the form.
inline constexpr std::string_view kFileSeparator = "\n=====\n";

// The text before the first separator and the rest ("" when there is none).
inline std::pair<std::string_view, std::string_view> split_once(std::string_view s) {
  size_t at = s.find(kFileSeparator);
  if (at == std::string_view::npos) return {s, {}};
  return {s.substr(0, at), s.substr(at + kFileSeparator.size())};
}

}  // namespace shrike::fuzz
