#include "constrain/json_schema.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "constrain/error.h"

namespace shrike::constrain {
namespace {

using ojson = nlohmann::ordered_json;

struct SchemaCase {
  const char* schema;
  std::vector<std::string> good, bad;
};

TEST(JsonSchema, TenSchemasMatchAndReject) {
  const SchemaCase cases[] = {
      {R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},
          "required":["name","age"]})",
       {R"({"name":"Ann","age":31})", R"({"name":"","age":-4})",
        R"({"name":"a\"b\\c\u00e9","age":0})"},
       {R"({"age":31,"name":"Ann"})", R"({"name":"Ann"})", R"({"name":"Ann","age":3.5})",
        R"({ "name":"Ann","age":31})", R"({"name":"Ann","age":031})",
        R"({"name":"A\ud800","age":1})"}},
      {R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"type":"number"}}})",
       {"{}", R"({"a":true})", R"({"b":null,"c":1.5e-3})", R"({"a":false,"c":-0.25})"},
       {R"({"c":1,"a":true})", R"({"a":true,})", R"({,"a":true})", R"({"a":true,"a":true})",
        R"({"d":1})", R"({"c":1.})"}},
      {R"({"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"},"z":{"type":"integer"}},
          "required":["y"]})",
       {R"({"y":1})", R"({"x":1,"y":2})", R"({"y":2,"z":3})", R"({"x":1,"y":2,"z":3})"},
       {"{}", R"({"x":1})", R"({"x":1,"z":3})", R"({"z":3})"}},
      {R"({"enum":["red","green",3,null,{"k":[1,2]}]})",
       {R"("red")", "3", "null", R"({"k":[1,2]})"},
       {R"("blue")", "red", R"({"k":[1, 2]})"}},
      {R"({"type":"object","properties":{"v":{"const":"fixed"},"n":{"type":"string","minLength":2,"maxLength":3}},
          "required":["v","n"]})",
       {R"({"v":"fixed","n":"ab"})", R"({"v":"fixed","n":"日本語"})", R"({"v":"fixed","n":"a\n"})"},
       {R"({"v":"other","n":"ab"})", R"({"v":"fixed","n":"a"})", R"({"v":"fixed","n":"abcd"})"}},
      {R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
       {"[1]", "[1,2]", "[1,2,3]"},
       {"[]", "[1,2,3,4]", "[1,]", "[ 1]"}},
      {R"({"type":"array","items":{"type":"string","pattern":"[a-z]{2}\\d"}})",
       {"[]", R"(["ab1"])", R"(["ab1","zz9"])"},
       {R"(["ab"])", R"(["AB1"])"}},
      {R"({"anyOf":[{"type":"integer"},{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}]})",
       {"12", R"({"ok":true})"},
       {"1.5", "{}", R"("12")"}},
      {R"({"$defs":{"P":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]}},
          "type":"object","properties":{"from":{"$ref":"#/$defs/P"},"to":{"$ref":"#/$defs/P"},
          "tags":{"type":["array","null"],"items":{"enum":["a","b"]},"maxItems":2}},"required":["from","to"]})",
       {R"({"from":{"x":0,"y":1},"to":{"x":2.5,"y":-3}})",
        R"({"from":{"x":0,"y":1},"to":{"x":2,"y":3},"tags":null})",
        R"({"from":{"x":0,"y":1},"to":{"x":2,"y":3},"tags":["a","b"]})"},
       {R"({"from":{"x":0},"to":{"x":2,"y":3}})",
        R"({"from":{"x":0,"y":1},"to":{"x":2,"y":3},"tags":["c"]})",
        R"({"from":{"x":0,"y":1},"to":{"x":2,"y":3},"tags":["a","b","a"]})"}},
      {R"({"type":"object","properties":{"meta":{},"list":{"type":"array"}},"required":["meta","list"]})",
       {R"({"meta":{"a":[1,{"b":null}]},"list":[1,"x",true,[]]})", R"({"meta":"s","list":[]})"},
       {R"({"meta":{"a":1},"list":{}})", R"({"meta":{a:1},"list":[]})"}},
  };
  for (const SchemaCase& c : cases) {
    SCOPED_TRACE(c.schema);
    const Automaton a = json_schema_automaton(ojson::parse(c.schema));
    for (const auto& s : c.good) EXPECT_TRUE(a.matches(s)) << "should match: " << s;
    for (const auto& s : c.bad) EXPECT_FALSE(a.matches(s)) << "should not match: " << s;
  }
}

