// Hugging Face model folders (config.json + model.safetensors or sharded safetensors) for the
// llama, mistral, qwen2, qwen3, gemma2, gemma3 and phi3 architectures, seen in GGUF terms: the
// configuration as a ModelConfig and every tensor under its llama.cpp name and dimension order.
// Loading and `shrike convert` share this view, so a folder loaded directly and the GGUF converted
// from it hold the same weights bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"
#include "safetensors/safetensors.h"

namespace shrike::gguf {
class GgufFile;
class GgufWriter;
}  // namespace shrike::gguf

namespace shrike::model {

class HfCheckpoint {
 public:
  // One tensor the model uses. Hugging Face stores q_proj/k_proj of llama and mistral with each
  // head's rotary pairs split in halves (NeoX order); llama.cpp's converter permutes those rows
  // to adjacent pairs, and so does read(): the config then says RopeLayout::Adjacent, exactly as
  // for the converted GGUF. Qwen2 is NeoX in GGUF too and is not permuted.
  struct TensorInfo {
    std::string name;     // GGUF name: "blk.0.attn_q.weight"
    std::string hf_name;  // "model.layers.0.self_attn.q_proj.weight"
    DType type = DType::F32;
    std::vector<int64_t> dims;     // GGUF order: dims[0] is the contiguous one
    int64_t permute_heads = 0;     // > 0: rows are reordered per head as described above
    DType file_type = DType::F32;  // with plus_one: the type in the safetensors file
    bool plus_one = false;         // a Gemma norm weight: read as f32 of 1 + the stored value
  };

  // Reads dir/config.json and opens the weights; checks every tensor the configuration implies
  // for presence, dtype (F32, F16, BF16) and shape. Throws FileError with one line naming the
  // file: missing or wrong-typed config fields, an unsupported architecture or rope_scaling,
  // implausible sizes, a missing or misshapen tensor, anything the safetensors reader rejects.
  static HfCheckpoint open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  // "llama" for llama and mistral (llama.cpp converts both to it), "qwen2" for qwen2.
  const std::string& gguf_architecture() const { return config_.architecture; }
  // In GGUF file order: token_embd, each block, output_norm, output (absent when tied).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& gguf_name) const;

  // The tensor's bytes in its file type, rows in GGUF order. Returns a pointer into the file
  // mapping when nothing needs reordering or aligning, otherwise fills scratch and returns it.
  const uint8_t* data(const TensorInfo& t, std::vector<uint8_t>& scratch) const;

 private:
  std::string dir_;
  ModelConfig config_;
  safetensors::Checkpoint weights_;
  std::vector<TensorInfo> tensors_;
};

// Writes the model part of a GGUF (general.*, ARCH.* hyper-parameters as llama.cpp's
// convert_hf_to_gguf.py names them, rope_freqs for Llama-3 scaling, and every tensor under its
// llama.cpp name). Matrices become `type` (F32, F16, BF16 or Q8_0; Q8_0 rows that are not a
// multiple of 32 fall back to F16, as llama.cpp does); vectors stay F32. A matrix already of
// `type` is copied bit for bit. The tokenizer keys are the caller's.
void add_hf_model_to_gguf(const HfCheckpoint& ckpt, DType type, gguf::GgufWriter& w);

// The inverse: the model of a GGUF file (any weight type, dequantised) as a Hugging Face folder's
// config.json and model.safetensors in `type` (F32, F16 or BF16), q/k rows back in Hugging Face's
// half-split order for llama, Llama-3 frequency divisors as config.json's llama3 rope_scaling.
// HfCheckpoint::open of the folder gives the same configuration and weights. The tokenizer
// files are the caller's (tokenizer/hf_tokenizer_writer.h). Throws FileError naming the file.
void write_hf_model(const gguf::GgufFile& f, const std::string& dir, DType type);

}  // namespace shrike::model
