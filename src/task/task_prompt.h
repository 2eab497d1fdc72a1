// A task prompt as the token ids a model reads (BOS first): what serving, evaluation and
// training all feed it, so the three cannot drift apart.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "task/task_format.h"
#include "tokenizer/tokenizer.h"

namespace shrike::task {

// The prompt alone (BOS included), as inference feeds it.
inline std::vector<int32_t> encode_task_prompt(const tokenizer::Tokenizer& tok,
                                               const std::string& text,
                                               const PromptFormat& format = {}) {
  return tok.encode(format.text(text), /*add_bos=*/true);
}

}  // namespace shrike::task