// minimum / maximum / exclusiveMinimum / exclusiveMaximum on integers: exactly the integers in
// the range, in JSON's canonical form (no leading zeros, no "-0").
TEST(JsonSchema, IntegerBoundsAllowExactlyTheRange) {
  const Automaton a =
      json_schema_automaton(ojson::parse(R"({"type":"integer","minimum":-37,"maximum":4567})"));
  for (int i = -1000; i <= 12000; ++i)
    ASSERT_EQ(a.matches(std::to_string(i)), i >= -37 && i <= 4567) << i;
  for (const char* bad : {"00", "07", "-0", "-", "", "1.0", "+5"})
    EXPECT_FALSE(a.matches(bad)) << bad;
  const Automaton ex = json_schema_automaton(
      ojson::parse(R"({"type":"integer","exclusiveMinimum":-10.5,"exclusiveMaximum":10})"));
  for (int i = -200; i <= 200; ++i)
    ASSERT_EQ(ex.matches(std::to_string(i)), i >= -10 && i < 10) << i;
  const Automaton low = json_schema_automaton(ojson::parse(R"({"type":"integer","minimum":1.5})"));
  EXPECT_TRUE(low.matches("2"));
  EXPECT_TRUE(low.matches("9223372036854775807"));
  EXPECT_FALSE(low.matches("9223372036854775808"));  // the unbounded side stops at int64's limit
  EXPECT_FALSE(low.matches("1"));
  EXPECT_FALSE(low.matches("-5"));
  const Automaton high = json_schema_automaton(ojson::parse(R"({"type":"integer","maximum":-3})"));
  EXPECT_TRUE(high.matches("-3"));
  EXPECT_TRUE(high.matches("-9223372036854775808"));
  EXPECT_FALSE(high.matches("-2"));
  EXPECT_FALSE(high.matches("0"));
  // Inside an object, with a null alternative.
  const Automaton obj = json_schema_automaton(ojson::parse(
      R"({"type":"object","properties":{"n":{"type":["integer","null"],"minimum":1,"maximum":12}},"required":["n"]})"));
  EXPECT_TRUE(obj.matches(R"({"n":12})"));
  EXPECT_TRUE(obj.matches(R"({"n":null})"));
  EXPECT_FALSE(obj.matches(R"({"n":13})"));
  EXPECT_FALSE(obj.matches(R"({"n":0})"));
}

