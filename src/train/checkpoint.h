// Trained models as GGUF: the model file is a standard llama GGUF (F32 tensors, the tokenizer
// included) that `shrike generate`, `shrike serve` and llama.cpp load; a training checkpoint is
// the same plus the optimizer's state, in a separate file so that the model stays standard.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/vocab.h"
#include "train/transformer.h"

namespace shrike::train {

// What resuming needs besides the weights.
struct OptimizerState {
  int64_t step = 0;
  std::vector<float> m, v;  // AdamW moments, one per parameter
  // The exponential moving average of the parameters (TrainOptions::ema); empty when off.
  std::vector<float> ema;
};

// Adds the keys of a layer above training to the file being written (the task layer's
// shrike.task.*, task/task_definition.h), so that what a user's checkpoint carried survives
// pruning, distillation and quantisation without this layer knowing what it is.
using MetadataWriter = std::function<void(gguf::GgufWriter&)>;

// Writes the model (and, when state is not null, the optimizer state as extra tensors and keys:
// not loadable by llama.cpp, which refuses unknown tensors), add_metadata's keys when set, and
// the chat template when not empty. Throws FileError.
void save_model(const Transformer<float>& model, const tokenizer::Vocab& vocab,
                const std::string& name, const std::string& path,
                const OptimizerState* state = nullptr, const MetadataWriter& add_metadata = {},
                const std::string& chat_template = "");

struct TrainableFile {
  std::unique_ptr<Transformer<float>> model;
  tokenizer::Vocab vocab;
  std::string chat_template;  // tokenizer.chat_template; "" when none
  OptimizerState state;       // step 0 and empty moments when the file has none
};

// Reads a model of any architecture the engine runs (llama incl. Llama-3 rope scaling, qwen2,
// mistral) with its tokenizer and chat template: a GGUF of any weight type (dequantised to f32,
// with the optimizer state when present) or a Hugging Face folder (config.json, safetensors,
// tokenizer.json; the same view `shrike convert` writes). Throws FileError naming the file and
// what is wrong.
TrainableFile load_trainable(const std::string& path);

}  // namespace shrike::train
