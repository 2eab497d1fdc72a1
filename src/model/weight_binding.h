// Which tensor (by GGUF name) fills which member of ModelWeights, shared by every loader (GGUF,
// llama2.c, Hugging Face folders): a loader supplies how to fetch a matrix or a vector by name.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "model/config.h"
#include "model/model.h"

namespace shrike::model {

struct WeightSource {
  // A weight matrix [rows][cols], repacked for the kernels; throws FileError when absent or of
  // another shape.
  std::function<kernels::PackedMatrix(const std::string& name, int64_t rows, int64_t cols)> matrix;
  // A vector of n values (norm weights, biases) as f32.
  std::function<std::vector<float>(const std::string& name, int64_t n)> vector;
};

ModelWeights bind_weights(const ModelConfig& c, const WeightSource& src);

}  // namespace shrike::model
