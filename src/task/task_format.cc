#include "task/task_format.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

namespace shrike::task {
namespace {

// The index one past the '}' that closes the object opening at text[open], or npos when the text
// ends first. Braces inside strings do not count.
size_t object_end(std::string_view text, size_t open) {
  int64_t depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = open; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

size_t skip_space(std::string_view text, size_t i) {
  while (i < text.size() &&
         (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r'))
    ++i;
  return i;
}

// The string value of the first complete `"intent": "..."` pair in text, or "" when none.
std::string recover_intent(std::string_view text) {
  constexpr std::string_view key = "\"intent\"";
  for (size_t at = text.find(key); at != std::string_view::npos; at = text.find(key, at + 1)) {
    size_t i = skip_space(text, at + key.size());
    if (i >= text.size() || text[i] != ':') continue;
    i = skip_space(text, i + 1);
    if (i >= text.size() || text[i] != '"') continue;
    size_t end = i + 1;
    while (end < text.size() && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
    if (end >= text.size()) return "";  // the value itself was cut off
    const auto value = nlohmann::json::parse(text.substr(i, end + 1 - i), nullptr, false);
    if (value.is_string()) return value.get<std::string>();
  }
  return "";
}

}  // namespace

std::string task_utterance(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;  // CRLF: one
    out += text[i] == '\n' || text[i] == '\r' ? ' ' : text[i];
  }
  return out;
}

std::string PromptFormat::text(std::string_view utterance) const {
  return prefix + task_utterance(utterance) + suffix;
}

std::string task_prompt(std::string_view text) {
  return PromptFormat{}.text(text);
}

namespace {

// Where value first occurs in text: exactly, else ignoring ASCII case; npos when it does not.
size_t value_position(std::string_view text, std::string_view value) {
  if (value.empty()) return std::string_view::npos;
  const size_t exact = text.find(value);
  if (exact != std::string_view::npos) return exact;
  const auto lower = [](unsigned char c) { return c >= 'A' && c <= 'Z' ? char(c + 32) : char(c); };
  std::string folded_text(text), folded_value(value);
  for (char& c : folded_text) c = lower(static_cast<unsigned char>(c));
  for (char& c : folded_value) c = lower(static_cast<unsigned char>(c));
  return folded_text.find(folded_value);
}

}  // namespace

std::string task_answer(const data::Example& example) {
  nlohmann::ordered_json j;
  j["intent"] = example.intent;
  j["slots"] = nlohmann::ordered_json::object();
  // Slots in the order their values appear in the utterance, so that the answer reads the
  // utterance left to right, one span after another (ties and values not in the text after, by
  // name).
  std::vector<std::pair<size_t, const std::pair<const std::string, std::string>*>> order;
  for (const auto& slot : example.slots)
    order.emplace_back(value_position(example.text, slot.second), &slot);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [position, slot] : order) j["slots"][slot->first] = slot->second;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

TaskPrediction parse_task_answer(std::string_view generated) {
  TaskPrediction pred;
  const size_t open = generated.find('{');
  if (open == std::string_view::npos) return pred;
  const size_t end = object_end(generated, open);
  if (end == std::string_view::npos) {
    pred.intent = recover_intent(generated.substr(open));
    return pred;
  }
  const auto j = nlohmann::json::parse(generated.substr(open, end - open), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    pred.intent = recover_intent(generated.substr(open, end - open));
    return pred;
  }
  const auto intent = j.find("intent");
  if (intent == j.end() || !intent->is_string()) return pred;
  pred.intent = intent->get<std::string>();
  const auto slots = j.find("slots");
  if (slots != j.end() && !slots->is_null()) {
    if (!slots->is_object()) return pred;
    for (const auto& [name, value] : slots->items()) {
      if (value.is_string())
        pred.slots[name] = value.get<std::string>();
      else if (value.is_number() || value.is_boolean())
        pred.slots[name] = value.dump();
    }
  }
  pred.parsed = true;
  return pred;
}

}  // namespace shrike::task
