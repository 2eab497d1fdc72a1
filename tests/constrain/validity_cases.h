// The constraints of the validity acceptance test (10 JSON schemas, 10 regexes, 10 choice lists)
// and validators that share no code with the compiler (nlohmann::json + a small schema checker,
// std::wregex, set membership): used on masked random draws (tests/constrain/validity_test) and
// on a random-weight model served by the engine (tests/engine/constrained_validity_test).
#pragma once

#include <cmath>
#include <codecvt>
#include <cstdlib>
#include <locale>
#include <nlohmann/json.hpp>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/sanitizers.h"

namespace shrike::constrain::validity {

using ojson = nlohmann::ordered_json;

// Outputs per constraint: the acceptance count, 1,000, in the normal build; 100 in sanitizer
// builds, which are ~10x slower.
inline int outputs_per_constraint() {
#if defined(SHRIKE_SANITIZED)
  return 100;
#else
  if (std::getenv("SHRIKE_SANITIZED")) return 100;
  return 1000;
#endif
}

// ---- independent validators ----

inline std::wstring widen(const std::string& s, bool* ok) {
  try {
    std::wstring_convert<std::codecvt_utf8<wchar_t>> conv;
    *ok = true;
    return conv.from_bytes(s);
  } catch (const std::range_error&) {
    *ok = false;
    return {};
  }
}

inline bool regex_full_match(const std::string& pattern, const std::string& text) {
  bool ok_p, ok_t;
  const std::wstring p = widen(pattern, &ok_p), t = widen(text, &ok_t);
  return ok_p && ok_t && std::regex_match(t, std::wregex(p));
}

inline size_t code_points(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (uint8_t(c) & 0xC0) != 0x80;
  return n;
}

// A deliberately small checker of the keywords the test schemas use; "why" gets the reason.
inline bool check(const nlohmann::json& v, const ojson& s, const ojson& root, std::string& why) {
  if (s.contains("$ref")) {
    const std::string name = s["$ref"].get<std::string>().substr(std::string("#/$defs/").size());
    return check(v, root["$defs"][name], root, why);
  }
  if (s.contains("const") && nlohmann::json::parse(s["const"].dump()) != v)
    return why = "const", false;
  if (s.contains("enum")) {
    bool found = false;
    for (const auto& e : s["enum"]) found |= nlohmann::json::parse(e.dump()) == v;
    if (!found) return why = "enum", false;
  }
  if (s.contains("anyOf")) {
    for (const auto& alt : s["anyOf"])
      if (check(v, alt, root, why)) return true;
    return why = "anyOf", false;
  }
  if (!s.contains("type")) return true;
  std::vector<std::string> types;
  if (s["type"].is_array())
    for (const auto& t : s["type"]) types.push_back(t);
  else
    types.push_back(s["type"]);
  for (const std::string& t : types) {
    if (t == "null" && v.is_null()) return true;
    if (t == "boolean" && v.is_boolean()) return true;
    if (t == "integer" && v.is_number() &&
        (v.is_number_integer() || v.get<double>() == std::floor(v.get<double>())))
      return true;
    if (t == "number" && v.is_number()) return true;
    if (t == "string" && v.is_string()) {
      const std::string str = v.get<std::string>();
      const size_t n = code_points(str);
      if (s.contains("minLength") && n < s["minLength"].get<size_t>())
        return why = "minLength", false;
      if (s.contains("maxLength") && n > s["maxLength"].get<size_t>())
        return why = "maxLength", false;
      if (s.contains("pattern") && !regex_full_match(s["pattern"], str))
        return why = "pattern", false;
      return true;
    }
    if (t == "array" && v.is_array()) {
      if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>())
        return why = "minItems", false;
      if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>())
        return why = "maxItems", false;
      if (s.contains("items"))
        for (const auto& item : v)
          if (!check(item, s["items"], root, why)) return false;
      return true;
    }
    if (t == "object" && v.is_object()) {
      const auto& props = s.contains("properties") ? s["properties"] : ojson::object();
      for (const auto& [k, item] : v.items()) {
        if (!props.contains(k)) return why = "unknown property " + k, false;
        if (!check(item, props[k], root, why)) return false;
      }
      if (s.contains("required"))
        for (const auto& r : s["required"])
          if (!v.contains(r.get<std::string>()))
            return why = "missing " + r.get<std::string>(), false;
      return true;
    }
  }
  return why = "type", false;
}

