// Finding the tokenizer that goes with a model file; a Hugging Face folder where a command needs
// one GGUF file.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "tokenizer/tokenizer.h"

namespace shrike::cli {

// The tokenizer at tokenizer_path (llama2.c tok*.bin, or a GGUF) or, when that is empty, the one
// inside the model's own GGUF. A llama2.c model needs an explicit tokenizer.
std::unique_ptr<tokenizer::Tokenizer> load_tokenizer(const std::string& model_path,
                                                     const std::string& tokenizer_path,
                                                     int64_t vocab_size);

// Whitespace-separated token ids (`shrike tokenize`'s output), each checked against a vocabulary
// of `vocab` tokens. Throws FileError naming `where` and the offending word.
std::vector<int32_t> parse_token_ids(const std::string& text, int64_t vocab,
                                     const std::string& where);

// `shrike convert`: a Hugging Face folder as one GGUF that shrike and llama.cpp load, matrices as
// `type` (F32, F16, BF16, Q8_0; a matrix already of that type copied bit for bit), tokenizer and
// chat template included. Returns a one-line description. Throws FileError.
std::string convert_hf_folder(const std::string& dir, const std::string& path, DType type);
// The type of a Hugging Face folder's first weight matrix (what converting loses nothing to).
DType hf_matrix_type(const std::string& dir);

// A model path as a GGUF file: the path itself, or a Hugging Face folder converted (in its own
// weight type, so nothing is lost) to a temporary GGUF that lives as long as this object. Lets
// every command that reads a GGUF take the folder a user downloaded or fine-tuned.
class GgufInput {
 public:
  explicit GgufInput(const std::string& path);
  ~GgufInput();
  GgufInput(const GgufInput&) = delete;
  GgufInput& operator=(const GgufInput&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::filesystem::path temp_dir_;  // empty when path_ is the caller's own file
};

}  // namespace shrike::cli
