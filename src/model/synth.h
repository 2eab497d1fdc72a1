// Random-weight Llama models of any shape, written as GGUF files that both shrike and llama.cpp
// load, so the two engines can be timed on the same file.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace shrike::model {

struct SynthOptions {
  int64_t dim = 768, n_layers = 12, n_heads = 12, n_kv_heads = 12, ffn_dim = 2048, vocab = 32000;
  int64_t context_length = 2048;
  DType type = DType::F16;
  uint64_t seed = 1;
  bool tied_output = false;
  // "llama", or "qwen2" (NeoX rotary, q/k/v biases drawn like the weights but 10x larger so that
  // they matter), "qwen3" (q/k norms), "gemma2" (post norms, GeGLU, soft-capping, every other
  // layer sliding) or "gemma3" (q/k norms, post norms, GeGLU, five of six layers sliding with a
  // local rope base). The new architectures draw their norm weights around 1 (so that a norm in
  // the wrong place changes the logits) and are always tied (gemma) or as asked (qwen3).
  std::string arch = "llama";
  int64_t head_dim = 0;          // 0: dim / heads
  int64_t sliding_window = 0;    // gemma, phi3: 0 takes the real models' (4096 / 512 / 2047)
  float rope_linear_factor = 0;  // > 0: linear rope scaling (gemma3's global layers)
  float yarn_factor = 0;         // > 0: YaRN rope scaling with this factor over rope_original
  bool longrope = false;         // LongRoPE: random short / long factors beyond rope_original
  int64_t rope_original = 0;     // original context of YaRN / LongRoPE
  float rope_theta = 10000.0f;
  // > 0: Llama-3 rope scaling with this factor (low/high frequency factors 1 and 4) over an
  // original context of llama3_original positions, stored as rope_freqs.weight.
  float llama3_factor = 0;
  int64_t llama3_original = 8192;
  // Copy the tokenizer from this GGUF (its vocabulary size wins); otherwise a synthetic
  // vocabulary of exactly `vocab` tokens is written: SentencePiece-style (control, byte and
  // made-up word pieces) for "spm", byte-level BPE with that pre-tokenizer (the 256 byte
  // symbols, made-up words built by ranked merges, the family's special tokens last) for
  // "qwen2" or "llama-bpe" (Llama-3), so real vocabulary sizes can be tested without the
  // real files.
  std::string vocab_from;
  std::string vocab_type = "spm";
};

// Writes the model to `path`. Throws std::invalid_argument for impossible shapes and FileError for
// files that cannot be read or written.
void write_synth_model(const SynthOptions& opt, const std::string& path);

}  // namespace shrike::model
