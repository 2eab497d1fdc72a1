// How inference feeds a task model its prompt, header-only so that the serving commands (and the
// static edge build, which has no training layer) share it with training and evaluation.
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
