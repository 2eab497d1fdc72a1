// HfCheckpoint -> the model half of a GGUF, with the keys and tensor names llama.cpp's
// convert_hf_to_gguf.py writes, so llama.cpp loads the result as well as shrike.
#include <filesystem>
#include <stdexcept>

#include "gguf/gguf.h"
#include "model/hf_model.h"
#include "model/model.h"

namespace shrike::model {
namespace {

// llama.cpp's file-type numbering (LLAMA_FTYPE_*).
uint32_t file_type(DType t) {
  switch (t) {
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::Q8_0:
      return 7;
    case DType::BF16:
      return 32;
    default:
      break;
  }
  throw std::invalid_argument("convert: output type " + std::string(dtype_name(t)) +
                              " is not supported (f32, f16, bf16, q8_0)");
}

}  // namespace

void add_hf_model_to_gguf(const HfCheckpoint& ck, DType type, gguf::GgufWriter& w) {
  const ModelConfig& c = ck.config();
  add_config_to_gguf(c, w);
  std::string name = std::filesystem::path(ck.dir()).filename().string();
  if (name.empty()) name = std::filesystem::path(ck.dir()).parent_path().filename().string();
  w.set_string("general.name", name.empty() ? "model" : name);
  w.set_uint32("general.file_type", file_type(type));

  std::vector<uint8_t> scratch, out;
  std::vector<float> row;
  for (const auto& t : ck.tensors()) {
    const uint8_t* src = ck.data(t, scratch);
    const int64_t cols = t.dims[0];
    const int64_t rows = t.dims.size() == 2 ? t.dims[1] : 1;
    DType to = t.dims.size() == 1 ? DType::F32 : type;
    if (to == DType::Q8_0 && cols % kQuantBlock != 0) to = DType::F16;
    const size_t src_row = size_t(dtype_row_bytes(t.type, cols));
    if (to == t.type) {
      w.add_tensor(t.name, to, t.dims, src, src_row * size_t(rows));
      continue;
    }
    const size_t dst_row = size_t(dtype_row_bytes(to, cols));
    out.resize(dst_row * size_t(rows));
    row.resize(size_t(cols));
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(t.type, src + size_t(r) * src_row, row.data(), cols);
      quantize_row(to, row.data(), out.data() + size_t(r) * dst_row, cols);
    }
    w.add_tensor(t.name, to, t.dims, out.data(), out.size());
  }
}

}  // namespace shrike::model
