#include "server/openai_protocol.h"

#include <cmath>
#include <limits>

namespace shrike::server {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Errors

std::string error_body(const ApiError& e) {
  json err = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return dump_json(json{{"error", std::move(err)}});
}

ApiError bad_request(std::string message, std::string param, std::string code) {
  return {400, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
}
ApiError unauthorized(std::string message) {
  return {401, std::move(message), "authentication_error", "", "invalid_api_key"};
}
ApiError not_found(std::string message, std::string code) {
  return {404, std::move(message), "not_found_error", "", std::move(code)};
}
ApiError model_not_found(const std::string& model) {
  return {404, "The model '" + model + "' does not exist", "invalid_request_error", "model",
          "model_not_found"};
}
ApiError method_not_allowed(std::string message) {
  return {405, std::move(message), "invalid_request_error", "", "method_not_allowed"};
}
ApiError payload_too_large(size_t limit_bytes) {
  return {
      413,
      "request body is larger than the server's limit of " + std::to_string(limit_bytes) + " bytes",
      "invalid_request_error", "", "request_too_large"};
}
ApiError queue_full(std::string message) {
  return {429, std::move(message), "rate_limit_error", "", "queue_full"};
}
ApiError unavailable(std::string message) {
  return {503, std::move(message), "server_error", "", "service_unavailable"};
}
ApiError server_error(std::string message) {
  return {500, std::move(message), "server_error", "", "internal_error"};
}

// ---------------------------------------------------------------------------------------------
// Request parsing

bool json_too_deep(std::string_view body, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : body) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

namespace {

// Reads the members of one JSON object with OpenAI-style messages on failure; the first error
// wins and later reads return nothing. null counts as absent, as the OpenAI API treats it.
class FieldReader {
 public:
  explicit FieldReader(const json& obj) : obj_(obj) {}

  const std::optional<ApiError>& error() const { return error_; }
  void fail(ApiError e) {
    if (!error_) error_ = std::move(e);
  }

  const json* get(const char* key) const {
    if (error_) return nullptr;
    const auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  void type_error(const std::string& param, const char* expected, const json& got) {
    fail(bad_request("Invalid type for '" + param + "': expected " + expected + ", but got " +
                         type_phrase(got) + " instead.",
                     param, "invalid_type"));
  }

  std::optional<int64_t> integer(const char* key, int64_t lo, int64_t hi) {
    const json* v = get(key);
    if (!v) return std::nullopt;
    const auto n = as_integer(*v);
    if (!n) {
      type_error(key, "an integer", *v);
      return std::nullopt;
    }
    if (*n < lo || *n > hi) {
      fail(bad_request("Invalid '" + std::string(key) + "': expected a value between " +
                           std::to_string(lo) + " and " + std::to_string(hi) + ", but got " +
                           v->dump() + " instead.",
                       key, "invalid_value"));
      return std::nullopt;
    }
    return n;
  }

  // A number in [lo, hi], or (lo, hi] when lo_open.
  std::optional<double> number(const char* key, double lo, double hi, bool lo_open = false) {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) {
      type_error(key, "a number", *v);
      return std::nullopt;
    }
    const double d = v->get<double>();
    if (!std::isfinite(d) || (lo_open ? d <= lo : d < lo) || d > hi) {
      fail(bad_request("Invalid '" + std::string(key) + "': expected a value in " +
                           (lo_open ? "(" : "[") + fmt(lo) + ", " + fmt(hi) + "], but got " +
                           v->dump() + " instead.",
                       key, "invalid_value"));
      return std::nullopt;
    }
    return d;
  }

  std::optional<bool> boolean(const char* key) {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) {
      type_error(key, "a boolean", *v);
      return std::nullopt;
    }
    return v->get<bool>();
  }

  std::optional<std::string> string(const char* key) {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) {
      type_error(key, "a string", *v);
      return std::nullopt;
    }
    return v->get<std::string>();
  }

  // Integers may arrive as 16 or 16.0 (some clients write every number as a float).
  static std::optional<int64_t> as_integer(const json& v) {
    if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > uint64_t(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return int64_t(u);
    }
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) return int64_t(d);
    }
    return std::nullopt;
  }

  static std::string type_phrase(const json& v) {
    if (v.is_number_float()) return "a decimal number";
    if (v.is_number()) return "an integer";
    if (v.is_string()) return "a string";
    if (v.is_boolean()) return "a boolean";
    if (v.is_array()) return "an array";
    if (v.is_object()) return "an object";
    return "null";
  }

  static std::string fmt(double d) {
    json j = d;
    return j.dump();
  }

 private:
  const json& obj_;
  std::optional<ApiError> error_;
};

