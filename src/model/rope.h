// The rotary-embedding table, one definition for the inference model and the trainer so that a
// trained model sees exactly the rotations the engine applies.
#pragma once

#include <cstdint>
#include <span>

namespace shrike::model {

// Writes the rotation of position `pos` for each of the rope_dims / 2 rotated pairs:
// cs[2i] = cos(pos * f_i), cs[2i + 1] = sin(pos * f_i), f_i = theta^(-2i / rope_dims), divided by
// freq_factors[i] when given (Llama-3 scaling, rope_dims / 2 of them). Computed in float like the
// reference implementations (llama2.c, ggml), so that logits agree to the last bits that matter.
// pos_scale < 1 is linear rope scaling (positions times 1 / factor, ggml's freq_scale).
void rope_cos_sin(float* cs, int64_t pos, float theta, int64_t rope_dims,
                  std::span<const float> freq_factors, float pos_scale = 1.0f);

}  // namespace shrike::model
