// Request traces: arrival time plus prompt/output token counts (and, for Mooncake, the prompt's
// 512-token block hash ids). Three formats, told apart by content:
//   - Azure LLM inference 2023 CSV: header `TIMESTAMP,ContextTokens,GeneratedTokens`, wall-clock
//     timestamps `YYYY-MM-DD HH:MM:SS.fffffff`;
//   - Mooncake JSONL: {"timestamp": ms, "input_length", "output_length", "hash_ids": [...]};
//   - our JSONL: {"timestamp": s, "input_tokens", "output_tokens", optional "hash_ids"}.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shrike::loadtest {

struct TraceEntry {
  double t = 0;  // seconds since the first entry of the file
  int64_t input_tokens = 0, output_tokens = 0;
  std::vector<int64_t> hash_ids;  // empty when the trace has none
};

// Reads a whole trace, sorted by time and shifted so the first entry is at 0. Throws FileError
// "PATH:LINE: problem" for unreadable files and malformed lines.
std::vector<TraceEntry> read_trace(const std::string& path);

// Parses trace text as if read from `name` (used by read_trace and by tests).
std::vector<TraceEntry> parse_trace(const std::string& text, const std::string& name);

// Keeps entries with window_start <= t < window_end (trace seconds) and shifts them to start at
// 0, then divides times by `speedup` and multiplies token counts by `length_scale` (at least 1
// token). window_end <= 0 means no upper bound.
std::vector<TraceEntry> transform_trace(std::vector<TraceEntry> entries, double speedup,
                                        double length_scale, double window_start,
                                        double window_end);

}  // namespace shrike::loadtest
