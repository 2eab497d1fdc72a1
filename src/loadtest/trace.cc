#include "loadtest/trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/file_buffer.h"
#include "core/jsonl.h"

namespace shrike::loadtest {
namespace {

[[noreturn]] void fail(const std::string& name, size_t line, const std::string& what) {
  throw FileError(name + ":" + std::to_string(line) + ": " + what);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

int64_t parse_count(std::string_view s, const std::string& name, size_t line, const char* field) {
  s = trim(s);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0)
    fail(name, line, std::string("bad ") + field + " '" + std::string(s) + "'");
  return v;
}

// "2023-11-16 18:17:03.9799600" -> seconds since the epoch (as UTC; only differences matter).
double parse_azure_time(std::string_view s, const std::string& name, size_t line) {
  s = trim(s);
  std::tm tm{};
  int frac_start = 0;
  const std::string str(s);
  if (std::sscanf(str.c_str(), "%4d-%2d-%2d %2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &frac_start) != 6)
    fail(name, line, "bad TIMESTAMP '" + str + "' (expected YYYY-MM-DD HH:MM:SS.fffffff)");
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  double frac = 0;
  if (frac_start < (int)str.size()) {
    if (str[frac_start] != '.') fail(name, line, "bad TIMESTAMP '" + str + "'");
    double scale = 0.1;
    for (size_t i = frac_start + 1; i < str.size(); ++i, scale /= 10) {
      if (str[i] < '0' || str[i] > '9') fail(name, line, "bad TIMESTAMP '" + str + "'");
      frac += (str[i] - '0') * scale;
    }
  }
  return (double)timegm(&tm) + frac;
}

std::vector<TraceEntry> parse_azure(const std::string& text, const std::string& name) {
  std::vector<TraceEntry> out;
  std::istringstream in(text);
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    const auto l = trim(line);
    if (n == 1 || l.empty()) continue;  // header checked by the caller
    const auto c1 = l.find(','), c2 = l.find(',', c1 == l.npos ? c1 : c1 + 1);
    if (c1 == l.npos || c2 == l.npos || l.find(',', c2 + 1) != l.npos)
      fail(name, n, "expected 3 comma-separated fields TIMESTAMP,ContextTokens,GeneratedTokens");
    TraceEntry e;
    e.t = parse_azure_time(l.substr(0, c1), name, n);
    e.input_tokens = parse_count(l.substr(c1 + 1, c2 - c1 - 1), name, n, "ContextTokens");
    e.output_tokens = parse_count(l.substr(c2 + 1), name, n, "GeneratedTokens");
    out.push_back(std::move(e));
  }
  return out;
}

int64_t json_count(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end()) throw FileError(where + "missing \"" + key + "\"");
  if (!it->is_number_integer() || it->get<int64_t>() < 0)
    throw FileError(where + "\"" + key + "\" must be a non-negative integer");
  return it->get<int64_t>();
}

std::vector<TraceEntry> parse_jsonl(const std::string& text, const std::string& name) {
  std::vector<TraceEntry> out;
  std::istringstream in(text);
  for_each_jsonl_object(in, name, [&](const nlohmann::json& j, const std::string& where) {
    const auto ts = j.find("timestamp");
    if (ts == j.end() || !ts->is_number()) throw FileError(where + "missing numeric \"timestamp\"");
    TraceEntry e;
    // Mooncake names its fields input_length/output_length and counts milliseconds; our own
    // format uses input_tokens/output_tokens and seconds.
    if (j.contains("input_length")) {
      e.t = ts->get<double>() / 1000.0;
      e.input_tokens = json_count(j, "input_length", where);
      e.output_tokens = json_count(j, "output_length", where);
    } else {
      e.t = ts->get<double>();
      e.input_tokens = json_count(j, "input_tokens", where);
      e.output_tokens = json_count(j, "output_tokens", where);
    }
    if (!std::isfinite(e.t) || e.t < 0)
      throw FileError(where + "\"timestamp\" must be finite and >= 0");
    if (const auto h = j.find("hash_ids"); h != j.end()) {
      if (!h->is_array()) throw FileError(where + "\"hash_ids\" must be an array of integers");
      for (const auto& id : *h) {
        if (!id.is_number_integer())
          throw FileError(where + "\"hash_ids\" must be an array of integers");
        e.hash_ids.push_back(id.get<int64_t>());
      }
    }
    out.push_back(std::move(e));
  });
  return out;
}

}  // namespace

std::vector<TraceEntry> parse_trace(const std::string& text, const std::string& name) {
  const auto first_nl = text.find('\n');
  const auto first = trim(std::string_view(text).substr(0, first_nl));
  std::vector<TraceEntry> out;
  if (first.rfind("TIMESTAMP,", 0) == 0) {
    if (first != "TIMESTAMP,ContextTokens,GeneratedTokens")
      fail(name, 1, "unknown CSV header (expected TIMESTAMP,ContextTokens,GeneratedTokens)");
    out = parse_azure(text, name);
  } else if (!first.empty() && first.front() == '{') {
    out = parse_jsonl(text, name);
  } else {
    fail(name, 1, "unknown trace format (expected the Azure 2023 CSV header or JSON lines)");
  }
  if (out.empty()) throw FileError(name + ": trace has no requests");
  std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.t < b.t; });
  const double t0 = out.front().t;
  for (auto& e : out) e.t -= t0;
  return out;
}

std::vector<TraceEntry> read_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path + ": cannot open trace");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_trace(ss.str(), path);
}

std::vector<TraceEntry> transform_trace(std::vector<TraceEntry> entries, double speedup,
                                        double length_scale, double window_start,
                                        double window_end) {
  std::vector<TraceEntry> out;
  for (auto& e : entries) {
    if (e.t < window_start || (window_end > 0 && e.t >= window_end)) continue;
    e.t = (e.t - window_start) / speedup;
    e.input_tokens = std::max<int64_t>(1, std::llround(e.input_tokens * length_scale));
    e.output_tokens = std::max<int64_t>(1, std::llround(e.output_tokens * length_scale));
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace shrike::loadtest
