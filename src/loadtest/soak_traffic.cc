#include "loadtest/soak_traffic.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string_view>

namespace shrike::loadtest {
namespace {

using nlohmann::json;

const char* const kWords[] = {"once",  "upon", "a",   "time",  "there", "was",  "little", "girl",
                              "named", "lily", "she", "liked", "to",    "play", "in",     "the",
                              "park",  "with", "her", "dog",   "one",   "day",  "sun",    "happy"};

int64_t uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {  // [lo, hi]
  return std::uniform_int_distribution<int64_t>(lo, std::max(lo, hi))(rng);
}

std::string words(std::mt19937_64& rng, int64_t n) {
  std::string s;
  for (int64_t i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += kWords[uniform(rng, 0, std::size(kWords) - 1)];
  }
  return s;
}

// Sampling fields shared by the generation requests: greedy or sampled with a seed.
void sampling(json& j, std::mt19937_64& rng) {
  if (uniform(rng, 0, 1)) {
    j["temperature"] = 0.8;
    j["top_p"] = 0.95;
    j["seed"] = uniform(rng, 0, 1 << 30);
  } else {
    j["temperature"] = 0;
  }
}

void streaming(json& j, bool stream, std::mt19937_64& rng) {
  j["stream"] = stream;
  if (stream && uniform(rng, 0, 1)) j["stream_options"] = {{"include_usage", true}};
}

json completion(const SoakServerShape& s, std::mt19937_64& rng, int64_t max_tokens) {
  json j;
  if (!s.model.empty()) j["model"] = s.model;
  j["prompt"] = words(rng, uniform(rng, 1, 40));
  j["max_tokens"] = max_tokens;
  sampling(j, rng);
  return j;
}

json chat(const SoakServerShape& s, std::mt19937_64& rng, int64_t max_tokens) {
  json j;
  if (!s.model.empty()) j["model"] = s.model;
  json msgs = json::array();
  if (uniform(rng, 0, 3) == 0) msgs.push_back({{"role", "system"}, {"content", words(rng, 6)}});
  msgs.push_back({{"role", "user"}, {"content", words(rng, uniform(rng, 1, 30))}});
  j["messages"] = msgs;
  j["max_tokens"] = max_tokens;
  sampling(j, rng);
  return j;
}

// A long answer for the requests that must still be running when something happens to them.
int64_t long_answer(const SoakServerShape& s) {
  return std::max<int64_t>(8, std::min<int64_t>(s.context / 2, 400));
}

json token_prompt(const SoakServerShape& s, std::mt19937_64& rng, int64_t n) {
  json ids = json::array();
  for (int64_t i = 0; i < n; ++i) ids.push_back(uniform(rng, 3, s.vocab - 1));
  return ids;
}

}  // namespace

const char* soak_kind_name(SoakKind k) {
  switch (k) {
    case SoakKind::kCompletion:
      return "completion";
    case SoakKind::kCompletionStream:
      return "completion_stream";
    case SoakKind::kChat:
      return "chat";
    case SoakKind::kChatStream:
      return "chat_stream";
    case SoakKind::kDisconnect:
      return "disconnect_mid_stream";
    case SoakKind::kDeadline:
      return "deadline";
    case SoakKind::kLongPrompt:
      return "prompt_at_context_limit";
    case SoakKind::kBurst:
      return "burst";
    case SoakKind::kBadJson:
      return "bad_json";
    case SoakKind::kWrongType:
      return "wrong_type";
    case SoakKind::kOversize:
      return "oversize_body";
    case SoakKind::kOverContext:
      return "over_context";
    case SoakKind::kBadTokenId:
      return "bad_token_id";
    case SoakKind::kUnknownRoute:
      return "unknown_route";
    case SoakKind::kWrongMethod:
      return "wrong_method";
    case SoakKind::kCount:
      break;
  }
  return "?";
}

bool is_malformed(SoakKind k) {
  return k >= SoakKind::kBadJson && k < SoakKind::kCount;
}

const char* soak_outcome_name(SoakOutcome o) {
  switch (o) {
    case SoakOutcome::kCompleted:
      return "completed";
    case SoakOutcome::kDeadline:
      return "deadline";
    case SoakOutcome::kCancelled:
      return "cancelled";
    case SoakOutcome::kRefused429:
      return "429";
    case SoakOutcome::kRefused503:
      return "503";
    case SoakOutcome::kRejected4xx:
      return "rejected_4xx";
    case SoakOutcome::kServerError:
      return "5xx";
    case SoakOutcome::kUndocumented:
      return "undocumented";
    case SoakOutcome::kTransport:
      return "transport_error";
    case SoakOutcome::kCount:
      break;
  }
  return "?";
}

SoakRequest make_soak_request(SoakKind kind, const SoakServerShape& s, std::mt19937_64& rng) {
  if (s.vocab <= 3 && (kind == SoakKind::kLongPrompt || kind == SoakKind::kOverContext ||
                       kind == SoakKind::kBadTokenId))
    kind = SoakKind::kCompletion;  // no vocabulary size: no token-id prompts
  SoakRequest r;
  r.kind = kind;
  r.path = "/v1/completions";
  json j;
  switch (kind) {
    case SoakKind::kCompletion:
    case SoakKind::kCompletionStream:
      r.stream = kind == SoakKind::kCompletionStream;
      j = completion(s, rng, uniform(rng, 1, 48));
      streaming(j, r.stream, rng);
      break;
    case SoakKind::kChat:
    case SoakKind::kChatStream:
      r.path = "/v1/chat/completions";
      r.stream = kind == SoakKind::kChatStream;
      j = chat(s, rng, uniform(rng, 1, 48));
      streaming(j, r.stream, rng);
      break;
    case SoakKind::kDisconnect: {
      const bool is_chat = uniform(rng, 0, 1);
      if (is_chat) r.path = "/v1/chat/completions";
      j = is_chat ? chat(s, rng, long_answer(s)) : completion(s, rng, long_answer(s));
      j["ignore_eos"] = true;
      r.stream = true;
      r.hang_up_after_first_token = true;
      streaming(j, true, rng);
      break;
    }
    case SoakKind::kDeadline:
      r.stream = uniform(rng, 0, 1);
      j = completion(s, rng, long_answer(s));
      j["ignore_eos"] = true;
      j["timeout"] = 0.01 * double(uniform(rng, 1, 20));  // 10..200 ms
      streaming(j, r.stream, rng);
      break;
    case SoakKind::kLongPrompt: {
      const int64_t max_tokens = uniform(rng, 1, 8);
      r.stream = uniform(rng, 0, 1);
      j = completion(s, rng, max_tokens);
      j["prompt"] = token_prompt(s, rng, s.context - max_tokens);
      streaming(j, r.stream, rng);
      break;
    }
    case SoakKind::kBurst:
      j = completion(s, rng, uniform(rng, 4, 16));
      j["stream"] = false;
      break;
    case SoakKind::kBadJson: {
      static const char* const kBad[] = {"{\"prompt\": \"once\", ", "not json at all",
                                         "{\"prompt\": \"\xff\xfe\"}", "{\"prompt\": 'x'}", ""};
      r.body = kBad[uniform(rng, 0, std::size(kBad) - 1)];
      if (uniform(rng, 0, 3) == 0) r.body = std::string(200, '[') + std::string(200, ']');
      r.expected_status = 400;
      return r;
    }
    case SoakKind::kWrongType:
      switch (uniform(rng, 0, 3)) {
        case 0:
          j = {{"prompt", 5}};
          break;
        case 1:
          j = {{"prompt", "once"}, {"max_tokens", "ten"}};
          break;
        case 2:
          j = {{"prompt", "once"}, {"temperature", json::array({1})}};
          break;
        default:
          r.path = "/v1/chat/completions";
          j = {{"messages", "hello"}};
      }
      r.expected_status = 400;
      break;
    case SoakKind::kOversize:
      j = {{"prompt", std::string(size_t(s.max_body_bytes + (64 << 10)), 'a')}, {"max_tokens", 1}};
      r.expected_status = 413;
      break;
    case SoakKind::kOverContext:
      j = completion(s, rng, 1);
      j["prompt"] = token_prompt(s, rng, s.context);
      r.expected_status = 400;
      break;
    case SoakKind::kBadTokenId:
      j = completion(s, rng, 4);
      j["prompt"] = json::array({1, s.vocab + uniform(rng, 0, 1000)});
      r.expected_status = 400;
      break;
    case SoakKind::kUnknownRoute:
      r.path = uniform(rng, 0, 1) ? "/v1/complete" : "/v1/embeddings";
      j = completion(s, rng, 4);
      r.expected_status = 404;
      break;
    case SoakKind::kWrongMethod:
      r.method = "GET";
      r.expected_status = 405;
      return r;
    case SoakKind::kCount:
      break;
  }
  r.body = j.dump();
  return r;
}

bool sse_has_token(const std::string& body) {
  // A choice chunk with text: "text":"x..." (completions) or "content":"x..." (chat); the empty
  // strings of the role chunk do not count.
  for (std::string_view key : {"\"text\":\"", "\"content\":\""}) {
    for (size_t p = body.find(key); p != std::string::npos; p = body.find(key, p + 1))
      if (p + key.size() < body.size() && body[p + key.size()] != '"') return true;
  }
  return false;
}

namespace {

// finish_reason / finish_detail of choices[0] of one response object; false when absent.
bool read_finish(const json& j, std::string& reason, std::string& detail) {
  if (!j.is_object() || !j.contains("choices") || !j["choices"].is_array() || j["choices"].empty())
    return false;
  const json& c = j["choices"][0];
  if (!c.contains("finish_reason") || !c["finish_reason"].is_string()) return false;
  reason = c["finish_reason"].get<std::string>();
  if (c.contains("finish_detail") && c["finish_detail"].is_string())
    detail = c["finish_detail"].get<std::string>();
  return true;
}

SoakOutcome judge_finish(const std::string& reason, const std::string& detail, std::string* why) {
  if (reason != "stop" && reason != "length") {
    *why = "finish_reason \"" + reason + "\"";
    return SoakOutcome::kUndocumented;
  }
  if (detail.empty()) return SoakOutcome::kCompleted;
  if (detail == "deadline" && reason == "length") return SoakOutcome::kDeadline;
  *why = "finish_detail \"" + detail + "\" with finish_reason \"" + reason + "\"";
  return SoakOutcome::kUndocumented;
}

// A complete SSE body: every data line JSON (no error event), a finish_reason, then [DONE].
SoakOutcome judge_stream(const std::string& body, std::string* why) {
  std::string reason, detail;
  bool done = false;
  size_t start = 0;
  while (start < body.size()) {
    size_t end = body.find('\n', start);
    if (end == std::string::npos) end = body.size();
    std::string_view line(body.data() + start, end - start);
    start = end + 1;
    if (!line.starts_with("data: ")) continue;
    line.remove_prefix(6);
    if (line == "[DONE]") {
      done = true;
      continue;
    }
    const json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) {
      *why = "stream event is not JSON: " + std::string(line.substr(0, 120));
      return SoakOutcome::kUndocumented;
    }
    if (j.contains("error")) {
      *why = "error event: " + j["error"].dump().substr(0, 200);
      return SoakOutcome::kUndocumented;
    }
    std::string r, d;
    if (read_finish(j, r, d)) reason = r, detail = d;
  }
  if (!done || reason.empty()) {
    *why = !done ? "stream ended without [DONE]" : "stream without finish_reason";
    return SoakOutcome::kUndocumented;
  }
  return judge_finish(reason, detail, why);
}

}  // namespace