// A string, or an array of {"type": "text", "text": ...} parts, concatenated.
std::optional<std::string> message_content(FieldReader& r, const json& content,
                                           const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    r.type_error(param, "a string or an array of content parts", content);
    return std::nullopt;
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string where = param + "[" + std::to_string(i) + "]";
    if (!part.is_object()) {
      r.type_error(where, "an object", part);
      return std::nullopt;
    }
    const auto type = part.find("type");
    if (type == part.end() || !type->is_string()) {
      r.fail(bad_request("'" + where + ".type' is required and must be a string", where + ".type",
                         "missing_required_parameter"));
      return std::nullopt;
    }
    if (*type != "text") {
      r.fail(bad_request("Invalid value for '" + where +
                             ".type': only \"text\" content parts are "
                             "supported, got " +
                             type->dump() + ".",
                         where + ".type", "invalid_value"));
      return std::nullopt;
    }
    const auto t = part.find("text");
    if (t == part.end() || !t->is_string()) {
      r.fail(bad_request("'" + where + ".text' is required and must be a string", where + ".text",
                         "missing_required_parameter"));
      return std::nullopt;
    }
    text += t->get<std::string>();
  }
  return text;
}

void read_messages(FieldReader& r, const json& body, ParsedRequest& out) {
  const auto it = body.find("messages");
  if (it == body.end() || it->is_null()) {
    r.fail(bad_request("'messages' is required", "messages", "missing_required_parameter"));
    return;
  }
  if (!it->is_array()) return r.type_error("messages", "an array", *it);
  if (it->empty()) {
    r.fail(bad_request("Invalid 'messages': empty array. Expected at least one message.",
                       "messages", "empty_array"));
    return;
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return r.type_error(where, "an object", m);
    const auto role = m.find("role");
    if (role == m.end() || role->is_null()) {
      r.fail(bad_request("'" + where + ".role' is required", where + ".role",
                         "missing_required_parameter"));
      return;
    }
    if (!role->is_string()) return r.type_error(where + ".role", "a string", *role);
    std::string role_name = role->get<std::string>();
    if (role_name == "developer") role_name = "system";
    if (role_name != "system" && role_name != "user" && role_name != "assistant") {
      r.fail(bad_request("Invalid value for '" + where + ".role': " + role->dump() +
                             " is not supported; expected one of system, developer, user, "
                             "assistant.",
                         where + ".role", "invalid_value"));
      return;
    }
    const auto content = m.find("content");
    std::optional<std::string> text;
    if (content == m.end() || content->is_null()) {
      // An assistant turn may carry no content (OpenAI: when it made tool calls).
      if (role_name != "assistant") {
        r.fail(bad_request("'" + where + ".content' is required", where + ".content",
                           "missing_required_parameter"));
        return;
      }
      text = std::string();
    } else {
      text = message_content(r, *content, where + ".content");
      if (!text) return;
    }
    out.messages.push_back({std::move(role_name), std::move(*text)});
  }
}

