#include "model/vocab_trim.h"

#include <cstring>
#include <stdexcept>

#include "core/dtype.h"
#include "core/file_buffer.h"
#include "gguf/gguf.h"

namespace shrike::model {
namespace {

constexpr std::string_view kTokenizerPrefix = "tokenizer.ggml.";

bool is_special_id_key(std::string_view key) {
  return key.starts_with(kTokenizerPrefix) && key.ends_with("_token_id");
}

// Vocabulary-sized tensors outside the blocks: one row per token ([dim, n_vocab]: token_embd,
// output) or one value per token ([n_vocab]: the row scales of q8_c and fp8 matrices,
// "output.weight.scale"). Inside a block a dimension equal to n_vocab is a coincidence of
// shapes, not a token index.
bool is_per_token(const gguf::TensorInfo& t, int64_t n_vocab) {
  return !t.name.starts_with("blk.") && !t.dims.empty() && t.dims.size() <= 2 &&
         t.dims.back() == n_vocab;
}

}  // namespace

std::vector<int32_t> special_token_ids(const gguf::GgufFile& f) {
  std::vector<int32_t> ids;
  for (const std::string& key : f.keys()) {
    if (!is_special_id_key(key)) continue;
    const int64_t id = f.get_int(key);
    if (id >= 0 && id != int64_t(0xFFFFFFFF)) ids.push_back(int32_t(id));  // -1/~0: "none"
  }
  return ids;
}

VocabTrimStats trim_model_vocab(const gguf::GgufFile& in, const std::vector<int32_t>& kept,
                                const std::string& out_path,
                                const std::vector<std::string>* merges) {
  const std::string& path = in.path();
  const gguf::Value* tokens = in.find("tokenizer.ggml.tokens");
  if (!tokens)
    throw FileError(path +
                    ": no vocabulary (tokenizer.ggml.tokens); trimming needs the model's "
                    "own tokenizer");
  if (in.has("tokenizer.ggml.merges") && !merges)
    throw FileError(path +
                    ": byte-level BPE vocabulary (tokenizer.ggml.merges): trimming it needs the "
                    "kept merges (tokenizer::kept_merges)");
  const auto n_vocab = int64_t(tokens->array_size);
  // A padded embedding (more rows than tokens) would leave rows that no longer match an id.
  if (const gguf::TensorInfo* e = in.find_tensor("token_embd.weight");
      e && (e->dims.size() != 2 || e->dims[1] != n_vocab))
    throw FileError(path + ": token_embd.weight is not [dim, " + std::to_string(n_vocab) +
                    "] (one row per token of tokenizer.ggml.tokens)");
  std::vector<int32_t> new_id(size_t(n_vocab), -1);
  for (size_t i = 0; i < kept.size(); ++i) {
    if (kept[i] < 0 || kept[i] >= n_vocab || (i > 0 && kept[i] <= kept[i - 1]))
      throw std::invalid_argument(
          "trim_model_vocab: kept ids must be sorted, unique and within "
          "the " +
          std::to_string(n_vocab) + "-token vocabulary");
    new_id[size_t(kept[i])] = int32_t(i);
  }
  if (kept.empty()) throw std::invalid_argument("trim_model_vocab: no token kept");

  VocabTrimStats st;
  st.vocab_before = n_vocab;
  st.vocab_after = int64_t(kept.size());
  const std::string arch = in.get_string_or("general.architecture", "");

  gguf::GgufWriter w;
  for (const std::string& key : in.keys()) {
    gguf::Value v = *in.find(key);
    if (key == kTrimSourceIdsKey) continue;  // rewritten below, composed with this trim
    if (key == "tokenizer.ggml.merges" && merges) {
      // Before the per-token arrays: a merges list may happen to hold n_vocab entries.
      v.strings = *merges;
      v.array_size = merges->size();
    } else if (key.starts_with(kTokenizerPrefix) && v.type == gguf::ValueType::Array &&
               v.array_size == uint64_t(n_vocab)) {
      // tokens, scores, token_type (and any other per-token array): the kept entries, in order.
      auto pick = [&](auto& a) {
        if (a.empty()) return;
        std::remove_reference_t<decltype(a)> out;
        out.reserve(kept.size());
        for (int32_t id : kept) out.push_back(a[size_t(id)]);
        a = std::move(out);
      };
      pick(v.strings);
      pick(v.ints);
      pick(v.floats);
      v.array_size = kept.size();
    } else if (is_special_id_key(key)) {
      const int64_t id = in.get_int(key);
      if (id >= 0 && id < n_vocab) {
        if (new_id[size_t(id)] < 0)
          throw FileError(path + ": " + key + " = " + std::to_string(id) +
                          " names a token that is not kept");
        v.i = new_id[size_t(id)];
        v.u = uint64_t(new_id[size_t(id)]);
      }
    } else if (!arch.empty() && key == arch + ".vocab_size") {
      v.i = st.vocab_after;
      v.u = uint64_t(st.vocab_after);
    }
    w.set_value(key, std::move(v));
  }
  std::vector<int32_t> source(kept.begin(), kept.end());
  if (const gguf::Value* prev = in.find(kTrimSourceIdsKey);
      prev && prev->array_size == uint64_t(n_vocab) && prev->ints.size() == size_t(n_vocab))
    for (int32_t& id : source) id = int32_t(prev->ints[size_t(id)]);
  w.set_int32_array(kTrimSourceIdsKey, source);

  std::vector<uint8_t> rows;
  for (const gguf::TensorInfo& t : in.tensors()) {
    st.params_before += t.elements();
    if (!is_per_token(t, n_vocab)) {
      st.params_after += t.elements();
      w.add_tensor(t.name, t.type, t.dims, t.data, size_t(t.bytes));
      continue;
    }
    // A row is dims[0] elements in whole blocks (GGUF requires ne0 to be a multiple of the block
    // size; row-scale types keep their scales in the separate per-token ".scale" tensor), so no
    // block spans two tokens and rows copy byte for byte in every type.
    const int64_t per_token = t.dims.size() == 2 ? t.dims[0] : 1;
    if (per_token % dtype_block_elems(t.type) != 0 ||
        size_t(dtype_row_bytes(t.type, per_token)) * size_t(n_vocab) != t.bytes)
      throw FileError(path + ": tensor '" + t.name + "' (" + std::string(dtype_name(t.type)) +
                      ") does not hold one whole-block row per token");
    const auto row = size_t(dtype_row_bytes(t.type, per_token));
    rows.resize(row * kept.size());
    for (size_t i = 0; i < kept.size(); ++i)
      std::memcpy(rows.data() + i * row, t.data + size_t(kept[i]) * row, row);
    std::vector<int64_t> dims = t.dims;
    dims.back() = st.vocab_after;
    st.params_after += per_token * st.vocab_after;
    w.add_tensor(t.name, t.type, dims, rows.data(), rows.size());
  }
  w.write(out_path);
  return st;
}

}  // namespace shrike::model
