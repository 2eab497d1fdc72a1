#include "cli/model_files.h"

#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/file_buffer.h"
#include "gguf/gguf.h"
#include "tokenizer/hf_tokenizer.h"

namespace shrike::cli {

std::vector<int32_t> parse_token_ids(const std::string& text, int64_t vocab,
                                     const std::string& where) {
  std::istringstream in(text);
  std::vector<int32_t> ids;
  for (std::string word; in >> word;) {
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(word, &used);
    } catch (const std::exception&) {
    }
    if (used != word.size() || id < 0 || id >= vocab)
      throw FileError(where + ": '" + word + "' is not a token id of this vocabulary (0.." +
                      std::to_string(vocab - 1) + "; word " + std::to_string(ids.size() + 1) + ")");
    ids.push_back(int32_t(id));
  }
  return ids;
}
namespace {
bool is_gguf(const std::string& path) {
  const MappedFile f = MappedFile::open(path);
  return f.size() >= 4 && std::memcmp(f.data(), "GGUF", 4) == 0;
}
}  // namespace

std::unique_ptr<tokenizer::Tokenizer> load_tokenizer(const std::string& model_path,
                                                     const std::string& tokenizer_path,
                                                     int64_t vocab_size) {
  const std::string& path = tokenizer_path.empty() ? model_path : tokenizer_path;
  tokenizer::Vocab vocab;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    // A Hugging Face folder: tokenizer.json, padded to the model's vocabulary as converters do.
    vocab = tokenizer::load_hf_tokenizer(path, vocab_size).vocab;
  } else if (is_gguf(path)) {
    vocab = tokenizer::vocab_from_gguf(gguf::GgufFile::open(path));
  } else if (!tokenizer_path.empty()) {
    vocab = tokenizer::load_llama2c_vocab(path, int32_t(vocab_size));
  } else {
    throw FileError(model_path + ": a llama2.c model needs --tokenizer (its tok*.bin file)");
  }
  if (int64_t(vocab.pieces.size()) != vocab_size)
    throw FileError(path + ": tokenizer has " + std::to_string(vocab.pieces.size()) +
                    " tokens, the model " + std::to_string(vocab_size));
  return std::make_unique<tokenizer::Tokenizer>(std::move(vocab));
}

GgufInput::GgufInput(const std::string& path) : path_(path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return;
  std::string pattern = (std::filesystem::temp_directory_path() / "shrike-hf-XXXXXX").string();
  if (!::mkdtemp(pattern.data()))
    throw FileError(pattern + ": cannot create a temporary folder for converting " + path);
  temp_dir_ = pattern;
  path_ = (temp_dir_ / "model.gguf").string();
  try {
    const std::string what = convert_hf_folder(path, path_, hf_matrix_type(path));
    std::fprintf(stderr, "%s: Hugging Face folder read as GGUF (%s)\n", path.c_str(), what.c_str());
  } catch (...) {
    std::filesystem::remove_all(temp_dir_, ec);
    throw;
  }
}

GgufInput::~GgufInput() {
  std::error_code ec;
  if (!temp_dir_.empty()) std::filesystem::remove_all(temp_dir_, ec);
}

}  // namespace shrike::cli
