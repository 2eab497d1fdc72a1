#include "cli/kernel_options.h"

#include "kernels/matmul.h"

namespace shrike::cli {

void add_bf16_dot_flag(CLI::App& app, bool& on) {
  app.add_flag("--bf16-dot", on,
               "F16 / BF16 weights repacked as BF16 pairs and multiplied with the CPU's BF16 dot "
               "products (AVX512_BF16; like ik_llama.cpp's -rtr): faster prefill, F16 weights and "
               "the activations rounded to bf16");
}

void apply_bf16_dot(bool on) {
  if (on) kernels::set_bf16_dot(true);
}

}  // namespace shrike::cli
