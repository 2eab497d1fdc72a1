#include "train/inference_model.h"

#include "model/weight_binding.h"

namespace shrike::train {

std::unique_ptr<model::Model> to_inference_model(const Transformer<float>& t) {
  const std::vector<float>& p = t.params();
  const model::WeightSource src{
      [&](const std::string& name, int64_t rows, int64_t cols) {
        const ParamTensor& pt = t.tensor(name);
        return kernels::PackedMatrix::pack(DType::F32, rows, cols, p.data() + pt.offset);
      },
      [&](const std::string& name, int64_t n) {
        const ParamTensor& pt = t.tensor(name);
        return std::vector<float>(p.data() + pt.offset, p.data() + pt.offset + n);
      }};
  return std::make_unique<model::Model>(t.config(), model::bind_weights(t.config(), src));
}

}  // namespace shrike::train
