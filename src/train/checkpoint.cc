#include "train/checkpoint.h"

#include <filesystem>
#include <stdexcept>

#include "gguf/gguf.h"
#include "model/hf_model.h"
#include "model/model.h"
#include "tokenizer/hf_tokenizer.h"

namespace shrike::train {

void save_model(const Transformer<float>& model, const tokenizer::Vocab& vocab,
                const std::string& name, const std::string& path, const OptimizerState* state,
                const MetadataWriter& add_metadata, const std::string& chat_template) {
  const model::ModelConfig& c = model.config();
  if (vocab.size() != c.vocab_size)
    throw std::invalid_argument("save_model: the tokenizer has " + std::to_string(vocab.size()) +
                                " tokens but the model " + std::to_string(c.vocab_size));
  gguf::GgufWriter w;
  model::add_config_to_gguf(c, w);  // head sizes included when pruning changed them
  w.set_string("general.name", name);
  w.set_uint32("general.file_type", 0);  // all F32
  tokenizer::add_vocab_to_gguf(vocab, chat_template, w);
  if (add_metadata) add_metadata(w);
  const std::vector<float>& p = model.params();
  for (const ParamTensor& t : model.layout()) {
    const std::vector<int64_t> dims =
        t.is_norm() ? std::vector<int64_t>{t.cols} : std::vector<int64_t>{t.cols, t.rows};
    w.add_tensor(t.name, DType::F32, dims, p.data() + t.offset, size_t(t.size()) * 4);
  }
  if (state) {
    if (state->m.size() != p.size() || state->v.size() != p.size())
      throw std::invalid_argument("save_model: optimizer state does not match the parameters");
    w.set_uint64("shrike.train.step", uint64_t(state->step));
    w.add_tensor("shrike.train.adam_m", DType::F32, {int64_t(p.size())}, state->m.data(),
                 p.size() * 4);
    w.add_tensor("shrike.train.adam_v", DType::F32, {int64_t(p.size())}, state->v.data(),
                 p.size() * 4);
    if (!state->ema.empty()) {
      if (state->ema.size() != p.size())
        throw std::invalid_argument("save_model: weight average does not match the parameters");
      w.add_tensor("shrike.train.ema", DType::F32, {int64_t(p.size())}, state->ema.data(),
                   p.size() * 4);
    }
  }
  w.write(path);
}

namespace {

std::unique_ptr<Transformer<float>> make_trainable(const std::string& path,
                                                   const model::ModelConfig& c) {
  try {
    return std::make_unique<Transformer<float>>(c);
  } catch (const std::invalid_argument& e) {
    throw FileError(path + ": " + e.what());
  }
}

// A Hugging Face folder through HfCheckpoint: its tensors already carry GGUF names, shapes and
// row order (q/k permuted for llama and mistral), so the result is what the converted GGUF gives.
TrainableFile load_hf_trainable(const std::string& dir) {
  const auto ck = model::HfCheckpoint::open(dir);
  TrainableFile out;
  out.model = make_trainable(dir, ck.config());
  auto tok = tokenizer::load_hf_tokenizer(dir, ck.config().vocab_size);
  out.vocab = std::move(tok.vocab);
  out.chat_template = std::move(tok.chat_template);
  std::vector<float>& p = out.model->params();
  std::vector<uint8_t> scratch;
  for (const ParamTensor& t : out.model->layout()) {
    const model::HfCheckpoint::TensorInfo* info = ck.find(t.name);
    if (!info) throw FileError(dir + ": tensor '" + t.name + "' is missing");
    const uint8_t* src = ck.data(*info, scratch);
    const int64_t row_bytes = dtype_row_bytes(info->type, t.cols);
    for (int64_t r = 0; r < t.rows; ++r)
      dequantize_row(info->type, src + r * row_bytes, p.data() + t.offset + r * t.cols, t.cols);
  }
  return out;
}

}  // namespace

TrainableFile load_trainable(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return load_hf_trainable(path);
  const auto f = gguf::GgufFile::open(path);
  model::ModelConfig c = model::config_from_gguf(f);
  TrainableFile out;
  out.model = make_trainable(path, c);
  if (!f.has("tokenizer.ggml.tokens")) throw FileError(path + ": the model has no tokenizer");
  out.vocab = tokenizer::vocab_from_gguf(f);
  out.chat_template = f.get_string_or("tokenizer.chat_template", "");
  std::vector<float>& p = out.model->params();
  for (const ParamTensor& t : out.model->layout()) {
    const gguf::TensorInfo* info = f.find_tensor(t.name);
    if (!info) throw FileError(path + ": tensor '" + t.name + "' is missing");
    const bool shape_ok = t.is_norm() ? info->dims == std::vector<int64_t>{t.cols}
                                      : info->dims == std::vector<int64_t>{t.cols, t.rows};
    if (!shape_ok) throw FileError(path + ": tensor '" + t.name + "' has the wrong shape");
    const int64_t row_bytes = dtype_row_bytes(info->type, t.cols);
    const float* scales = nullptr;  // shrike's per-row types keep their scales beside
    if (dtype_has_row_scale(info->type)) {
      const gguf::TensorInfo* s = f.find_tensor(t.name + ".scale");
      if (!s || s->type != DType::F32 || s->elements() != t.rows)
        throw FileError(path + ": tensor '" + t.name + "' needs '" + t.name +
                        ".scale' (f32, one per row)");
      scales = reinterpret_cast<const float*>(s->data);
    }
    for (int64_t r = 0; r < t.rows; ++r)
      dequantize_row(info->type, info->data + r * row_bytes, p.data() + t.offset + r * t.cols,
                     t.cols, scales ? scales[r] : 1.0f);
  }
  if (f.has("shrike.train.step")) {
    out.state.step = int64_t(f.get_uint("shrike.train.step"));
    for (auto [name, dst] : {std::pair{"shrike.train.adam_m", &out.state.m},
                             std::pair{"shrike.train.adam_v", &out.state.v}}) {
      const gguf::TensorInfo* info = f.find_tensor(name);
      if (!info || info->type != DType::F32 || info->elements() != int64_t(p.size()))
        throw FileError(path + ": optimizer state '" + std::string(name) +
                        "' is missing or does not match the model");
      const float* src = reinterpret_cast<const float*>(info->data);
      dst->assign(src, src + p.size());
    }
    // The weight average is there only when training kept one (TrainOptions::ema).
    if (const gguf::TensorInfo* info = f.find_tensor("shrike.train.ema")) {
      if (info->type != DType::F32 || info->elements() != int64_t(p.size()))
        throw FileError(path + ": optimizer state 'shrike.train.ema' does not match the model");
      const float* src = reinterpret_cast<const float*>(info->data);
      out.state.ema.assign(src, src + p.size());
    }
  }
  return out;
}

}  // namespace shrike::train
