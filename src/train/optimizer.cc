#include "train/optimizer.h"

#include <cmath>
#include <stdexcept>

namespace shrike::train {

void adamw_step(std::vector<float>& params, const std::vector<float>& grads,
                const std::vector<ParamTensor>& layout, OptimizerState& state, double lr,
                const AdamWParams& hp, ThreadPool& pool, int64_t grad_begin) {
  if (grad_begin < 0 || grad_begin + int64_t(grads.size()) > int64_t(params.size()))
    throw std::invalid_argument("adamw: gradient size mismatch");
  if (state.m.size() != grads.size()) state.m.assign(grads.size(), 0.0f);
  if (state.v.size() != grads.size()) state.v.assign(grads.size(), 0.0f);
  const int64_t grad_end = grad_begin + int64_t(grads.size());
  ++state.step;
  const float b1 = float(hp.beta1), b2 = float(hp.beta2), eps = float(hp.eps);
  const float c1 = float(1.0 / (1.0 - std::pow(hp.beta1, double(state.step))));
  const float c2 = float(1.0 / (1.0 - std::pow(hp.beta2, double(state.step))));
  const float flr = float(lr);
  for (const ParamTensor& t : layout) {
    if (t.offset < grad_begin || t.offset + t.size() > grad_end) continue;  // frozen
    const float decay = t.is_norm() ? 0.0f : float(lr * hp.weight_decay);
    float* p = params.data() + t.offset;
    const float* g = grads.data() + (t.offset - grad_begin);
    float* m = state.m.data() + (t.offset - grad_begin);
    float* v = state.v.data() + (t.offset - grad_begin);
    pool.parallel_for(t.size(), 4096, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        m[i] = b1 * m[i] + (1.0f - b1) * g[i];
        v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
        const float update = (m[i] * c1) / (std::sqrt(v[i] * c2) + eps);
        p[i] -= flr * update + decay * p[i];
      }
    });
  }
}

double clip_grad_norm(std::vector<float>& grads, double max_norm) {
  double sum = 0.0;
  for (float g : grads) sum += double(g) * double(g);
  const double norm = std::sqrt(sum);
  if (max_norm > 0.0 && norm > max_norm) {
    const float scale = float(max_norm / norm);
    for (float& g : grads) g *= scale;
  }
  return norm;
}

double learning_rate(int64_t step, int64_t total_steps, int64_t warmup_steps, double peak,
                     double min_fraction) {
  if (warmup_steps > 0 && step < warmup_steps)
    return peak * double(step + 1) / double(warmup_steps);
  const double span = double(std::max<int64_t>(1, total_steps - warmup_steps));
  const double progress = std::min(1.0, double(step - warmup_steps) / span);
  const double cosine = 0.5 * (1.0 + std::cos(3.141592653589793 * progress));
  return peak * (min_fraction + (1.0 - min_fraction) * cosine);
}

}  // namespace shrike::train
