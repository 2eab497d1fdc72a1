// The kernel option `serve`, `generate`, `bench` and `logits` share: --bf16-dot, registered once.
#pragma once

#include <CLI/CLI.hpp>

namespace shrike::cli {

// Registers --bf16-dot on app, bound to on.
void add_bf16_dot_flag(CLI::App& app, bool& on);

// Turns the BF16 dot-product packing on before the model loads (kernels::set_bf16_dot); throws
// std::invalid_argument, naming the CPU's features, where the CPU lacks AVX512_BF16.
void apply_bf16_dot(bool on);

}  // namespace shrike::cli
