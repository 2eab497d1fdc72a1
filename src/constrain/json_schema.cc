#include "constrain/json_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>

#include "constrain/decimal.h"
#include "constrain/error.h"
#include "constrain/regex.h"
#include "constrain/string_formats.h"
#include "constrain/utf8.h"

namespace shrike::constrain {
namespace {

using ojson = nlohmann::ordered_json;

const std::set<std::string>& annotations() {
  static const std::set<std::string> k{"title",    "description", "default",  "examples",
                                       "$schema",  "$id",         "$comment", "deprecated",
                                       "readOnly", "writeOnly",   "$defs",    "definitions"};
  return k;
}

class SchemaCompiler {
 public:
  SchemaCompiler(Nfa& nfa, const ojson& root) : nfa_(nfa), root_(root) {}

  Frag value(const ojson& s, const std::string& where, int depth) {
    if (depth > kMaxSchemaDepth)
      fail(where, "schema nested deeper than " + std::to_string(kMaxSchemaDepth) + " levels");
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(where, "the schema false matches nothing");
      return any_value(kAnyValueDepth);
    }
    if (!s.is_object()) fail(where, "a schema must be an object or a boolean");
    check_keywords(s, where);

    // A keyword that is a schema of its own ($ref, allOf, const, enum, anyOf) with other
    // constraining keywords beside it: all must hold, so the two halves compile apart and meet
    // as an intersection ({"type": "string", "enum": ["a", 1]} is "a" only).
    for (const char* whole : {"$ref", "allOf", "const", "enum", "anyOf"}) {
      if (!s.contains(whole)) continue;
      ojson rest = s;
      rest.erase(whole);
      bool constrained = false;
      for (const auto& [key, v] : rest.items()) constrained |= annotations().count(key) == 0;
      if (!constrained) break;
      const ojson alone = {{whole, s.at(whole)}};
      return intersection(
          {standalone([&](SchemaCompiler& c) { return c.value(alone, where, depth); }),
           standalone([&](SchemaCompiler& c) { return c.value(rest, where, depth); })},
          where);
    }
    if (const auto it = s.find("$ref"); it != s.end()) return ref(*it, where, depth);
    if (const auto it = s.find("allOf"); it != s.end()) {
      if (!it->is_array() || it->size() != 1)
        fail(where, "'allOf' is only supported with exactly one member");
      return value((*it)[0], where + "/allOf/0", depth + 1);
    }
    if (const auto it = s.find("const"); it != s.end()) return nfa_.literal(it->dump());
    if (const auto it = s.find("enum"); it != s.end()) {
      if (!it->is_array() || it->empty()) fail(where, "'enum' must be a non-empty array");
      std::vector<Frag> alts;
      for (const auto& v : *it) alts.push_back(nfa_.literal(v.dump()));
      return nfa_.alt(alts);
    }
    if (const auto it = s.find("anyOf"); it != s.end()) {
      if (!it->is_array() || it->empty()) fail(where, "'anyOf' must be a non-empty array");
      std::vector<Frag> alts;
      for (size_t i = 0; i < it->size(); ++i)
        alts.push_back(value((*it)[i], where + "/anyOf/" + std::to_string(i), depth + 1));
      return nfa_.alt(alts);
    }
    const auto type = s.find("type");
    if (type == s.end()) {
      if (s.contains("properties")) return object(s, where, depth);
      if (s.contains("items")) return array(s, where, depth);
      // A keyword of one type constrains values of that type only, and any JSON value is not
      // restricted per type here: refused rather than silently unenforced.
      for (const char* k :
           {"pattern", "minLength", "maxLength", "format", "minimum", "maximum", "exclusiveMinimum",
            "exclusiveMaximum", "multipleOf", "minItems", "maxItems"})
        if (s.contains(k)) fail(where, std::string("'") + k + "' needs a \"type\" it applies to");
      return any_value(kAnyValueDepth);
    }
    if (type->is_array()) {
      if (type->empty()) fail(where, "'type' must not be an empty list");
      std::vector<Frag> alts;
      for (const auto& t : *type) alts.push_back(typed(s, t, where, depth));
      return nfa_.alt(alts);
    }
    return typed(s, *type, where, depth);
  }

