// --dropout, --prompt-loss and --ema, which `train` and `distill` share (train/trainer.h's
// TrainOptions::dropout, ::prompt_loss and ::ema), registered once.
#pragma once

#include <CLI/CLI.hpp>

#include "train/trainer.h"

namespace shrike::cli {

void add_regularisation_options(CLI::App& app, train::TrainOptions& options);

}  // namespace shrike::cli
