// --dropout and --prompt-loss, which `train` and `distill` share (train/trainer.h's
// TrainOptions::dropout and ::prompt_loss), registered once.
#pragma once

#include <CLI/CLI.hpp>

#include "train/trainer.h"

namespace shrike::cli {

void add_regularisation_options(CLI::App& app, train::TrainOptions& options);

}  // namespace shrike::cli
