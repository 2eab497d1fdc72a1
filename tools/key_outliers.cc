#include "tools/key_outliers.h"

#include <stdexcept>
#include <vector>

#include "gguf/gguf.h"

namespace shrike::tools {

void plant_key_outliers(const std::string& in, const std::string& out, double scale, int64_t pair) {
  if (!(scale > 0)) throw std::invalid_argument("plant_key_outliers: scale must be positive");
  const gguf::GgufFile f = gguf::GgufFile::open(in);
  const int64_t n_head = f.get_int("llama.attention.head_count");
  const int64_t n_kv = f.get_int("llama.attention.head_count_kv");
  const int64_t dim = f.get_int("llama.embedding_length");
  if (n_head <= 0 || n_kv <= 0 || n_head % n_kv != 0 || dim % n_head != 0)
    throw std::invalid_argument(in + ": head counts do not divide the model width");
  const int64_t head_dim = int64_t(f.get_uint_or("llama.attention.key_length", dim / n_head));
  if (pair < 0) pair = head_dim / 2 - 1;
  if (pair >= head_dim / 2)
    throw std::invalid_argument("plant_key_outliers: pair " + std::to_string(pair) +
                                " is past the head's " + std::to_string(head_dim / 2) + " pairs");

  gguf::GgufWriter w;
  for (const std::string& key : f.keys()) w.set_value(key, *f.find(key));
  for (const gguf::TensorInfo& t : f.tensors()) {
    std::vector<uint8_t> data(t.data, t.data + t.bytes);
    const bool is_k = t.name.ends_with(".attn_k.weight");
    const bool is_q = t.name.ends_with(".attn_q.weight");
    if (is_k || is_q) {
      const int64_t heads = is_k ? n_kv : n_head;
      if (t.type != DType::F32 || t.dims.size() != 2 || t.dims[1] != heads * head_dim)
        throw std::invalid_argument(in + ": " + t.name + " is not an F32 matrix of " +
                                    std::to_string(heads * head_dim) + " rows");
      float* m = reinterpret_cast<float*>(data.data());
      const int64_t cols = t.dims[0];
      const float factor = float(is_k ? scale : 1.0 / scale);
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t r = h * head_dim + 2 * pair; r < h * head_dim + 2 * pair + 2; ++r)
          for (int64_t j = 0; j < cols; ++j) m[r * cols + j] *= factor;
    }
    w.add_tensor(t.name, t.type, t.dims, data.data(), data.size());
  }
  w.write(out);
}

}  // namespace shrike::tools
