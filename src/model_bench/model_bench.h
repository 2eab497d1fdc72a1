// `shrike bench`: prefill and decode speed of a model, and how close decode comes to the memory
// bandwidth roofline.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kv/contiguous_kv.h"
#include "model/model.h"

namespace shrike::model_bench {

struct ModelBenchOptions {
  std::vector<int64_t> prompt_lengths{128, 512};
  int64_t decode_tokens = 64;
  int repeats = 3;
  bool roofline = false;
  // Batched decode: for each size B, B sequences decode together (one token each per step, one
  // forward_batch call), as a serving engine's decode steps do. Aggregate tokens/s.
  std::vector<int64_t> decode_batches;
  // Speculative verification cost: for each N, one forward step over N tokens of one sequence
  // (all N logit rows wanted, as verifying N - 1 drafts needs) after a prompt of
  // verify_context positions, against a one-token step at the same context. The sizes are
  // interleaved within each repeat, so that all medians come from the same minutes.
  std::vector<int64_t> verify_tokens;
  int64_t verify_context = 128;
  // The KV caches of every run (f32 by default).
  kv::KvCacheOptions kv;
  // After the timed decode rounds, one more round with every operation timed (model::OpProfile):
  // where a batch-1 decode step goes.
  bool op_profile = false;
};

struct OpShare {
  std::string op;
  double us_per_step = 0;  // mean over the profiled round's steps
  double share = 0;        // of the profiled steps' total
};

struct BatchDecodeResult {
  int64_t batch = 0;
  double tok_per_s = 0;  // all sequences together, median over repeats
};

struct VerifyStepResult {
  int64_t tokens = 0;
  double seconds = 0;  // median over repeats
  double ratio = 0;    // to the median one-token step at the same context
};

struct PrefillResult {
  int64_t tokens = 0;
  double tok_per_s = 0;  // median over repeats
};

struct ModelBenchResult {
  std::vector<PrefillResult> prefill;
  double decode_tok_per_s = 0;    // median over repeats
  double decode_gb_per_s = 0;     // weight bytes read per token x tokens/s
  double bandwidth_gb_per_s = 0;  // measured read bandwidth (0 unless roofline)
  double roofline_fraction = 0;
  size_t decode_weight_bytes = 0;
  size_t llc_bytes = 0;    // the last-level cache (0: unknown)
  size_t probe_bytes = 0;  // the bandwidth probe's buffer, larger than that cache
  // Weights that fit in the last-level cache decode from cache: their roofline fraction can pass
  // 100% and says nothing about memory bandwidth.
  bool weights_fit_in_llc() const { return llc_bytes > 0 && decode_weight_bytes <= llc_bytes; }
  double kv_bytes_per_token =
      0;  // the decode run's cache after its last token (f16 copies included)
  int threads = 0;
  std::vector<BatchDecodeResult> batched;
  std::vector<VerifyStepResult> verify;
  std::vector<OpShare> ops;     // with op_profile: the batch-1 decode step by operation
  double profiled_step_us = 0;  // the profiled round's mean step (clock reads included)
};

ModelBenchResult run_model_bench(const model::Model& m, ThreadPool& pool,
                                 const ModelBenchOptions& opt);

}  // namespace shrike::model_bench
