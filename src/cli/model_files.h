// Finding the tokenizer that goes with a model file.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace shrike::cli {

// The tokenizer at tokenizer_path (llama2.c tok*.bin, or a GGUF) or, when that is empty, the one
// inside the model's own GGUF. A llama2.c model needs an explicit tokenizer.
std::unique_ptr<tokenizer::Tokenizer> load_tokenizer(const std::string& model_path,
                                                     const std::string& tokenizer_path,
                                                     int64_t vocab_size);

}  // namespace shrike::cli
