#include "train/presets.h"

#include <stdexcept>

namespace shrike::train {

model::ModelConfig preset_config(const std::string& preset, int64_t vocab_size) {
  model::ModelConfig c;
  c.vocab_size = vocab_size;
  c.context_length = 256;  // utterance + answer; the longest generated example is ~120 tokens
  if (preset == "tiny") {
    c.dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn_dim = 192;
  } else if (preset == "small") {
    c.dim = 128, c.n_layers = 4, c.n_heads = 4, c.n_kv_heads = 2, c.ffn_dim = 384;
  } else if (preset == "base") {
    c.dim = 256, c.n_layers = 4, c.n_heads = 8, c.n_kv_heads = 4, c.ffn_dim = 768;
  } else if (preset == "draft") {
    c.dim = 128, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn_dim = 384;
  } else {
    throw std::invalid_argument("unknown preset '" + preset + "' (tiny, small, base, draft)");
  }
  c.head_dim = c.dim / c.n_heads;
  c.rope_dims = c.head_dim;
  c.validate();
  return c;
}

void apply_architecture(model::ModelConfig& c, const std::string& arch) {
  if (arch == "llama") return;
  if (arch != "qwen2")
    throw std::invalid_argument("unknown architecture '" + arch + "' (llama, qwen2)");
  c.architecture = "qwen2";
  c.qkv_bias = true;
  c.rope_layout = kernels::RopeLayout::NeoX;
  c.rope_theta = 1e6f;
  c.tied_output = true;
  c.validate();
}

void apply_shape(model::ModelConfig& c, const ShapeOverrides& o) {
  if (o.dim > 0) c.dim = o.dim;
  if (o.layers > 0) c.n_layers = o.layers;
  if (o.heads > 0) c.n_heads = o.heads;
  if (o.kv_heads > 0) c.n_kv_heads = o.kv_heads;
  if (o.ffn > 0) c.ffn_dim = o.ffn;
  c.head_dim = c.rope_dims = c.n_heads > 0 ? c.dim / c.n_heads : 0;
  c.validate();
}

model::ModelConfig student_config(const std::string& preset, const model::ModelConfig& teacher,
                                  const ShapeOverrides& o) {
  model::ModelConfig shape = preset_config(preset, teacher.vocab_size);
  apply_shape(shape, o);
  model::ModelConfig c = teacher;
  c.dim = shape.dim, c.n_layers = shape.n_layers, c.n_heads = shape.n_heads;
  c.n_kv_heads = shape.n_kv_heads, c.head_dim = shape.head_dim, c.ffn_dim = shape.ffn_dim;
  c.rope_dims = shape.rope_dims;
  c.rope_freq_factors.clear();  // per rotated dimension of the teacher's heads
  c.validate();
  return c;
}

std::string checkpoint_path_for(const std::string& model_path) {
  const std::string ext = ".gguf";
  if (model_path.size() > ext.size() && model_path.ends_with(ext))
    return model_path.substr(0, model_path.size() - ext.size()) + ".ckpt.gguf";
  return model_path + ".ckpt.gguf";
}

}  // namespace shrike::train