// Number bounds: every numeral the automaton takes (over a grid of forms) lies in range, and the
// integers and halves well inside the range are all taken.
TEST(JsonSchema, NumberBoundsKeepEveryValueInRange) {
  struct Range {
    const char* schema;
    double lo, hi;
    bool lo_x, hi_x;
    std::vector<std::string> taken;  // values well inside, which a model must be able to write
  };
  const Range ranges[] = {
      {R"({"type":"number","minimum":-2.5,"maximum":7})",
       -2.5,
       7,
       false,
       false,
       {"-2", "-1.5", "0", "0.25", "6.99", "7"}},
      {R"({"type":"number","exclusiveMinimum":0,"maximum":1})",
       0,
       1,
       true,
       false,
       {"0.5", "0.01", "1"}},
      {R"({"type":"number","minimum":-10,"exclusiveMaximum":-3})",
       -10,
       -3,
       false,
       true,
       {"-10", "-9.5", "-4", "-3.5"}},
      {R"({"type":"number","exclusiveMinimum":-1,"exclusiveMaximum":1})",
       -1,
       1,
       true,
       true,
       {"0", "0.5", "-0.5", "-0.99"}},
      {R"({"type":"number","minimum":100})",
       100,
       INFINITY,
       false,
       false,
       {"100", "100.5", "123456789012345"}},
      {R"({"type":"number","maximum":-0.5})", -INFINITY, -0.5, false, false, {"-1", "-1.5"}},
  };
  std::vector<std::string> grid;
  for (int i = -1200; i <= 1200; ++i) {
    const std::string sign = i < 0 ? "-" : "", mag = std::to_string(std::abs(i) / 100);
    const std::string frac = std::to_string(100 + std::abs(i) % 100).substr(1);
    grid.push_back(sign + mag + "." + frac);
    grid.push_back(sign + mag + "." + frac.substr(0, 1));
    if (std::abs(i) % 100 == 0) grid.push_back(sign + mag);
  }
  for (const char* extra : {"100", "100.5", "123456789012345", "1234567890123456", "-0", "1e2"})
    grid.push_back(extra);
  for (const auto& r : ranges) {
    SCOPED_TRACE(r.schema);
    const Automaton a = json_schema_automaton(ojson::parse(r.schema));
    int taken = 0;
    for (const auto& text : grid) {
      if (!a.matches(text)) continue;
      ++taken;
      const double v = std::stod(text);
      EXPECT_TRUE(r.lo_x ? v > r.lo : v >= r.lo) << text;
      EXPECT_TRUE(r.hi_x ? v < r.hi : v <= r.hi) << text;
      EXPECT_EQ(text.find('e'), std::string::npos) << text;
    }
    EXPECT_GT(taken, 0);
    for (const auto& text : r.taken) EXPECT_TRUE(a.matches(text)) << text;
  }
  // Just above an exclusive integer minimum.
  const Automaton pos =
      json_schema_automaton(ojson::parse(R"({"type":"number","exclusiveMinimum":0})"));
  EXPECT_TRUE(pos.matches("0.001"));
  EXPECT_FALSE(pos.matches("0.000"));
  EXPECT_FALSE(pos.matches("0"));
}

// multipleOf: exactly the multiples, for integer and decimal steps, alone and with bounds.
TEST(JsonSchema, MultipleOfTakesExactlyTheMultiples) {
  const Automaton seven =
      json_schema_automaton(ojson::parse(R"({"type":"integer","multipleOf":7})"));
  for (int i = -3000; i <= 3000; ++i) ASSERT_EQ(seven.matches(std::to_string(i)), i % 7 == 0) << i;
  EXPECT_TRUE(seven.matches("700000000000000"));    // 15 digits
  EXPECT_FALSE(seven.matches("7000000000000000"));  // 16: past what a double holds exactly
  EXPECT_FALSE(seven.matches("07"));
  EXPECT_FALSE(seven.matches("7.0"));
  const Automaton quarter =
      json_schema_automaton(ojson::parse(R"({"type":"number","multipleOf":0.25})"));
  for (const char* good : {"0", "0.25", "0.5", "0.50", "1.75", "-3.25", "12"})
    EXPECT_TRUE(quarter.matches(good)) << good;
  for (const char* bad : {"0.3", "0.125", "1.7", "0.250", "1e2", ".5"})
    EXPECT_FALSE(quarter.matches(bad)) << bad;
  const Automaton integral_half =
      json_schema_automaton(ojson::parse(R"({"type":"integer","multipleOf":0.5})"));
  EXPECT_TRUE(integral_half.matches("3"));
  EXPECT_FALSE(integral_half.matches("3.5"));
  const Automaton hundreds =
      json_schema_automaton(ojson::parse(R"({"type":"number","multipleOf":1e2})"));
  EXPECT_TRUE(hundreds.matches("300"));
  EXPECT_FALSE(hundreds.matches("350"));
  const Automaton both = json_schema_automaton(
      ojson::parse(R"({"type":"integer","minimum":-20,"exclusiveMaximum":30,"multipleOf":6})"));
  for (int i = -100; i <= 100; ++i)
    ASSERT_EQ(both.matches(std::to_string(i)), i % 6 == 0 && i >= -20 && i < 30) << i;
  const Automaton price = json_schema_automaton(
      ojson::parse(R"({"type":"number","exclusiveMinimum":0,"maximum":100,"multipleOf":0.01})"));
  for (const char* good : {"0.01", "19.99", "100", "99.9", "42"})
    EXPECT_TRUE(price.matches(good)) << good;
  for (const char* bad : {"0", "0.001", "100.01", "-1", "19.999"})
    EXPECT_FALSE(price.matches(bad)) << bad;
}

