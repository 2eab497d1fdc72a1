// The inference engine's model over the trainer's parameters: what evaluation during training,
// sensitivity scans and distillation's teacher answers run on.
#pragma once

#include <memory>

#include "model/model.h"
#include "train/transformer.h"

namespace shrike::train {

// The inference engine's model over the trainer's f32 parameters (copied and repacked).
std::unique_ptr<model::Model> to_inference_model(const Transformer<float>& t);

}  // namespace shrike::train
