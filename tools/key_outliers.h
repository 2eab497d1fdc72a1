// Outlier key channels, planted without changing what the model computes. Large language models
// grow a few key channels far larger than the rest; a per-(position, head) INT8 scale is then set
// by those channels and the others lose their precision, which is how an INT8 KV cache makes long
// conversations "forget". Small trained models have no such channels, so this writes a copy of a
// model with them: in every KV head one RoPE pair of key rows is multiplied by `scale` and the
// same pair of every query head reading that KV head by 1/scale. q·k is unchanged (RoPE rotates a
// pair as a whole, so it commutes with scaling the pair), so the full-precision model computes
// the same function; only a quantised KV cache sees the difference.
#pragma once

#include <cstdint>
#include <string>

namespace shrike::tools {

// in, out: llama GGUF files with F32 attn_q / attn_k. pair: which RoPE pair (0 .. head_dim/2-1)
// of each head; -1 picks the last (lowest frequency) one. Throws FileError for unreadable files
// and std::invalid_argument for other types, shapes or arguments.
void plant_key_outliers(const std::string& in, const std::string& out, double scale,
                        int64_t pair = -1);

}  // namespace shrike::tools
