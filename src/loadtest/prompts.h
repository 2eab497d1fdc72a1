// Prompt text for a requested token count. Without a tokenizer for the server's model, prompts are
// made of common lower-case English words each preceded by a space ("the", "of", "time", ...):
// each of those is one token in the Llama 2 (SentencePiece) and Llama 3 / GPT (tiktoken BPE)
// vocabularies, so N words are about N prompt tokens (+1 for BOS, +a few for chat templates).
// The server's `usage.prompt_tokens`, when sent, is what the report uses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shrike::loadtest {

// Tokens per shared prefix block in Mooncake traces.
inline constexpr int64_t kHashBlockTokens = 512;

// Deterministic prompt text of `tokens` words. Block k (of kHashBlockTokens words) is drawn from
// hash_ids[k] when present, so requests sharing a block hash share that block's text (and can
// reuse its KV cache as a prefix); the rest comes from `request_index`, so unrelated requests do
// not share prefixes by accident.
std::string synth_prompt(int64_t tokens, const std::vector<int64_t>& hash_ids,
                         uint64_t request_index, uint64_t seed);

struct PromptEntry {
  std::string prompt;
  int64_t max_tokens = -1;  // -1: use the schedule's output length
};

// `--prompts F.jsonl`: one {"prompt": "...", optional "max_tokens": n} per line ("text" in place
// of "prompt": the task data's utterances). Throws FileError
// naming the file and line.
std::vector<PromptEntry> read_prompts(const std::string& path);

}  // namespace shrike::loadtest
