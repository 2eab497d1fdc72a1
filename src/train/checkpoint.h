// Trained models as GGUF: the model file is a standard llama GGUF (F32 tensors, the tokenizer
// included) that `shrike generate`, `shrike serve` and llama.cpp load; a training checkpoint is
// the same plus the optimizer's state, in a separate file so that the model stays standard.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/task_definition.h"
#include "tokenizer/vocab.h"
#include "train/transformer.h"

namespace shrike::train {

// What resuming needs besides the weights.
struct OptimizerState {
  int64_t step = 0;
  std::vector<float> m, v;  // AdamW moments, one per parameter
};

// Writes the model (and, when state is not null, the optimizer state as extra tensors and keys:
// not loadable by llama.cpp, which refuses unknown tensors), and the task it was trained for
// when task is not null (data/task_definition.h). Throws FileError.
void save_model(const Transformer<float>& model, const tokenizer::Vocab& vocab,
                const std::string& name, const std::string& path,
                const OptimizerState* state = nullptr, const data::TaskDefinition* task = nullptr);

struct TrainableFile {
  std::unique_ptr<Transformer<float>> model;
  tokenizer::Vocab vocab;
  OptimizerState state;                      // step 0 and empty moments when the file has none
  std::optional<data::TaskDefinition> task;  // shrike.task.*, when the file carries a task
};

// Reads a llama GGUF of any weight type (dequantised to f32) with its tokenizer, and the
// optimizer state when present. Throws FileError naming the file and what is wrong.
TrainableFile load_trainable(const std::string& path);

}  // namespace shrike::train
