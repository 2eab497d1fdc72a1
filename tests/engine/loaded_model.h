// A model and its tokenizer loaded from one GGUF file, for the engine's test binaries.
#pragma once

#include <memory>
#include <string>

#include "gguf/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace shrike::engine::test_util {

struct Loaded {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tok;
};

inline Loaded load_gguf(const std::string& path) {
  Loaded l;
  l.model = model::load_model(path);
  const auto f = gguf::GgufFile::open(path);
  l.tok = std::make_unique<tokenizer::Tokenizer>(tokenizer::vocab_from_gguf(f));
  return l;
}

}  // namespace shrike::engine::test_util
