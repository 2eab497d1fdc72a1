// --swap-values and --swap-random, which `train` and `distill` share: training copies of the
// examples with their slot values swapped (data/value_swap.h), registered once.
#pragma once

#include <CLI/CLI.hpp>

#include "data/value_swap.h"

namespace shrike::cli {

void add_value_swap_options(CLI::App& app, data::ValueSwapOptions& options);

// The examples followed by their swapped copies (options.seed set to seed), and a line on stderr
// saying how many were added under `what`.
std::vector<data::Example> with_swapped_values(const std::vector<data::Example>& examples,
                                               data::ValueSwapOptions options, uint64_t seed,
                                               const char* what);

}  // namespace shrike::cli
