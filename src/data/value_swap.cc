#include "data/value_swap.h"

#include <algorithm>
#include <map>
#include <string>
#include <string_view>

#include "data/rng.h"

namespace shrike::data {
namespace {

// The units random values are made of: words where the text separates them with spaces, code
// points where it does not (Chinese, Japanese).
bool spaced(std::string_view text) {
  return text.find(' ') != std::string_view::npos;
}

std::vector<std::string> split_units(std::string_view s, bool words) {
  std::vector<std::string> out;
  if (words) {
    size_t i = 0;
    while (i < s.size()) {
      const size_t end = std::min(s.find(' ', i), s.size());
      std::string_view w = s.substr(i, end - i);
      while (!w.empty() && std::string_view(".,!?;:").find(w.back()) != std::string_view::npos)
        w.remove_suffix(1);
      if (!w.empty()) out.emplace_back(w);
      i = end + 1;
    }
    return out;
  }
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    out.emplace_back(s.substr(i, std::min(len, s.size() - i)));
    i += len;
  }
  return out;
}

struct Span {
  size_t begin, end;
  std::string name;
};

// Each value's first occurrence, in text order; empty when a value is missing or two overlap.
std::vector<Span> value_spans(const Example& ex) {
  std::vector<Span> spans;
  for (const auto& [name, value] : ex.slots) {
    const size_t at = ex.text.find(value);
    if (value.empty() || at == std::string::npos) return {};
    spans.push_back({at, at + value.size(), name});
  }
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].begin < spans[i - 1].end) return {};
  return spans;
}

}  // namespace

std::vector<Example> swap_slot_values(const std::vector<Example>& examples,
                                      const ValueSwapOptions& opt) {
  std::map<std::string, std::vector<std::string>> values_by_name;
  std::vector<std::string> words, characters;
  for (const Example& ex : examples) {
    for (const auto& [name, value] : ex.slots) values_by_name[name].push_back(value);
    const bool w = spaced(ex.text);
    for (std::string& u : split_units(ex.text, w)) (w ? words : characters).push_back(std::move(u));
  }
  std::vector<Example> out;
  Rng rng(opt.seed ^ 0x5157415053ull);
  for (int64_t copy = 0; copy < opt.copies; ++copy) {
    for (const Example& ex : examples) {
      const std::vector<Span> spans = value_spans(ex);
      if (spans.empty()) continue;
      const bool w = spaced(ex.text);
      const std::vector<std::string>& pool = w ? words : characters;
      Example swapped = ex;
      swapped.text.clear();
      size_t done = 0;
      for (const Span& s : spans) {
        const std::string& old_value = ex.slots.at(s.name);
        std::string value;
        if (!pool.empty() && rng.chance(opt.random_word_fraction)) {
          const size_t n = std::max<size_t>(1, split_units(old_value, w).size());
          for (size_t i = 0; i < n; ++i) {
            if (i > 0 && w) value += ' ';
            value += rng.pick(pool);
          }
        } else {
          value = rng.pick(values_by_name.at(s.name));
        }
        swapped.text.append(ex.text, done, s.begin - done);
        swapped.text += value;
        swapped.slots[s.name] = value;
        done = s.end;
      }
      swapped.text.append(ex.text, done);
      out.push_back(std::move(swapped));
    }
  }
  return out;
}

}  // namespace shrike::data