// Token ids: a non-empty array of integers in [0, 2^31).
bool read_token_ids(FieldReader& r, const json& arr, std::vector<int32_t>& out) {
  for (size_t i = 0; i < arr.size(); ++i) {
    const auto id = FieldReader::as_integer(arr[i]);
    if (!id || *id < 0 || *id > std::numeric_limits<int32_t>::max()) {
      r.fail(bad_request("Invalid 'prompt[" + std::to_string(i) +
                             "]': token ids must be integers >= 0, got " + arr[i].dump() + ".",
                         "prompt", "invalid_value"));
      return false;
    }
    out.push_back(int32_t(*id));
  }
  return true;
}

void read_prompt(FieldReader& r, const json& body, ParsedRequest& out) {
  const auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) {
    r.fail(bad_request("'prompt' is required", "prompt", "missing_required_parameter"));
    return;
  }
  const json& p = *it;
  if (p.is_string()) {
    out.prompt_text = p.get<std::string>();
    return;
  }
  if (!p.is_array()) return r.type_error("prompt", "a string or an array of token ids", p);
  if (p.empty()) {
    r.fail(bad_request("Invalid 'prompt': empty array. Expected text or at least one token id.",
                       "prompt", "empty_array"));
    return;
  }
  if (p[0].is_string() || p[0].is_array()) {
    // A batch of prompts: OpenAI allows several, this server one per request (like n).
    if (p.size() != 1) {
      r.fail(bad_request(
          "Only one prompt per request is supported, got " + std::to_string(p.size()) + ".",
          "prompt", "unsupported_value"));
      return;
    }
    if (p[0].is_string()) {
      out.prompt_text = p[0].get<std::string>();
      return;
    }
    if (p[0].empty()) {
      r.fail(bad_request("Invalid 'prompt[0]': empty array.", "prompt", "empty_array"));
      return;
    }
    out.prompt_is_tokens = read_token_ids(r, p[0], out.prompt_tokens);
    return;
  }
  out.prompt_is_tokens = read_token_ids(r, p, out.prompt_tokens);
}

void read_stop(FieldReader& r, ParsedRequest& out) {
  const json* v = r.get("stop");
  if (!v) return;
  auto empty_stop = [&] {
    r.fail(bad_request("Invalid 'stop': stop strings must not be empty.", "stop", "invalid_value"));
  };
  if (v->is_string()) {
    if (v->get<std::string>().empty()) return empty_stop();
    out.stop.push_back(v->get<std::string>());
    return;
  }
  if (!v->is_array()) return r.type_error("stop", "a string or an array of strings", *v);
  if (v->size() > kMaxStopStrings) {
    r.fail(bad_request("Invalid 'stop': at most " + std::to_string(kMaxStopStrings) +
                           " stop strings are allowed, got " + std::to_string(v->size()) + ".",
                       "stop", "array_above_max_length"));
    return;
  }
  for (const json& s : *v) {
    if (!s.is_string()) return r.type_error("stop", "an array of strings", *v);
    if (s.get<std::string>().empty()) return empty_stop();
    out.stop.push_back(s.get<std::string>());
  }
}

void unsupported(FieldReader& r, const char* param, const std::string& why) {
  r.fail(bad_request("'" + std::string(param) + "' " + why, param, "unsupported_parameter"));
}

// Options this server does not implement: refused when they would change the answer, so a
// client never gets silently different output.
void reject_unsupported(FieldReader& r) {
  if (const auto echo = r.boolean("echo"); echo && *echo)
    unsupported(r, "echo", "is not supported (only false)");
  if (const auto best_of = r.integer("best_of", 1, std::numeric_limits<int64_t>::max());
      best_of && *best_of != 1)
    unsupported(r, "best_of", "is not supported (only 1)");
  if (const auto suffix = r.string("suffix"); suffix && !suffix->empty())
    unsupported(r, "suffix", "is not supported");
  if (const json* tools = r.get("tools")) {
    if (!tools->is_array()) {
      r.type_error("tools", "an array", *tools);
    } else if (!tools->empty()) {
      unsupported(r, "tools", "(tool calling) is not supported");
    }
  }
  if (const json* bias = r.get("logit_bias")) {
    if (!bias->is_object()) {
      r.type_error("logit_bias", "an object", *bias);
    } else if (!bias->empty()) {
      unsupported(r, "logit_bias", "is not supported");
    }
  }
}

