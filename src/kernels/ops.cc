// Dispatch of the element-wise kernels. (First version: the scalar references; SIMD variants are
// added per ISA.)
#include "kernels/ops.h"

namespace shrike::kernels {

void rmsnorm(float* out, const float* x, const float* weight, int64_t n, float eps) {
  reference::rmsnorm(out, x, weight, n, eps);
}
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dims, const float* cos_sin,
          RopeLayout layout) {
  reference::rope(x, n_heads, head_dim, rot_dims, cos_sin, layout);
}
void silu_mul(float* out, const float* gate, const float* up, int64_t n) {
  reference::silu_mul(out, gate, up, n);
}
void softmax(float* x, int64_t n) { reference::softmax(x, n); }
void attention(const AttentionShape& s, const float* q, const KvRows& k, const KvRows& v, float* out,
               ThreadPool& pool) {
  reference::attention(s, q, k, v, out);
}

}  // namespace shrike::kernels
