#include "loadtest/sse.h"

#include <nlohmann/json.hpp>

namespace shrike::loadtest {
namespace {

constexpr size_t kBodyCap = 1 << 20;

void read_usage(const nlohmann::json& j, int64_t& prompt, int64_t& completion) {
  const auto u = j.find("usage");
  if (u == j.end() || !u->is_object()) return;
  if (auto p = u->find("prompt_tokens"); p != u->end() && p->is_number_integer())
    prompt = p->get<int64_t>();
  if (auto c = u->find("completion_tokens"); c != u->end() && c->is_number_integer())
    completion = c->get<int64_t>();
}

std::string error_text(const nlohmann::json& e) {
  if (e.is_string()) return e.get<std::string>();
  if (e.is_object() && e.contains("message") && e["message"].is_string())
    return e["message"].get<std::string>();
  return e.dump();
}

}  // namespace

void ResponseParser::feed(std::string_view data, double t) {
  if (!stream_) {
    if (body_.size() < kBodyCap) body_.append(data.substr(0, kBodyCap - body_.size()));
    return;
  }
  // Only a partial last line is kept between calls; complete lines are parsed at once so each
  // token is stamped with the time its bytes arrived.
  size_t start = 0;
  while (true) {
    const size_t nl = data.find('\n', start);
    if (nl == std::string_view::npos) break;
    if (pending_.empty()) {
      line(data.substr(start, nl - start), t);
    } else {
      pending_.append(data.substr(start, nl - start));
      line(pending_, t);
      pending_.clear();
    }
    start = nl + 1;
  }
  pending_.append(data.substr(start));
}

void ResponseParser::finish(double t) {
  if (stream_) {
    if (!pending_.empty()) line(pending_, t);
    pending_.clear();
    return;
  }
  if (body_.empty()) return;
  nlohmann::json j = nlohmann::json::parse(body_, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    error_ = "response is not a JSON object";
    return;
  }
  if (j.contains("error")) {
    error_ = error_text(j["error"]);
    return;
  }
  read_usage(j, usage_prompt_, usage_completion_);
  token_times_.push_back(t);  // the whole answer arrives at once
}

void ResponseParser::line(std::string_view l, double t) {
  if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
  if (l.size() < 5 || l.substr(0, 5) != "data:") {
    // Other SSE fields (event:, id:, comments) and blank separators carry no tokens; a body that
    // is not SSE at all (e.g. a JSON error) is kept for the error message.
    if (!l.empty() && l.front() != ':' && body_.size() < kBodyCap) body_.append(l).append("\n");
    return;
  }
  l.remove_prefix(5);
  if (!l.empty() && l.front() == ' ') l.remove_prefix(1);
  if (l == "[DONE]") {
    done_ = true;
    return;
  }
  event(l, t);
}

void ResponseParser::event(std::string_view json, double t) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    if (error_.empty()) error_ = "unparsable SSE event: " + std::string(json.substr(0, 200));
    return;
  }
  if (j.contains("error")) {
    error_ = error_text(j["error"]);
    return;
  }
  read_usage(j, usage_prompt_, usage_completion_);
  const auto ch = j.find("choices");
  if (ch == j.end() || !ch->is_array() || ch->empty()) return;
  const auto& c = (*ch)[0];
  const nlohmann::json* text = nullptr;
  if (chat_) {
    if (auto d = c.find("delta"); d != c.end() && d->is_object())
      if (auto ct = d->find("content"); ct != d->end()) text = &*ct;
  } else if (auto tx = c.find("text"); tx != c.end()) {
    text = &*tx;
  }
  if (text && text->is_string() && !text->get_ref<const std::string&>().empty())
    token_times_.push_back(t);
}

}  // namespace shrike::loadtest