// The guided-decoding options. Schemas are taken from a second parse of the body that keeps
// the order of keys (nlohmann::json sorts them), because properties are generated in the order
// the schema lists them.
void read_constraint(FieldReader& r, std::string_view body, ParsedRequest& out) {
  using ConstraintSpec = constrain::ConstraintSpec;
  std::vector<std::string> given;
  auto set = [&](const char* param, ConstraintSpec spec) {
    given.push_back(param);
    if (given.size() > 1) {
      r.fail(
          bad_request("Only one of 'response_format' (json_object / json_schema), "
                      "'guided_json', 'guided_regex' and 'guided_choice' may be given; got '" +
                          given[0] + "' and '" + given[1] + "'.",
                      param, "invalid_value"));
      return;
    }
    out.constraint = std::move(spec);
    out.constraint_param = param;
  };
  auto ordered = [&]() { return nlohmann::ordered_json::parse(body); };

  if (const json* rf = r.get("response_format")) {
    const json type = rf->is_object() ? rf->value("type", json()) : json();
    if (!rf->is_object()) {
      r.type_error("response_format", "an object", *rf);
    } else if (type == "json_object") {
      set("response_format", {ConstraintSpec::Kind::JsonObject, {}, {}, {}});
    } else if (type == "json_schema") {
      const auto js = rf->find("json_schema");
      if (js == rf->end() || !js->is_object() || !js->contains("schema") ||
          !(*js)["schema"].is_object()) {
        r.fail(
            bad_request("'response_format.json_schema.schema' must be an object (the JSON "
                        "schema) when 'response_format.type' is \"json_schema\".",
                        "response_format", "invalid_value"));
      } else if (js->contains("name") && !(*js)["name"].is_string()) {
        r.type_error("response_format.json_schema.name", "a string", (*js)["name"]);
      } else if (js->contains("strict") && !(*js)["strict"].is_boolean()) {
        r.type_error("response_format.json_schema.strict", "a boolean", (*js)["strict"]);
      } else {
        // Output always matches the schema, so "strict" changes nothing.
        ConstraintSpec spec{ConstraintSpec::Kind::JsonSchema, {}, {}, {}};
        spec.schema = ordered()["response_format"]["json_schema"]["schema"];
        set("response_format", std::move(spec));
      }
    } else if (type != "text") {
      unsupported(r, "response_format",
                  "type must be \"text\", \"json_object\" or \"json_schema\", got " + type.dump());
    }
  }
  if (const json* choice = r.get("guided_choice")) {
    ConstraintSpec spec{ConstraintSpec::Kind::Choice, {}, {}, {}};
    if (!choice->is_array() || choice->empty()) {
      r.type_error("guided_choice", "a non-empty array of strings", *choice);
    } else {
      for (const json& c : *choice) {
        if (!c.is_string()) return r.type_error("guided_choice", "an array of strings", *choice);
        spec.choices.push_back(c.get<std::string>());
      }
      set("guided_choice", std::move(spec));
    }
  }
  if (const json* re = r.get("guided_regex")) {
    if (!re->is_string()) {
      r.type_error("guided_regex", "a string", *re);
    } else {
      set("guided_regex", {ConstraintSpec::Kind::Regex, {}, re->get<std::string>(), {}});
    }
  }
  if (const json* gj = r.get("guided_json")) {
    ConstraintSpec spec{ConstraintSpec::Kind::JsonSchema, {}, {}, {}};
    if (gj->is_object()) {
      spec.schema = ordered()["guided_json"];
      set("guided_json", std::move(spec));
    } else if (gj->is_string()) {
      const std::string text = gj->get<std::string>();
      if (json_too_deep(text, kMaxJsonDepth)) {
        r.fail(bad_request("Invalid 'guided_json': the schema nests deeper than " +
                               std::to_string(kMaxJsonDepth) + " levels.",
                           "guided_json", "invalid_value"));
        return;
      }
      try {
        spec.schema = nlohmann::ordered_json::parse(text);
      } catch (const nlohmann::json::exception& e) {
        r.fail(
            bad_request(std::string("Invalid 'guided_json': the string is not JSON: ") + e.what(),
                        "guided_json", "invalid_value"));
        return;
      }
      set("guided_json", std::move(spec));
    } else {
      r.type_error("guided_json", "an object or a string holding a JSON schema", *gj);
    }
  }
  if (const json* g = r.get("guided_grammar"); g && !g->is_null())
    unsupported(r, "guided_grammar",
                "(context-free grammars) is not supported; use guided_json, "
                "guided_regex or guided_choice");
  if (const json* w = r.get("guided_whitespace_pattern"); w && !w->is_null())
    unsupported(r, "guided_whitespace_pattern",
                "is not supported (JSON output is always compact, without whitespace)");
  r.string("guided_decoding_backend");  // vLLM's choice of backend: there is one here
}

}  // namespace