 private:
  [[noreturn]] static void fail(const std::string& where, const std::string& what) {
    throw ConstraintError("JSON schema at " + (where.empty() ? std::string("#") : where) + ": " +
                          what);
  }

  void check_keywords(const ojson& s, const std::string& where) {
    static const std::set<std::string> handled{"type",
                                               "properties",
                                               "required",
                                               "additionalProperties",
                                               "enum",
                                               "const",
                                               "anyOf",
                                               "allOf",
                                               "$ref",
                                               "pattern",
                                               "minLength",
                                               "maxLength",
                                               "items",
                                               "minItems",
                                               "maxItems",
                                               "minimum",
                                               "maximum",
                                               "exclusiveMinimum",
                                               "exclusiveMaximum",
                                               "multipleOf",
                                               "format"};
    for (const auto& [key, v] : s.items()) {
      if (handled.count(key) || annotations().count(key)) continue;
      fail(where, "the keyword '" + key + "' is not supported");
    }
    if (const auto it = s.find("additionalProperties");
        it != s.end() && !(it->is_boolean() && !it->get<bool>()))
      fail(where, "'additionalProperties' is only supported as false (or absent)");
  }

  Frag ref(const ojson& r, const std::string& where, int depth) {
    if (!r.is_string()) fail(where, "'$ref' must be a string");
    const std::string path = r.get<std::string>();
    std::string section, name;
    for (const char* prefix : {"#/$defs/", "#/definitions/"})
      if (path.rfind(prefix, 0) == 0) {
        section = std::string(prefix).substr(2, std::string(prefix).size() - 3);
        name = path.substr(std::string(prefix).size());
      }
    if (section.empty() || name.empty() || name.find('/') != std::string::npos)
      fail(where,
           "'$ref' \"" + path + "\": only #/$defs/NAME and #/definitions/NAME are supported");
    if (std::find(refs_.begin(), refs_.end(), path) != refs_.end())
      fail(where, "'$ref' \"" + path + "\" is recursive; recursive schemas are not supported");
    const auto sec = root_.find(section);
    if (sec == root_.end() || !sec->is_object() || !sec->contains(name))
      fail(where, "'$ref' \"" + path + "\" names no definition");
    refs_.push_back(path);
    const Frag f = value((*sec)[name], path.substr(1), depth + 1);
    refs_.pop_back();
    return f;
  }

  static std::optional<int64_t> count(const ojson& s, const char* key, const std::string& where) {
    const auto it = s.find(key);
    if (it == s.end()) return std::nullopt;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 100000)
      fail(where, std::string("'") + key + "' must be an integer in [0, 100000]");
    return it->get<int64_t>();
  }

  Frag typed(const ojson& s, const ojson& t, const std::string& where, int depth) {
    if (!t.is_string()) fail(where, "'type' must be a string or a list of strings");
    const std::string type = t.get<std::string>();
    if (type == "object") return object(s, where, depth);
    if (type == "array") return array(s, where, depth);
    if (type == "string") return string(s, where);
    if (type == "integer" || type == "number") return numeric(s, where, type == "integer");
    if (type == "boolean") return nfa_.alt({nfa_.literal("true"), nfa_.literal("false")});
    if (type == "null") return nfa_.literal("null");
    fail(where, "unknown type '" + type + "'");
  }

  // An integer or number with its bounds and multipleOf: each compiles alone, and both together
  // compile as the intersection of the two.
  Frag numeric(const ojson& s, const std::string& where, bool integral) {
    const bool bounds = has_bounds(s), step = s.contains("multipleOf");
    auto bounded = [&](SchemaCompiler& c) {
      return integral ? c.bounded_integer(s, where) : c.bounded_number(s, where);
    };
    auto multiples = [&](SchemaCompiler& c) {
      try {
        return decimal_multiples(c.nfa_, parse_decimal_step(s.at("multipleOf")), kMultipleIntDigits,
                                 !integral);
      } catch (const ConstraintError& e) {
        fail(where, e.what());
      }
    };
    if (bounds && step) return intersection({standalone(bounded), standalone(multiples)}, where);
    if (bounds) return bounded(*this);
    if (step) return multiples(*this);
    return integral ? integer() : number();
  }

