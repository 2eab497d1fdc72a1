// AdamW with decoupled weight decay, global-norm gradient clipping and the warm-up + cosine
// learning-rate schedule: the optimizer llm.c and nanoGPT train small Llama models with.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "train/checkpoint.h"
#include "train/transformer.h"

namespace shrike::train {

struct AdamWParams {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;  // applied to matrices only; norm weights are not decayed
};

// One update of every parameter that has a gradient; state.step is incremented first (bias
// correction uses it). grads (and the moments in state) cover parameters [grad_begin,
// grad_begin + grads.size()); tensors outside that window are frozen and left as they are.
void adamw_step(std::vector<float>& params, const std::vector<float>& grads,
                const std::vector<ParamTensor>& layout, OptimizerState& state, double lr,
                const AdamWParams& hp, ThreadPool& pool, int64_t grad_begin = 0);

// Scales grads so that their global L2 norm is at most max_norm (max_norm <= 0: no clipping).
// Returns the norm before clipping.
double clip_grad_norm(std::vector<float>& grads, double max_norm);

// Linear warm-up over warmup_steps to peak, then cosine decay to min_fraction * peak at
// total_steps.
double learning_rate(int64_t step, int64_t total_steps, int64_t warmup_steps, double peak,
                     double min_fraction);

}  // namespace shrike::train