std::variant<ParsedRequest, ApiError> parse_request(std::string_view body, Endpoint endpoint) {
  if (json_too_deep(body, kMaxJsonDepth))
    return bad_request("Invalid JSON: the body nests arrays/objects deeper than " +
                           std::to_string(kMaxJsonDepth) + " levels.",
                       "", "invalid_json");
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at ..." -> "parse error at ..."
    if (const size_t p = what.find("] ");
        what.rfind("[json.exception", 0) == 0 && p != std::string::npos)
      what.erase(0, p + 2);
    return bad_request("Invalid JSON in the request body: " + what, "", "invalid_json");
  }
  if (!j.is_object())
    return bad_request(
        "The request body must be a JSON object, got " + FieldReader::type_phrase(j) + ".", "",
        "invalid_json");

  ParsedRequest out;
  out.endpoint = endpoint;
  FieldReader r(j);
  const bool chat = endpoint == Endpoint::ChatCompletions;

  if (auto model = r.string("model")) out.model = std::move(*model);
  if (chat) {
    if (!r.error()) read_messages(r, j, out);
  } else {
    if (!r.error()) read_prompt(r, j, out);
  }

  constexpr int64_t kIntMax = std::numeric_limits<int64_t>::max();
  if (chat) {
    // max_completion_tokens replaced max_tokens in the chat API; either is accepted.
    out.max_tokens = r.integer("max_completion_tokens", 1, kIntMax);
    if (!out.max_tokens) out.max_tokens = r.integer("max_tokens", 1, kIntMax);
  } else {
    out.max_tokens = r.integer("max_tokens", 1, kIntMax);
  }

  auto& s = out.sampling;
  if (auto v = r.number("temperature", 0, 2)) s.temperature = float(*v);
  if (auto v = r.number("top_p", 0, 1, /*lo_open=*/true)) s.top_p = float(*v);
  if (auto v = r.integer("top_k", -1, std::numeric_limits<int32_t>::max()))
    s.top_k = *v < 0 ? 0 : int32_t(*v);  // -1 (vLLM) and 0 both mean no limit
  if (auto v = r.number("min_p", 0, 1)) s.min_p = float(*v);
  if (auto v = r.number("presence_penalty", -2, 2)) s.presence_penalty = float(*v);
  if (auto v = r.number("frequency_penalty", -2, 2)) s.frequency_penalty = float(*v);
  if (auto v = r.number("repetition_penalty", 0, 2, /*lo_open=*/true))
    s.repetition_penalty = float(*v);
  if (const json* seed = r.get("seed")) {
    if (seed->is_number_unsigned()) {
      s.seed = seed->get<uint64_t>();
      out.seed_given = true;
    } else if (auto v = FieldReader::as_integer(*seed)) {
      s.seed = uint64_t(*v);
      out.seed_given = true;
    } else {
      r.type_error("seed", "an integer", *seed);
    }
  }
  read_stop(r, out);
  if (auto v = r.boolean("stream")) out.stream = *v;
  if (const json* so = r.get("stream_options")) {
    if (!so->is_object()) {
      r.type_error("stream_options", "an object", *so);
    } else if (!out.stream) {
      r.fail(bad_request("'stream_options' is only allowed when 'stream' is true.",
                         "stream_options", "invalid_value"));
    } else {
      FieldReader opts(*so);
      if (auto v = opts.boolean("include_usage")) out.include_usage = *v;
      if (opts.error()) {
        ApiError e = *opts.error();
        e.param = "stream_options." + e.param;
        r.fail(std::move(e));
      }
    }
  }
  if (auto v = r.boolean("ignore_eos")) out.ignore_eos = *v;
  if (auto v = r.boolean("jump_forward")) out.jump_forward = *v;
  if (auto n = r.integer("n", std::numeric_limits<int64_t>::min(), kIntMax); n && *n != 1)
    r.fail(bad_request("Invalid 'n': only n = 1 is supported, got " + std::to_string(*n) + ".", "n",
                       "unsupported_value"));
  if (chat) {
    if (auto v = r.boolean("logprobs")) s.logprobs = *v;
    if (auto v = r.integer("top_logprobs", 0, kMaxTopLogprobs)) {
      if (*v > 0 && !s.logprobs)
        r.fail(bad_request("'top_logprobs' requires 'logprobs' to be true.", "top_logprobs",
                           "invalid_value"));
      s.top_logprobs = int32_t(*v);
    }
  } else if (const json* lp = r.get("logprobs")) {
    // Completions: logprobs is the number of alternatives (0..5) besides the chosen token.
    if (lp->is_boolean()) {
      r.type_error("logprobs", "an integer", *lp);
    } else if (auto v = r.integer("logprobs", 0, kMaxCompletionLogprobs)) {
      s.logprobs = true;
      s.top_logprobs = int32_t(*v);
    }
  }
  r.string("user");  // accepted and ignored, but it must be a string
  if (auto t = r.number("timeout", 0, 1e9, /*lo_open=*/true)) out.timeout_s = *t;
  reject_unsupported(r);
  if (!r.error()) read_constraint(r, body, out);

  if (r.error()) return *r.error();
  return out;
}

