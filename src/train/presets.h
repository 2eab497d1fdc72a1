// Model shapes for task models trained from scratch, and where checkpoints go.
#pragma once

#include <cstdint>
#include <string>

#include "model/config.h"

namespace shrike::train {

// "tiny" (tests: seconds), "small", "base" (the intent teacher: dim 256, 4 layers, 8 heads
// sharing 4 KV heads, FFN 768: 3.15M parameters outside the embeddings, ~5M with a 3.7k
// vocabulary). Throws std::invalid_argument for another name.
model::ModelConfig preset_config(const std::string& preset, int64_t vocab_size);

// OUT.gguf -> OUT.ckpt.gguf: the model file stays a standard GGUF; the checkpoint beside it holds
// the optimizer state too.
std::string checkpoint_path_for(const std::string& model_path);

}  // namespace shrike::train