  // The automaton of a fragment built by `build` on its own NFA, for intersections.
  template <class Build>
  Automaton standalone(Build build) {
    Nfa nfa;
    SchemaCompiler c(nfa, root_);
    c.refs_ = refs_;  // a $ref being expanded stays recursive inside
    const Frag f = build(c);
    return Automaton::determinize(nfa, f);
  }

  // Texts every automaton accepts, as a fragment of nfa_.
  Frag intersection(std::vector<Automaton> parts, const std::string& where) {
    try {
      while (parts.size() > 2) {
        Nfa nfa;
        const Frag f = embed_intersection(nfa, parts[parts.size() - 2], parts.back());
        parts.pop_back();
        parts.back() = Automaton::determinize(nfa, f);
      }
      return embed_intersection(nfa_, parts[0], parts[1]);
    } catch (const ConstraintError& e) {
      fail(where, e.what());
    }
  }

  // [0-9]{0,n}.
  Frag up_to_digits(int n) {
    return nfa_.up_to(n, [&] { return nfa_.seq({{'0', '9'}}); });
  }

  // At most 19 digits, so every integer fits a 64-bit integer (or a double) when parsed.
  Frag integer() {
    Frag digits = nfa_.alt({nfa_.literal("0"), nfa_.concat(nfa_.seq({{'1', '9'}}),
                                                           up_to_digits(kMaxIntegerDigits - 1))});
    return nfa_.concat(nfa_.optional(nfa_.literal("-")), digits);
  }

  static bool has_bounds(const ojson& s) {
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
      if (s.contains(k)) return true;
    return false;
  }

  // The integers the bounds allow, within int64 (the unbounded side stops at its limit).
  Frag bounded_integer(const ojson& s, const std::string& where) {
    constexpr double kTwo63 = 9223372036854775808.0;
    int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
    bool empty = false;
    auto bound = [&](const char* key, bool lower, bool exclusive) {
      const auto it = s.find(key);
      if (it == s.end()) return;
      if (!it->is_number()) fail(where, std::string("'") + key + "' must be a number");
      const double v = it->get<double>();
      // The first integer inside the bound: ceil (floor + 1 when exclusive) from below, floor
      // (ceil - 1) from above.
      const double b = lower ? (exclusive ? std::floor(v) + 1 : std::ceil(v))
                             : (exclusive ? std::ceil(v) - 1 : std::floor(v));
      if (lower ? b >= kTwo63 : b < -kTwo63) {  // beyond int64: nothing is left
        empty = true;
      } else if (lower && b > double(lo)) {
        lo = int64_t(b);
      } else if (!lower && b < double(hi)) {
        hi = int64_t(b);
      }
    };
    bound("minimum", true, false);
    bound("exclusiveMinimum", true, true);
    bound("maximum", false, false);
    bound("exclusiveMaximum", false, true);
    if (empty || lo > hi) fail(where, "no integer lies within the schema's minimum and maximum");
    std::vector<Frag> alts;
    if (lo < 0) {  // "-" then [max(1, -hi), -lo], computed without overflowing at int64's minimum
      const uint64_t a = hi < 0 ? uint64_t(-(hi + 1)) + 1 : 1, b = uint64_t(-(lo + 1)) + 1;
      alts.push_back(nfa_.concat(nfa_.literal("-"), natural_range(a, b)));
    }
    if (hi >= 0) alts.push_back(natural_range(uint64_t(std::max<int64_t>(lo, 0)), uint64_t(hi)));
    return nfa_.alt(alts);
  }

  // The decimal numerals (no leading zeros) of the integers in [a, b], a <= b: per length, a
  // range of digit strings of that length.
  Frag natural_range(uint64_t a, uint64_t b) {
    const std::string sa = std::to_string(a), sb = std::to_string(b);
    std::vector<Frag> alts;
    for (size_t len = sa.size(); len <= sb.size(); ++len)
      alts.push_back(digit_range(len == sa.size() ? sa : "1" + std::string(len - 1, '0'),
                                 len == sb.size() ? sb : std::string(len, '9')));
    return nfa_.alt(alts);
  }