std::variant<int64_t, ApiError> resolve_max_tokens(int64_t prompt_tokens,
                                                   std::optional<int64_t> max_tokens,
                                                   int64_t context_length) {
  if (prompt_tokens >= context_length)
    return bad_request("This model's maximum context length is " + std::to_string(context_length) +
                           " tokens, and the prompt has " + std::to_string(prompt_tokens) +
                           " tokens, which leaves no room for output. Please shorten the prompt.",
                       "", "context_length_exceeded");
  if (!max_tokens) return context_length - prompt_tokens;
  // Written so that a huge max_tokens cannot overflow.
  if (*max_tokens > context_length - prompt_tokens)
    return bad_request("This model's maximum context length is " + std::to_string(context_length) +
                           " tokens. However, you requested " + std::to_string(prompt_tokens) +
                           " prompt tokens + " + std::to_string(*max_tokens) +
                           " output tokens (max_tokens). Please "
                           "reduce the length of the prompt or max_tokens.",
                       "max_tokens", "context_length_exceeded");
  return *max_tokens;
}

// ---------------------------------------------------------------------------------------------
// Responses

const char* openai_finish_reason(engine::FinishReason r) {
  return r == engine::FinishReason::Stop ? "stop" : "length";
}

const char* finish_detail(engine::FinishReason r) {
  switch (r) {
    case engine::FinishReason::Stop:
      return "stop";
    case engine::FinishReason::Length:
      return "length";
    case engine::FinishReason::Cancelled:
      return "cancelled";
    case engine::FinishReason::Deadline:
      return "deadline";
    case engine::FinishReason::Error:
      return "error";
    case engine::FinishReason::kCount:
      break;
  }
  return "error";
}

