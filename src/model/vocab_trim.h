// A model GGUF with fewer tokens: the rows of every vocabulary-sized tensor (token_embd, output)
// and the tokenizer.ggml.* arrays keep only the chosen ids, in their old order; special token
// ids and <arch>.vocab_size follow; every other key and tensor is copied unchanged. Which ids to
// keep is tokenizer/vocab_trim.h's business (`shrike trim-vocab` joins the two).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shrike::gguf {
class GgufFile;
}

namespace shrike::model {

// The key recording, for each token of a trimmed model, its id in the model it was trimmed from
// (composed across repeated trims): how a caller maps the trimmed model's ids back, e.g. to
// compare it with the full model under a mask of the kept ids.
inline constexpr const char* kTrimSourceIdsKey = "shrike.vocab_trim.source_ids";

// Ids the tokenizer metadata names (tokenizer.ggml.*_token_id): they must be kept.
std::vector<int32_t> special_token_ids(const gguf::GgufFile& f);

struct VocabTrimStats {
  int64_t vocab_before = 0, vocab_after = 0;
  int64_t params_before = 0, params_after = 0;  // elements of all tensors
};

// Writes `in` with only the `kept` tokens (sorted, unique ids of its vocabulary) to out_path.
// Rows are whole quantisation blocks in every weight type, so they are copied byte for byte.
// A byte-level BPE file's tokenizer.ggml.merges is replaced by `merges` (the kept pieces' merges,
// tokenizer::kept_merges). Throws FileError "PATH: ..." when the file has no
// tokenizer.ggml.tokens, holds merges but `merges` is null, has a per-token tensor that is not one
// whole-block row per token, or a special token id that is not kept; std::invalid_argument for kept
// ids that are not sorted, unique and in range.
VocabTrimStats trim_model_vocab(const gguf::GgufFile& in, const std::vector<int32_t>& kept,
                                const std::string& out_path,
                                const std::vector<std::string>* merges = nullptr);

}  // namespace shrike::model