  // Digit strings of x's length from x to y (x <= y): a shared first digit, or x's first digit
  // then anything from x's rest up, the digits between with anything after, y's first digit
  // then anything up to y's rest.
  Frag digit_range(const std::string& x, const std::string& y) {
    if (x.empty()) return nfa_.empty();
    const std::string xr = x.substr(1), yr = y.substr(1);
    auto first = [&](char lo, char hi) { return nfa_.seq({{uint8_t(lo), uint8_t(hi)}}); };
    if (x[0] == y[0]) return nfa_.concat(first(x[0], x[0]), digit_range(xr, yr));
    auto any_digits = [&] {
      Frag f = nfa_.empty();
      for (size_t i = 0; i < xr.size(); ++i) f = nfa_.concat(f, first('0', '9'));
      return f;
    };
    if (xr.find_first_not_of('0') == std::string::npos &&
        yr.find_first_not_of('9') == std::string::npos)
      return nfa_.concat(first(x[0], y[0]), any_digits());
    std::vector<Frag> alts;
    alts.push_back(nfa_.concat(first(x[0], x[0]), digit_range(xr, std::string(xr.size(), '9'))));
    if (y[0] - x[0] > 1)
      alts.push_back(nfa_.concat(first(char(x[0] + 1), char(y[0] - 1)), any_digits()));
    alts.push_back(nfa_.concat(first(y[0], y[0]), digit_range(std::string(yr.size(), '0'), yr)));
    return nfa_.alt(alts);
  }

  // The numbers within the bounds (no exponent). An integer part i takes any fraction when all of
  // [i, i+1) is in range; the top integer and, above an exclusive integer minimum, that integer
  // with a nonzero fraction are added. Values between a non-integer bound and the nearest integer
  // inside it (0.7 under "minimum": 0.5) are not written: a subset, never a value out of range.
  Frag bounded_number(const ojson& s, const std::string& where) {
    double lo = -INFINITY, hi = INFINITY;
    bool lo_x = false, hi_x = false;
    auto read = [&](const char* key) {
      const auto it = s.find(key);
      if (it == s.end()) return std::optional<double>();
      if (!it->is_number()) fail(where, std::string("'") + key + "' must be a number");
      return std::optional<double>(it->get<double>());
    };
    if (const auto v = read("minimum"); v && *v > lo) lo = *v, lo_x = false;
    if (const auto v = read("exclusiveMinimum"); v && *v >= lo) lo = *v, lo_x = true;
    if (const auto v = read("maximum"); v && *v < hi) hi = *v, hi_x = false;
    if (const auto v = read("exclusiveMaximum"); v && *v <= hi) hi = *v, hi_x = true;
    std::vector<Frag> alts;
    if (hi > 0 || (hi == 0 && !hi_x))  // x >= 0
      magnitudes(std::max(lo, 0.0), lo >= 0 && lo_x, hi, hi_x, alts);
    if (lo < 0) {  // x < 0: "-" then a magnitude above max(-hi, 0) (never "-0") and up to -lo
      std::vector<Frag> negative;
      magnitudes(hi < 0 ? -hi : 0.0, hi < 0 ? hi_x : true, -lo, lo_x, negative);
      if (!negative.empty()) alts.push_back(nfa_.concat(nfa_.literal("-"), nfa_.alt(negative)));
    }
    if (alts.empty())
      fail(where, "no number with at most " + std::to_string(kMultipleIntDigits) +
                      " integer digits lies within the schema's minimum and maximum");
    return nfa_.alt(alts);
  }

