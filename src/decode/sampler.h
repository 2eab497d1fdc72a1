// Choosing the next token from logits: greedy, or temperature sampling with top-k / top-p.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace shrike::decode {

struct SamplerParams {
  float temperature = 0.0f;  // 0: greedy (argmax, first index wins ties)
  int32_t top_k = 0;         // 0: no limit
  float top_p = 1.0f;        // 1: no nucleus cut
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(SamplerParams p) : params_(p), rng_(p.seed) {}
  // logits: [n_vocab]; may be modified (scaled, softmaxed) in place.
  int32_t sample(float* logits, int64_t n_vocab);

 private:
  SamplerParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;  // reused buffer
};

// Index of the largest value; the first one on ties (as llama2.c and llama.cpp's greedy do).
int32_t argmax(const float* x, int64_t n);

}  // namespace shrike::decode