namespace {

// A log probability JSON can carry: -inf (a token with probability 0) becomes -9999, as vLLM does.
float finite_logprob(float lp) {
  return std::isfinite(lp) ? lp : -9999.0f;
}

json utf8_bytes(const std::string& s) {
  json b = json::array();
  for (const unsigned char c : s) b.push_back(int(c));
  return b;
}

json logprobs_json(Endpoint endpoint, const std::vector<LogprobEntry>& entries) {
  if (endpoint == Endpoint::ChatCompletions) {
    json content = json::array();
    for (const auto& e : entries) {
      json top = json::array();
      for (const auto& [tok, lp] : e.top)
        top.push_back(
            {{"token", tok}, {"logprob", finite_logprob(lp)}, {"bytes", utf8_bytes(tok)}});
      content.push_back({{"token", e.token},
                         {"logprob", finite_logprob(e.logprob)},
                         {"bytes", utf8_bytes(e.token)},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}};
  }
  // The legacy completions shape: parallel arrays.
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const auto& e : entries) {
    tokens.push_back(e.token);
    token_logprobs.push_back(finite_logprob(e.logprob));
    json alternatives = json::object();
    for (const auto& [tok, lp] : e.top) alternatives[tok] = finite_logprob(lp);
    top.push_back(std::move(alternatives));
    offsets.push_back(e.text_offset);
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(offsets)}};
}

json usage_json(const Usage& u) {
  json j = {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", u.cached_prompt_tokens}}}};
  if (u.speculative)
    j["speculative"] = {{"proposed", u.spec_proposed}, {"accepted", u.spec_accepted}};
  return j;
}

json envelope(const ResponseMeta& meta, const char* object) {
  return {{"id", meta.id}, {"object", object}, {"created", meta.created}, {"model", meta.model}};
}

void set_finish(json& choice, engine::FinishReason reason) {
  choice["finish_reason"] = openai_finish_reason(reason);
  if (std::string_view(finish_detail(reason)) != openai_finish_reason(reason))
    choice["finish_detail"] = finish_detail(reason);
}

}  // namespace

json completion_response(const ResponseMeta& meta, const std::string& text,
                         engine::FinishReason reason, const std::vector<LogprobEntry>& logprobs,
                         const Usage& usage) {
  const bool chat = meta.endpoint == Endpoint::ChatCompletions;
  json choice = {{"index", 0}};
  if (chat)
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  else
    choice["text"] = text;
  choice["logprobs"] = meta.logprobs ? logprobs_json(meta.endpoint, logprobs) : json();
  set_finish(choice, reason);
  json j = envelope(meta, chat ? "chat.completion" : "text_completion");
  j["choices"] = json::array({std::move(choice)});
  j["usage"] = usage_json(usage);
  return j;
}

json stream_chunk(const ResponseMeta& meta, const std::string& text,
                  const std::vector<LogprobEntry>& logprobs, bool first,
                  std::optional<engine::FinishReason> finish) {
  const bool chat = meta.endpoint == Endpoint::ChatCompletions;
  json choice = {{"index", 0}};
  if (chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (first || !text.empty()) delta["content"] = text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = meta.logprobs ? logprobs_json(meta.endpoint, logprobs) : json();
  if (finish)
    set_finish(choice, *finish);
  else
    choice["finish_reason"] = nullptr;
  json j = envelope(meta, chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array({std::move(choice)});
  return j;
}

json usage_chunk(const ResponseMeta& meta, const Usage& usage) {
  json j = envelope(meta, meta.endpoint == Endpoint::ChatCompletions ? "chat.completion.chunk"
                                                                     : "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage_json(usage);
  return j;
}

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& j) {
  return "data: " + dump_json(j) + "\n\n";
}

}  // namespace shrike::server