  // Unsigned numerals x with a <= x <= b (a < x, x < b when exclusive), 0 <= a, b maybe infinite.
  void magnitudes(double a, bool a_x, double b, bool b_x, std::vector<Frag>& alts) {
    const double cap = 1e15 - 1;  // kMultipleIntDigits digits: exact in a double
    if (a > cap) return;
    const bool a_integral = a == std::floor(a);
    const double first = a_x && a_integral ? a + 1 : std::ceil(a);
    const double last_any_fraction = std::isinf(b) ? cap : std::min(std::floor(b) - 1, cap);
    auto fraction = [&] {
      return nfa_.concat(nfa_.literal("."),
                         nfa_.concat(nfa_.seq({{'0', '9'}}), up_to_digits(kMultipleIntDigits - 1)));
    };
    if (first <= last_any_fraction)
      alts.push_back(nfa_.concat(natural_range(uint64_t(first), uint64_t(last_any_fraction)),
                                 nfa_.optional(fraction())));
    if (!std::isinf(b)) {
      const double top = b == std::floor(b) && b_x ? b - 1 : std::floor(b);
      if (top >= first && top <= cap) alts.push_back(nfa_.literal(std::to_string(uint64_t(top))));
    }
    if (a_x && a_integral && a + 1 <= b && a <= cap) {  // a.0*[1-9][0-9]*: just above a
      Frag f = nfa_.literal(std::to_string(uint64_t(a)) + ".");
      f = nfa_.concat(f, nfa_.up_to(kMultipleIntDigits - 1, [&] { return nfa_.literal("0"); }));
      f = nfa_.concat(f, nfa_.seq({{'1', '9'}}));
      alts.push_back(nfa_.concat(f, up_to_digits(kMultipleIntDigits - 1)));
    }
  }

  Frag number() {
    Frag f = integer();
    f = nfa_.concat(
        f, nfa_.optional(nfa_.concat(nfa_.literal("."), nfa_.plus(nfa_.seq({{'0', '9'}})))));
    Frag exp = nfa_.concat(nfa_.seqs({{{'e', 'e'}}, {{'E', 'E'}}}),
                           nfa_.seqs({{{'+', '+'}}, {{'-', '-'}}, {}}));
    // At most two exponent digits: 1e999 is valid JSON grammar but overflows a double, and
    // parsers (nlohmann, Python's json with floats) reject or mangle it.
    exp =
        nfa_.concat(exp, nfa_.concat(nfa_.seq({{'0', '9'}}), up_to_digits(kMaxExponentDigits - 1)));
    return nfa_.concat(f, nfa_.optional(exp));
  }

  Frag string_char() { return json_string_char(nfa_); }

  // The content between the quotes: a pattern, a format and a length, each alone or all those
  // given together (their intersection).
  Frag string(const ojson& s, const std::string& where) {
    const auto min = count(s, "minLength", where), max = count(s, "maxLength", where);
    if (min && max && *max < *min) fail(where, "maxLength < minLength");
    std::vector<std::pair<std::string, std::string>> regexes;  // (where, pattern)
    if (const auto p = s.find("pattern"); p != s.end()) {
      if (!p->is_string()) fail(where, "'pattern' must be a string");
      regexes.emplace_back(where + "/pattern", p->get<std::string>());
    }
    if (const auto f = s.find("format"); f != s.end()) {
      const auto regex = f->is_string() ? string_format_regex(f->get<std::string>()) : std::nullopt;
      if (!regex)
        fail(where, "the format " + f->dump() +
                        " is not supported (supported: " + supported_string_formats() + ")");
      regexes.emplace_back(where + "/format", *regex);
    }
    auto regex_frag = [&](SchemaCompiler& c, const std::pair<std::string, std::string>& r) {
      try {
        return compile_regex(c.nfa_, r.second, {.json_string = true});
      } catch (const ConstraintError& e) {
        fail(r.first, e.what());
      }
    };
    auto length_frag = [&](SchemaCompiler& c) {
      Frag f = c.nfa_.empty();
      for (int64_t i = 0; i < min.value_or(0); ++i) f = c.nfa_.concat(f, c.string_char());
      if (!max) return c.nfa_.concat(f, c.nfa_.star(c.string_char()));
      if (*max > min.value_or(0))
        f = c.nfa_.concat(f, c.nfa_.up_to(*max - min.value_or(0), [&] { return c.string_char(); }));
      return f;
    };
    Frag content;
    if (regexes.empty()) {
      content = length_frag(*this);
    } else if (regexes.size() == 1 && !min && !max) {
      content = regex_frag(*this, regexes[0]);
    } else {
      std::vector<Automaton> parts;
      for (const auto& r : regexes)
        parts.push_back(standalone([&](SchemaCompiler& c) { return regex_frag(c, r); }));
      if (min || max) parts.push_back(standalone(length_frag));
      content = intersection(std::move(parts), where);
    }
    return nfa_.concat(nfa_.concat(nfa_.literal("\""), content), nfa_.literal("\""));
  }