SoakOutcome judge_soak_reply(const SoakRequest& req, long status, const std::string& body,
                             bool hung_up, bool transport_error, std::string* why) {
  std::string ignored;
  if (!why) why = &ignored;
  const std::string head = body.substr(0, 200);
  if (is_malformed(req.kind)) {
    // The server may close an oversize upload early; the status it sent first is what counts.
    if (status == req.expected_status) return SoakOutcome::kRejected4xx;
    if (status >= 500 && status != 503) return SoakOutcome::kServerError;
    if (transport_error && status == 0) {
      *why = "no answer to a malformed request";
      return SoakOutcome::kTransport;
    }
    *why = "expected " + std::to_string(req.expected_status) + ", got " + std::to_string(status) +
           ": " + head;
    return SoakOutcome::kUndocumented;
  }
  if (transport_error) {
    *why = "no complete answer (HTTP " + std::to_string(status) + ")";
    return SoakOutcome::kTransport;
  }
  if (status == 429) return SoakOutcome::kRefused429;
  if (status == 503) return SoakOutcome::kRefused503;
  if (status >= 500) {
    *why = "HTTP " + std::to_string(status) + ": " + head;
    return SoakOutcome::kServerError;
  }
  if (status != 200) {
    *why = "HTTP " + std::to_string(status) + ": " + head;
    return SoakOutcome::kUndocumented;
  }
  if (hung_up) return SoakOutcome::kCancelled;
  if (req.stream) return judge_stream(body, why);
  const json j = json::parse(body, nullptr, false);
  std::string reason, detail;
  if (j.is_discarded() || !read_finish(j, reason, detail)) {
    *why = "200 without a choice's finish_reason: " + head;
    return SoakOutcome::kUndocumented;
  }
  return judge_finish(reason, detail, why);
}

}  // namespace shrike::loadtest
