// A model and its tokenizer loaded from one GGUF file, for the engine's test binaries.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "gguf/gguf.h"
#include "model/model.h"
#include "model/synth.h"
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

// The engine tests' random-weight model: dim 64, 2 layers, 4 heads (2 kv), ffn 128, context
// 1024, its own 512-token SentencePiece-style vocabulary (control, bytes, made-up words).
inline model::SynthOptions tiny_synth_options(DType type, uint64_t seed) {
  model::SynthOptions o;
  o.dim = 64;
  o.n_layers = 2;
  o.n_heads = 4;
  o.n_kv_heads = 2;
  o.ffn_dim = 128;
  o.vocab = 512;
  o.context_length = 1024;
  o.type = type;
  o.seed = seed;
  return o;
}

// Writes a synth model to a temporary file, loads it and removes the file.
inline Loaded load_synth(const model::SynthOptions& o, const std::string& tag) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("shrike_" + tag + "_" + std::to_string(getpid()) + ".gguf");
  model::write_synth_model(o, path.string());
  Loaded m = load_gguf(path.string());
  std::filesystem::remove(path);
  return m;
}

}  // namespace shrike::engine::test_util