  Frag array(const ojson& s, const std::string& where, int depth) {
    const auto min = count(s, "minItems", where), max = count(s, "maxItems", where);
    if (min && max && *max < *min) fail(where, "maxItems < minItems");
    const auto items = s.find("items");
    if (items != s.end() && items->is_array())
      fail(where, "'items' as a list (tuple validation) is not supported");
    auto item = [&] {
      return items == s.end() ? any_value(kAnyValueDepth)
                              : value(*items, where + "/items", depth + 1);
    };
    const int64_t lo = min.value_or(0);
    Frag f = nfa_.literal("[");
    if (max && *max == 0) return nfa_.concat(f, nfa_.literal("]"));
    // item (, item){lo-1, max-1}, optional as a whole when lo == 0.
    Frag list = item();
    for (int64_t i = 1; i < lo; ++i)
      list = nfa_.concat(list, nfa_.concat(nfa_.literal(","), item()));
    if (!max) {
      list = nfa_.concat(list, nfa_.star(nfa_.concat(nfa_.literal(","), item())));
    } else if (*max > std::max<int64_t>(lo, 1)) {
      list = nfa_.concat(list, nfa_.up_to(*max - std::max<int64_t>(lo, 1),
                                          [&] { return nfa_.concat(nfa_.literal(","), item()); }));
    }
    if (lo == 0) list = nfa_.optional(list);
    return nfa_.concat(nfa_.concat(f, list), nfa_.literal("]"));
  }

  // Properties in the schema's order, each optional unless required. One copy of each
  // property's key and value; "after property i" states are wired by hand to a comma before
  // every later property j that no required property between i and j forbids skipping to.
  Frag object(const ojson& s, const std::string& where, int depth) {
    const auto props = s.find("properties");
    if (props == s.end()) {
      if (s.contains("additionalProperties")) return nfa_.literal("{}");  // false: nothing
      if (s.contains("required")) fail(where, "'required' without 'properties'");
      return any_object(kAnyValueDepth);
    }
    if (!props->is_object()) fail(where, "'properties' must be an object");
    // Optional properties are wired to every later one: quadratic in their number.
    if (props->size() > kMaxProperties)
      fail(where, "more than " + std::to_string(kMaxProperties) + " properties");
    std::vector<std::string> names;
    std::vector<const ojson*> schemas;
    for (const auto& [k, v] : props->items()) names.push_back(k), schemas.push_back(&v);
    const size_t n = names.size();
    std::vector<bool> required(n, false);
    if (const auto r = s.find("required"); r != s.end()) {
      if (!r->is_array()) fail(where, "'required' must be an array of property names");
      for (const auto& name : *r) {
        const auto at = name.is_string()
                            ? std::find(names.begin(), names.end(), name.get<std::string>())
                            : names.end();
        if (at == names.end())
          fail(where, "required property " + name.dump() + " is not in 'properties'");
        required[size_t(at - names.begin())] = true;
      }
    }
    const Frag open = nfa_.literal("{");
    const int32_t close = nfa_.add_state();
    std::vector<Frag> prop(n);
    for (size_t j = 0; j < n; ++j)
      prop[j] = nfa_.concat(nfa_.literal(ojson(names[j]).dump() + ":"),
                            value(*schemas[j], where + "/properties/" + names[j], depth + 1));
    // i == n stands for "no property yet" (right after the brace).
    for (size_t i = 0; i <= n; ++i) {
      const bool first = i == n;
      int32_t from = first ? open.out : prop[i].out;
      int32_t comma = -1;
      if (!first) {
        comma = nfa_.add_state();
        nfa_.add_edge(from, ',', ',', comma);
      }
      bool blocked = false;  // a required property has been passed over
      for (size_t j = first ? 0 : i + 1; j < n && !blocked; ++j) {
        nfa_.add_eps(first ? from : comma, prop[j].in);
        blocked = required[j];
      }
      if (!blocked) nfa_.add_eps(from, close);
    }
    const int32_t out = nfa_.add_state();
    nfa_.add_edge(close, '}', '}', out);
    return {open.in, out};
  }

  // X (sep X)* with one copy of X.
  Frag separated(Frag x, char sep) {
    const int32_t out = nfa_.add_state(), after_sep = nfa_.add_state();
    nfa_.add_eps(x.out, out);
    nfa_.add_edge(x.out, uint8_t(sep), uint8_t(sep), after_sep);
    nfa_.add_eps(after_sep, x.in);
    return {x.in, out};
  }

