#include "constrain/json_schema.h"

#include <gtest/gtest.h>

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

TEST(JsonSchema, UnsupportedFeaturesAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type":"string","format":"email"})", "'format'"},
      {R"({"type":"object","patternProperties":{"a":{}}})", "'patternProperties'"},
      {R"({"type":"object","properties":{},"additionalProperties":true})", "additionalProperties"},
      {R"({"type":"object","properties":{},"additionalProperties":{"type":"string"}})",
       "additionalProperties"},
      {R"({"if":{"type":"string"},"then":{},"else":{}})", "'if'"},
      {R"({"type":"number","minimum":0})", "supported on integers"},
      {R"({"minimum":0})", "supported on integers"},
      {R"({"type":["integer","number"],"maximum":3})", "supported on integers"},
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
      {R"({"type":"string","pattern":"a","maxLength":3})", "'pattern' together with"},
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
