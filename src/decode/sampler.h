// Choosing the next token from logits: greedy, or temperature sampling with top-k / top-p /
// min-p, after the repetition penalties of the OpenAI and vLLM APIs; optionally the log
// probabilities of the chosen token and of the most likely alternatives.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "decode/token_mask.h"

namespace shrike::decode {

struct SamplerParams {
  float temperature = 0.0f;  // 0: greedy (argmax, first index wins ties)
  int32_t top_k = 0;         // 0: no limit
  float top_p = 1.0f;        // 1: no nucleus cut
  float min_p = 0.0f;        // 0: off; else drop tokens with p < min_p * p_max
  uint64_t seed = 0;
  // OpenAI: logit -= presence_penalty * (count > 0) + frequency_penalty * count, counting the
  // generated tokens only.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // vLLM / CTRL: a logit of a token seen in the prompt or the output is divided by it when
  // positive, multiplied when negative. 1: off.
  float repetition_penalty = 1.0f;
  bool logprobs = false;     // report the chosen token's log probability
  int32_t top_logprobs = 0;  // and this many most likely alternatives (0..20)
};

// Why p is unusable (e.g. "top_p must be in (0, 1]"), or empty when it is fine. The ranges are
// the OpenAI API's where it has one. The sampler itself never fails on odd parameters (top_p 0
// keeps one token, min_p above 1 keeps one), so callers decide how strict to be.
std::string sampler_params_error(const SamplerParams& p);

struct TopLogprob {
  int32_t token = 0;
  float logprob = 0;
};

// One entry of a processed distribution: a token and its probability.
struct TokenProb {
  int32_t token = 0;
  double prob = 0;
};

struct SampleResult {
  int32_t token = 0;
  float logprob = 0;            // when params.logprobs
  std::vector<TopLogprob> top;  // params.top_logprobs entries, most likely first
};

class Sampler {
 public:
  explicit Sampler(SamplerParams p) : params_(p), rng_(p.seed) {}
  const SamplerParams& params() const { return params_; }

  // logits: [n_vocab]; penalties are applied in place and undone before returning, so the caller
  // gets its logits back unchanged. Log probabilities are those of the model's raw
  // distribution (log-softmax of the logits before penalties and temperature), as vLLM reports.
  // prompt / output: the request's tokens so far, for the penalties (the prompt is read only
  // when repetition_penalty != 1). Throws std::invalid_argument for an empty vocabulary or a
  // token id outside it.
  // allowed (a constraint's mask): tokens outside it get -inf in `logits` before anything else
  // (penalties, temperature, greedy), and stay -inf on return; log probabilities are then those
  // of the constrained distribution.
  SampleResult sample(float* logits, int64_t n_vocab, std::span<const int32_t> prompt,
                      std::span<const int32_t> output, const TokenBitset* allowed = nullptr);
  // Fills result.logprob / result.top for result.token from these (raw) logits as sample() does,
  // when the parameters ask for them (speculative decoding: tokens chosen by verification).
  void add_logprobs(const float* logits, int64_t n_vocab, SampleResult& result);
  // Without penalties or logprobs (the CLI's generate loop).
  int32_t sample(float* logits, int64_t n_vocab, const TokenBitset* allowed = nullptr);

  // The distribution sample() draws from for these logits, after the penalties, temperature,
  // top-k, top-p and min-p: the tokens of non-zero probability (in no particular order) with
  // probabilities summing to 1. Greedy (temperature 0 or top_k 1) gives the argmax alone. For
  // speculative sampling, which must preserve exactly this distribution. Logits are restored,
  // and the generator is not used. Throws as sample() does.
  void probabilities(float* logits, int64_t n_vocab, std::span<const int32_t> prompt,
                     std::span<const int32_t> output, std::vector<TokenProb>* out);
  // Greedy: every draw is the argmax of the penalised logits.
  bool greedy() const { return params_.temperature <= 0.0f || params_.top_k == 1; }
  // The request's generator, so that the accept/reject draws of speculative sampling come from
  // the same seeded stream as its tokens.
  std::mt19937_64& generator() { return rng_; }

 private:
  struct Candidate {
    float logit;  // divided by the temperature
    int32_t token;
    float weight;  // exp(logit - max logit): the unnormalised probability
  };
  int32_t pick(const float* logits, int64_t n_vocab);
  // The kept candidates: returns a token when the draw is certain (greedy, or no finite logit),
  // else -1 with candidates_[0, *keep) holding the kept tokens and *sum their weight.
  int32_t prepare(const float* logits, int64_t n_vocab, size_t* keep, double* sum);
  size_t locate(size_t end, double target, double* mass);
  void apply_penalties(float* logits, int64_t n_vocab, std::span<const int32_t> prompt,
                       std::span<const int32_t> output);

  SamplerParams params_;
  std::mt19937_64 rng_;
  std::vector<Candidate> candidates_;  // reused buffer
  std::vector<int32_t> counts_;   // reused buffer (frequency of output ids), all 0 between calls
  std::vector<int32_t> touched_;  // ids whose counts_ entry is set during a call
  std::vector<std::pair<int32_t, float>> saved_;  // (id, raw logit) of penalised tokens
};

// Index of the largest value; the first one on ties (as llama2.c and llama.cpp's greedy do).
int32_t argmax(const float* x, int64_t n);

}  // namespace shrike::decode