 public:
  Frag any_object(int depth) {
    Frag member = nfa_.concat(nfa_.concat(plain_string(), nfa_.literal(":")), any_value(depth - 1));
    Frag body = nfa_.optional(separated(member, ','));
    return nfa_.concat(nfa_.concat(nfa_.literal("{"), body), nfa_.literal("}"));
  }

 private:
  Frag any_array(int depth) {
    Frag body = nfa_.optional(separated(any_value(depth - 1), ','));
    return nfa_.concat(nfa_.concat(nfa_.literal("["), body), nfa_.literal("]"));
  }

  Frag plain_string() {
    return nfa_.concat(nfa_.concat(nfa_.literal("\""), nfa_.star(string_char())),
                       nfa_.literal("\""));
  }

  // Any JSON value whose containers nest at most `depth` deep.
  Frag any_value(int depth) {
    std::vector<Frag> alts{plain_string(), number(), nfa_.literal("true"), nfa_.literal("false"),
                           nfa_.literal("null")};
    if (depth > 0) {
      alts.push_back(any_object(depth));
      alts.push_back(any_array(depth));
    }
    return nfa_.alt(alts);
  }

  Nfa& nfa_;
  const ojson& root_;
  std::vector<std::string> refs_;  // $refs being expanded (recursion check)
};

}  // namespace

// One character of JSON string content: unescaped (not ", \ or a control) or an escape; \u
// escapes of surrogates are left out (a lone one is invalid, and pairs are not worth it).
Frag json_string_char(Nfa& nfa) {
  CodeSet plain = CodeSet::of(0x20, kMaxCodePoint);
  CodeSet bad;
  bad.add('"', '"'), bad.add('\\', '\\');
  plain = plain.intersect(bad.complement());
  const Frag unescaped = nfa.seqs(utf8_sequences(plain));
  const Frag simple = nfa.concat(nfa.literal("\\"), nfa.seqs({{{'"', '"'}},
                                                              {{'\\', '\\'}},
                                                              {{'/', '/'}},
                                                              {{'b', 'b'}},
                                                              {{'f', 'f'}},
                                                              {{'n', 'n'}},
                                                              {{'r', 'r'}},
                                                              {{'t', 't'}}}));
  const ByteSeq hex{{'0', '9'}, {'A', 'F'}, {'a', 'f'}};
  std::vector<ByteSeq> hex2;  // first two hex digits, surrogates (D8..DF) excluded
  hex2.push_back({{'0', '9'}, {'0', '9'}});
  hex2.push_back({{'0', '9'}, {'A', 'F'}});
  hex2.push_back({{'0', '9'}, {'a', 'f'}});
  for (ByteRange first :
       {ByteRange{'A', 'C'}, ByteRange{'E', 'F'}, ByteRange{'a', 'c'}, ByteRange{'e', 'f'}})
    for (const ByteRange& second : hex) hex2.push_back({first, second});
  for (ByteRange d : {ByteRange{'D', 'D'}, ByteRange{'d', 'd'}}) hex2.push_back({d, {'0', '7'}});
  const std::vector<ByteSeq> digit{{hex[0]}, {hex[1]}, {hex[2]}};
  Frag u = nfa.concat(nfa.literal("\\u"), nfa.seqs(hex2));
  u = nfa.concat(u, nfa.concat(nfa.seqs(digit), nfa.seqs(digit)));
  return nfa.alt({unescaped, simple, u});
}

Automaton json_schema_automaton(const nlohmann::ordered_json& schema) {
  Nfa nfa;
  SchemaCompiler c(nfa, schema);
  const Frag f = c.value(schema, "", 0);
  return Automaton::determinize(nfa, f);
}

Automaton json_object_automaton(int max_depth) {
  if (max_depth < 1 || max_depth > 16)
    throw ConstraintError("json_object nesting depth must be in [1, 16]");
  Nfa nfa;
  const ojson none;
  SchemaCompiler c(nfa, none);
  const Frag f = c.any_object(max_depth);
  return Automaton::determinize(nfa, f);
}

}  // namespace shrike::constrain
