#include "loadtest/prompts.h"

#include <nlohmann/json.hpp>

#include "core/file_buffer.h"
#include "core/jsonl.h"

namespace shrike::loadtest {
namespace {

// Frequent words that are single tokens (with their leading space) in Llama 2 and Llama 3.
constexpr const char* kWords[] = {
    "the",  "of",    "and",   "to",    "in",    "is",    "that",  "for",    "it",    "as",
    "was",  "with",  "be",    "by",    "on",    "not",   "he",    "this",   "are",   "or",
    "his",  "from",  "at",    "which", "but",   "have",  "an",    "had",    "they",  "you",
    "were", "their", "one",   "all",   "we",    "can",   "her",   "has",    "there", "been",
    "if",   "more",  "when",  "will",  "would", "who",   "so",    "no",     "time",  "people",
    "year", "way",   "day",   "man",   "thing", "world", "life",  "hand",   "part",  "child",
    "eye",  "woman", "place", "work",  "week",  "case",  "point", "number", "group", "problem",
    "fact", "good",  "new",   "first", "last",  "long",  "great", "little", "own",   "other",
    "old",  "right", "big",   "high",  "small", "large", "next",  "early",  "young", "water"};
constexpr uint64_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

std::string synth_prompt(int64_t tokens, const std::vector<int64_t>& hash_ids,
                         uint64_t request_index, uint64_t seed) {
  std::string out;
  out.reserve(tokens * 6);
  for (int64_t i = 0; i < tokens; ++i) {
    const int64_t block = i / kHashBlockTokens;
    // Key each word by (block source, position in block) so equal hash ids give equal text.
    const uint64_t source = block < (int64_t)hash_ids.size()
                                ? splitmix(seed ^ 0x68617368ull) ^ (uint64_t)hash_ids[block]
                                : splitmix(seed ^ splitmix(request_index)) + (uint64_t)block;
    const uint64_t h = splitmix(splitmix(source) + (uint64_t)(i % kHashBlockTokens));
    if (i) out += ' ';
    out += kWords[h % kNumWords];
  }
  return out;
}

std::vector<PromptEntry> read_prompts(const std::string& path) {
  std::vector<PromptEntry> out;
  for_each_jsonl_object_in_file(path, [&](const nlohmann::json& j, const std::string& where) {
    // "text": the task data's utterances (data gen's JSONL) drive --endpoint intent as they are.
    const char* key = j.contains("prompt") ? "prompt" : "text";
    if (!j.contains(key) || !j[key].is_string())
      throw FileError(where + "expected {\"prompt\": \"...\"} or {\"text\": \"...\"}");
    PromptEntry e{j[key].get<std::string>()};
    if (j.contains("max_tokens")) {
      if (!j["max_tokens"].is_number_integer() || j["max_tokens"].get<int64_t>() < 1)
        throw FileError(where + "\"max_tokens\" must be a positive integer");
      e.max_tokens = j["max_tokens"].get<int64_t>();
    }
    out.push_back(std::move(e));
  });
  if (out.empty()) throw FileError(path + ": no prompts");
  return out;
}

}  // namespace shrike::loadtest