// The OpenAI formats: common forms taken, invalid ones not; alone and with a length.
TEST(JsonSchema, StringFormatsTakeValidFormsOnly) {
  struct FormatCase {
    const char* format;
    std::vector<std::string> good, bad;
  };
  const FormatCase cases[] = {
      {"date",
       {"2024-01-31", "1999-12-01", "2023-02-28"},
       {"2024-02-30", "2024-13-01", "2024-1-01", "2024-04-31", "24-01-01", "2024-00-10"}},
      {"time",
       {"23:59:59Z", "00:00:00.123+05:30", "12:30:00-08:00"},
       {"24:00:00Z", "12:60:00Z", "12:30:00", "12:30Z", "12:30:00+24:00"}},
      {"date-time",
       {"2024-06-01T12:00:00Z", "2000-01-01T00:00:00.5-01:00"},
       {"2024-06-01 12:00:00Z", "2024-06-01T12:00:00", "2024-06-31T12:00:00Z"}},
      {"duration",
       {"P1Y", "P3Y6M4DT12H30M5S", "PT5M", "P2W", "P10D", "PT1H1S"},
       {"P", "PT", "P1H", "P1W2D", "1Y", "P1.5Y", "P1YT"}},
      {"email",
       {"ann@example.com", "first.last+tag@mail.co.uk", "a_b-c@x-y.io"},
       {"ann@example", "@example.com", "ann@@example.com", "an n@example.com", "ann@-x.com",
        "ann.@example.com"}},
      {"hostname",
       {"example.com", "localhost", "a-b.c-d.e", "xn--bcher-kva.example"},
       {"-example.com", "example-.com", "exa_mple.com", "a..b", "example.com."}},
      {"ipv4",
       {"192.168.0.1", "0.0.0.0", "255.255.255.255"},
       {"256.1.1.1", "01.2.3.4", "1.2.3", "1.2.3.4.5"}},
      {"ipv6",
       {"2001:db8:0:0:0:0:2:1", "::1", "fe80::1:2", "::", "2001:db8::"},
       {"2001:db8:::1", "1:2:3:4:5:6:7:8:9", "12345::", "g::1", "1::2::3"}},
      {"uuid",
       {"123e4567-e89b-12d3-a456-426614174000", "ABCDEF01-2345-6789-abcd-ef0123456789"},
       {"123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400",
        "123e4567-e89b-12d3-a456-42661417400g"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.format);
    const Automaton a = json_schema_automaton({{"type", "string"}, {"format", c.format}});
    for (const auto& s : c.good) EXPECT_TRUE(a.matches("\"" + s + "\"")) << s;
    for (const auto& s : c.bad) EXPECT_FALSE(a.matches("\"" + s + "\"")) << s;
  }
  const Automaton short_host =
      json_schema_automaton(ojson::parse(R"({"type":"string","format":"hostname","maxLength":9})"));
  EXPECT_TRUE(short_host.matches(R"("a.example")"));
  EXPECT_FALSE(short_host.matches(R"("ab.example")"));
  // A pattern and a length together: both hold.
  const Automaton code = json_schema_automaton(
      ojson::parse(R"({"type":"string","pattern":"[A-Z]+[0-9]*","minLength":3,"maxLength":5})"));
  for (const char* good : {"ABC", "AB1", "A1234", "ABCDE"})
    EXPECT_TRUE(code.matches(std::string("\"") + good + "\"")) << good;
  for (const char* bad : {"AB", "A12345", "1AB", "ABCDEF"})
    EXPECT_FALSE(code.matches(std::string("\"") + bad + "\"")) << bad;
}

// A schema of its own ($ref, const, enum, anyOf) with other keywords beside it: all hold.
TEST(JsonSchema, SiblingsOfRefEnumAndAnyOfHoldToo) {
  const Automaton e =
      json_schema_automaton(ojson::parse(R"({"type":"string","enum":["a",1,"bb"],"maxLength":1})"));
  EXPECT_TRUE(e.matches(R"("a")"));
  EXPECT_FALSE(e.matches("1"));
  EXPECT_FALSE(e.matches(R"("bb")"));
  const Automaton r = json_schema_automaton(ojson::parse(
      R"({"$defs":{"S":{"type":"string"}},"$ref":"#/$defs/S","type":"string","maxLength":2})"));
  EXPECT_TRUE(r.matches(R"("ab")"));
  EXPECT_FALSE(r.matches(R"("abc")"));
  const Automaton any = json_schema_automaton(ojson::parse(
      R"({"type":"object","anyOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},
          {"properties":{"b":{"type":"null"}},"required":["b"]}]})"));
  EXPECT_TRUE(any.matches(R"({"a":1})"));
  EXPECT_TRUE(any.matches(R"({"b":null})"));
  EXPECT_FALSE(any.matches("1"));
  EXPECT_FALSE(any.matches("{}"));
  // Annotations beside them change nothing.
  const Automaton noted =
      json_schema_automaton(ojson::parse(R"({"enum":[1,"x"],"description":"d","title":"t"})"));
  EXPECT_TRUE(noted.matches("1"));
  EXPECT_TRUE(noted.matches(R"("x")"));
  EXPECT_THROW(json_schema_automaton(ojson::parse(R"({"type":"integer","const":5,"minimum":6})")),
               ConstraintError);
  // A recursive $ref stays refused when siblings sit beside it.
  EXPECT_THROW(
      json_schema_automaton(ojson::parse(
          R"({"$defs":{"N":{"type":"object","properties":{"n":{"$ref":"#/$defs/N","type":"object"}}}},
                       "$ref":"#/$defs/N"})")),
      ConstraintError);
}

TEST(JsonSchema, UnsupportedFeaturesAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type":"string","format":"credit-card"})", "the format \"credit-card\" is not"},
      {R"({"type":"string","format":7})", "is not supported (supported: date-time,"},
      {R"({"type":"object","patternProperties":{"a":{}}})", "'patternProperties'"},
      {R"({"type":"object","properties":{},"additionalProperties":true})", "additionalProperties"},
      {R"({"type":"object","properties":{},"additionalProperties":{"type":"string"}})",
       "additionalProperties"},
      {R"({"if":{"type":"string"},"then":{},"else":{}})", "'if'"},
      {R"({"minimum":0})", "'minimum' needs a \"type\""},
      {R"({"pattern":"a+"})", "'pattern' needs a \"type\""},
      {R"({"maxItems":2})", "'maxItems' needs a \"type\""},
      {R"({"type":"number","minimum":0.5,"maximum":0.7})", "no number with at most 15"},
      {R"({"type":"number","exclusiveMinimum":3,"exclusiveMaximum":3})", "no number"},
      {R"({"type":"integer","multipleOf":0})", "must be greater than 0"},
      {R"({"type":"number","multipleOf":-2})", "must be greater than 0"},
      {R"({"type":"number","multipleOf":1e-12})", "more than 9 decimals"},
      {R"({"type":"integer","multipleOf":"2"})", "must be a number"},
      {R"({"type":"integer","multipleOf":99999})", "too large an automaton"},
      {R"({"type":"integer","minimum":1,"maximum":6,"multipleOf":7})", "no text satisfies"},
      {R"({"type":"integer","minimum":5,"maximum":4})", "no integer lies"},
      {R"({"type":"integer","exclusiveMinimum":4,"exclusiveMaximum":5})", "no integer lies"},
      {R"({"type":"integer","minimum":1e30})", "no integer lies"},
      {R"({"type":"integer","minimum":"3"})", "must be a number"},
      {R"({"oneOf":[{"type":"integer"}]})", "'oneOf'"},
      {R"({"$defs":{"N":{"type":"object","properties":{"next":{"$ref":"#/$defs/N"}}}},"$ref":"#/$defs/N"})",
       "recursive"},
      {R"({"$ref":"#/$defs/Missing"})", "names no definition"},
      {R"({"$ref":"http://example.com/s.json"})", "only #/$defs/NAME"},
      {R"({"type":"object","properties":{"a":{}},"required":["b"]})", "required property \"b\""},
      {R"({"type":"strng"})", "unknown type 'strng'"},
      {R"({"type":"string","pattern":"(a)\\1"})", "backreferences"},
      {R"({"type":"string","pattern":"a{5}","maxLength":3})", "no text satisfies"},
      {R"({"type":"string","format":"uuid","pattern":"[g-z]+"})", "no text satisfies"},
      {R"({"type":"array","items":[{"type":"string"}]})", "tuple validation"},
      {"false", "matches nothing"},
      {"[1]", "must be an object"},
  };
  for (const auto& [schema, expected] : cases) {
    SCOPED_TRACE(schema);
    try {
      json_schema_automaton(ojson::parse(schema));
      ADD_FAILURE() << "no error";
    } catch (const ConstraintError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
  // Nesting beyond the limit: an error, not a stack overflow.
  std::string deep = R"({"type":"string"})";
  for (int i = 0; i < 40; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  EXPECT_THROW(json_schema_automaton(ojson::parse(deep)), ConstraintError);
  // Definitions that double at each level: the NFA cap (or the depth limit) ends it.
  ojson defs = {{"A0", {{"type", "string"}, {"maxLength", 8}}}};
  for (int i = 1; i <= 24; ++i) {
    const ojson ref = {{"$ref", "#/$defs/A" + std::to_string(i - 1)}};
    defs["A" + std::to_string(i)] = {
        {"type", "array"}, {"items", ref}, {"minItems", 2}, {"maxItems", 2}};
  }
  EXPECT_THROW(json_schema_automaton({{"$defs", defs}, {"$ref", "#/$defs/A24"}}), ConstraintError);
  ojson props = ojson::object();
  for (size_t i = 0; i <= kMaxProperties; ++i) props["p" + std::to_string(i)] = {{"type", "null"}};
  EXPECT_THROW(json_schema_automaton({{"type", "object"}, {"properties", props}}), ConstraintError);
}

// The documented maximum stays usable: kMaxProperties optional strings (every "after property
// i" state may go on to any later one) compile within the determinisation work bound.
TEST(JsonSchema, TheMostPropertiesAllowedCompile) {
  ojson props = ojson::object();
  for (size_t i = 0; i < kMaxProperties; ++i) props["p" + std::to_string(i)] = {{"type", "string"}};
  const Automaton a = json_schema_automaton({{"type", "object"}, {"properties", props}});
  EXPECT_TRUE(a.matches(R"({"p0":"a","p500":"b","p999":"c"})"));
  EXPECT_TRUE(a.matches("{}"));
  EXPECT_FALSE(a.matches(R"({"p999":"c","p0":"a"})"));  // the schema's order
}

TEST(JsonSchema, PropertyOrderIsTheSchemas) {
  const Automaton a = json_schema_automaton(ojson::parse(
      R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"integer"}},"required":["zeta","alpha"]})"));
  EXPECT_TRUE(a.matches(R"({"zeta":1,"alpha":2})"));
  EXPECT_FALSE(a.matches(R"({"alpha":2,"zeta":1})"));
}

TEST(JsonObject, AnyObjectOfBoundedDepth) {
  const Automaton a = json_object_automaton();
  for (const char* s : {"{}", R"({"a":1})", R"({"a":[1,2.5e3,"x",true,false,null],"b":{"c":{}}})",
                        R"({"k":"\u00e9\n\"","":-0})", R"({"a":[[[[{}]]]]})"})
    EXPECT_TRUE(a.matches(s)) << s;
  for (const char* s :
       {"[]", "1", R"({"a":})", R"({"a":1,})", R"({a:1})", R"({"a":01})", R"({"a":[1,]})",
        R"({"a" :1})", R"({"a":"\x"})", R"({"a":[[[[[[]]]]]]})"})  // 7 levels
    EXPECT_FALSE(a.matches(s)) << s;
  EXPECT_THROW(json_object_automaton(0), ConstraintError);
}

}  // namespace
}  // namespace shrike::constrain
