// Model shapes for task models trained from scratch, and where checkpoints go.
#pragma once

#include <cstdint>
#include <string>

#include "model/config.h"

namespace shrike::train {

// "tiny" (tests: seconds), "small", "base" (the intent teacher: dim 256, 4 layers, 8 heads
// sharing 4 KV heads, FFN 768: 3.15M parameters outside the embeddings, ~5M with a 3.7k
// vocabulary), "draft" (a speculative-decoding draft for base: dim 128, 2 layers, 4 heads
// sharing 2 KV heads, FFN 384: 0.39M outside the embeddings, 8x fewer than base; with base's
// 3.7k vocabulary the output matrix included, ~4.7x fewer multiply-adds per token). Throws
// std::invalid_argument for another name.
model::ModelConfig preset_config(const std::string& preset, int64_t vocab_size);

// Changes to a preset's shape (0: the preset's value). Head size follows as dim / heads.
// The architecture of a model trained from scratch: "llama" (the default: adjacent rotary pairs,
// untied output) or "qwen2" (Qwen2/Qwen2.5 as Hugging Face defines them: q/k/v biases, NeoX
// rotary halves, RoPE base 1e6, output tied to the embedding), so a from-scratch teacher can have
// the architecture a user's checkpoint has. Throws std::invalid_argument for another name.
void apply_architecture(model::ModelConfig& c, const std::string& arch);

struct ShapeOverrides {
  int64_t dim = 0, layers = 0, heads = 0, kv_heads = 0, ffn = 0;
};
// Applies o to c and checks the result (ModelConfig::validate: std::invalid_argument).
void apply_shape(model::ModelConfig& c, const ShapeOverrides& o);

// A fresh student for distillation: the preset's shape (with o's changes), everything else
// (vocabulary, context, special tokens, RoPE base, norm epsilon, tied output) the teacher's, so
// that the two share a tokenizer and positions as a draft model and its target must.
model::ModelConfig student_config(const std::string& preset, const model::ModelConfig& teacher,
                                  const ShapeOverrides& o = {});

// OUT.gguf -> OUT.ckpt.gguf: the model file stays a standard GGUF; the checkpoint beside it holds
// the optimizer state too.
std::string checkpoint_path_for(const std::string& model_path);

}  // namespace shrike::train