// ---- the constraints under test ----

inline std::vector<std::string> intent_labels() {
  std::vector<std::string> l;
  for (const char* domain : {"order", "refund", "account", "shipping", "payment", "product"})
    for (const char* act : {"status", "cancel", "change", "complaint", "question", "other"})
      l.push_back(std::string(domain) + "_" + act);
  return l;  // 36
}

inline std::string intent_schema() {
  ojson slots = ojson::object();
  for (const char* s : {"order_id", "product", "quantity", "date", "time", "city", "address",
                        "name", "phone", "email", "amount", "currency", "reason", "color"})
    slots[s] = {{"type", "string"}, {"maxLength", 16}};
  ojson schema = {{"type", "object"},
                  {"properties",
                   {{"intent", {{"enum", intent_labels()}}},
                    {"slots", {{"type", "object"}, {"properties", slots}}}}},
                  {"required", {"intent", "slots"}}};
  return schema.dump();
}

inline std::vector<std::string> schemas() {
  return {
      intent_schema(),
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer"},
          "email":{"type":"string","pattern":"[a-z]{1,8}@[a-z]{1,6}\\.com"}},"required":["name","age"]})",
      R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":5})",
      R"({"type":"object","properties":{"kind":{"const":"event"},"level":{"enum":["low","mid","high",1,null]},
          "ack":{"type":"boolean"},"none":{"type":"null"}},"required":["kind","level","ack"]})",
      R"({"$defs":{"P":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]}},
          "type":"object","properties":{"from":{"$ref":"#/$defs/P"},"to":{"$ref":"#/$defs/P"}},"required":["from","to"]})",
      R"({"type":"object","properties":{"v":{"anyOf":[{"type":"string","maxLength":6},{"type":"integer"},{"type":"null"}]}},
          "required":["v"]})",
      R"({"type":"object","properties":{"price":{"type":"number"},"qty":{"type":"integer"},"ok":{"type":["boolean","null"]}},
          "required":["price","qty"]})",
      R"({"type":"array","maxItems":3,"items":{"type":"object","properties":{"id":{"type":"integer"},
          "tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":2}},"required":["id"]}})",
      R"({"type":"object","properties":{"title":{"type":"string","minLength":3,"maxLength":8},
          "code":{"type":"string","pattern":"[A-Z]{2}-\\d{2}"}},"required":["title","code"]})",
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string","maxLength":4},"c":{"type":"boolean"},
          "d":{"type":"array","items":{"type":"null"},"maxItems":2},"e":{"enum":["x","y"]}}})",
  };
}

inline std::vector<std::string> regexes() {
  return {"\\d{3}-\\d{3}-\\d{4}",
          "[a-z]{1,8}@[a-z]{1,8}\\.(com|org|net)",
          "(0|[1-9]\\d{0,5})(\\.\\d{1,3})?",
          "(yes|no|maybe)( please)?",
          "[A-Z][a-z]{0,10}( [A-Z][a-z]{0,10}){0,2}",
          "#[0-9a-fA-F]{6}",
          "(19|20)\\d{2}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])",
          "[^\\n]{1,12}",
          "(ab|cd)+e",
          "[α-ω]{2,6}|中文?|[é-ü]+x"};
}

inline std::vector<std::vector<std::string>> choice_lists() {
  return {{"positive", "negative", "neutral"},
          {"yes", "no"},
          intent_labels(),
          {"New York", "New Delhi", "Newcastle"},
          {"日本", "中国", "한국"},
          {"a", "ab", "abc"},
          {" leading space", "trailing "},
          {"{\"a\":1}", "[1,2]"},
          {"1", "10", "100", "1000"},
          {"龘", "𠀋"}};
}

}  // namespace shrike::constrain::validity
