// Guided decoding options of the OpenAI / vLLM APIs: parsed into a ConstraintSpec, compiled by
// to_generation_request into the request's constraint, errors as 400s naming the problem.
#include <gtest/gtest.h>

#include "constrain/cache.h"
#include "constrain/constraint.h"
#include "server/generation_request.h"
#include "tokenizer/bpe_trainer.h"

namespace shrike::server {
// Its own namespace: server_test is one unity translation unit, and generation_request_test.cc
// has helpers of the same names.
namespace constraint_request {

using Kind = constrain::ConstraintSpec::Kind;

const tokenizer::Tokenizer& tok() {
  static const tokenizer::Tokenizer t(tokenizer::train_bpe(
      {"hello world", "yes no maybe", "{\"a\":1,\"b\":[true,false,null]}", "0123456789"}));
  return t;
}

RequestContext context() {
  RequestContext c{tok(), ChatFormat::Plain, true, 256, "shrike", 0, 1, {}};
  return c;
}

ParsedRequest parsed(const std::string& extra, Endpoint ep = Endpoint::Completions) {
  const std::string body = ep == Endpoint::Completions
                               ? R"({"prompt":"hello",)" + extra + "}"
                               : R"({"messages":[{"role":"user","content":"hi"}],)" + extra + "}";
  auto r = parse_request(body, ep);
  if (const auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << body << ": " << e->message;
  return std::get<ParsedRequest>(r);
}

ApiError parse_error(const std::string& extra) {
  auto r = parse_request(R"({"prompt":"hello",)" + extra + "}", Endpoint::Completions);
  EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << extra;
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

std::shared_ptr<const constrain::Constraint> compiled(ParsedRequest p) {
  auto r = to_generation_request(p, context());
  if (const auto* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << e->message;
    return nullptr;
  }
  return std::get<engine::GenerationRequest>(r).constraint;
}

ApiError compile_error(ParsedRequest p) {
  auto r = to_generation_request(p, context());
  EXPECT_TRUE(std::holds_alternative<ApiError>(r));
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

TEST(GuidedRequest, NoConstraintByDefault) {
  EXPECT_FALSE(parsed(R"("max_tokens":4)").constraint);
  EXPECT_FALSE(parsed(R"("response_format":{"type":"text"})").constraint);
  EXPECT_EQ(compiled(parsed(R"("max_tokens":4)")), nullptr);
}

TEST(GuidedRequest, GuidedChoice) {
  const ParsedRequest p = parsed(R"("guided_choice":["yes","no"])");
  ASSERT_TRUE(p.constraint);
  EXPECT_EQ(p.constraint->kind, Kind::Choice);
  EXPECT_EQ(p.constraint->choices, (std::vector<std::string>{"yes", "no"}));
  const auto c = compiled(p);
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->automaton().matches("no"));
  EXPECT_FALSE(c->automaton().matches("maybe"));
  EXPECT_EQ(c->vocab().size(), tok().n_vocab());

  // With the server's compiler: a cache over one vocabulary.
  constrain::ConstraintCache cache(constrain::TokenVocab::from_tokenizer(tok()));
  RequestContext ctx = context();
  ctx.compile_constraint = [&](const constrain::ConstraintSpec& s) { return cache.get(s); };
  auto r1 = to_generation_request(*std::make_unique<ParsedRequest>(p), ctx);
  auto r2 = to_generation_request(*std::make_unique<ParsedRequest>(p), ctx);
  ASSERT_TRUE(std::holds_alternative<engine::GenerationRequest>(r1));
  ASSERT_TRUE(std::holds_alternative<engine::GenerationRequest>(r2));
  EXPECT_EQ(std::get<engine::GenerationRequest>(r1).constraint,
            std::get<engine::GenerationRequest>(r2).constraint);
}

TEST(GuidedRequest, GuidedRegexOnChat) {
  const ParsedRequest p = parsed(R"("guided_regex":"\\d{2}-[a-z]+")", Endpoint::ChatCompletions);
  ASSERT_TRUE(p.constraint);
  EXPECT_EQ(p.constraint->kind, Kind::Regex);
  const auto c = compiled(p);
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->automaton().matches("42-ab"));
}

TEST(GuidedRequest, GuidedJsonKeepsThePropertyOrder) {
  const std::string schema =
      R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"boolean"}},"required":["zeta","alpha"]})";
  for (const std::string& extra :
       {R"("guided_json":)" + schema, R"("guided_json":)" + nlohmann::json(schema).dump()}) {
    SCOPED_TRACE(extra);
    const ParsedRequest p = parsed(extra);
    ASSERT_TRUE(p.constraint);
    EXPECT_EQ(p.constraint->kind, Kind::JsonSchema);
    const auto c = compiled(p);
    ASSERT_TRUE(c);
    EXPECT_TRUE(c->automaton().matches(R"({"zeta":1,"alpha":true})"));
    EXPECT_FALSE(c->automaton().matches(R"({"alpha":true,"zeta":1})"));
  }
}

TEST(GuidedRequest, ResponseFormat) {
  ParsedRequest p =
      parsed(R"("response_format":{"type":"json_object"})", Endpoint::ChatCompletions);
  ASSERT_TRUE(p.constraint);
  EXPECT_EQ(p.constraint->kind, Kind::JsonObject);
  auto c = compiled(p);
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->automaton().matches(R"({"a":[1,{"b":null}]})"));
  EXPECT_FALSE(c->automaton().matches("[1]"));

  p = parsed(
      R"("response_format":{"type":"json_schema","json_schema":{"name":"answer","strict":true,
             "schema":{"type":"object","properties":{"b":{"enum":["x","y"]},"a":{"type":"null"}}}}})",
      Endpoint::ChatCompletions);
  ASSERT_TRUE(p.constraint);
  EXPECT_EQ(p.constraint->kind, Kind::JsonSchema);
  EXPECT_EQ(p.constraint_param, "response_format");
  c = compiled(p);
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->automaton().matches(R"({"b":"y","a":null})"));
  EXPECT_FALSE(c->automaton().matches(R"({"a":null,"b":"y"})"));
}

TEST(GuidedRequest, MalformedOptionsAre400s) {
  const std::pair<std::string, std::string> cases[] = {
      {R"("guided_choice":["a"],"guided_regex":"a")", "Only one of"},
      {R"("response_format":{"type":"json_object"},"guided_json":{})", "Only one of"},
      {R"("guided_choice":[])", "guided_choice"},
      {R"("guided_choice":["a",1])", "guided_choice"},
      {R"("guided_regex":5)", "guided_regex"},
      {R"("guided_json":5)", "guided_json"},
      {R"("guided_json":"{not json")", "not JSON"},
      {R"("response_format":{"type":"json_schema"})", "json_schema.schema"},
      {R"("response_format":{"type":"json_schema","json_schema":{"schema":{},"strict":"yes"}})",
       "strict"},
      {R"("response_format":{"type":"xml"})", "response_format"},
      {R"("response_format":"json")", "response_format"},
      {R"("guided_grammar":"root ::= \"a\"")", "guided_grammar"},
      {R"("guided_whitespace_pattern":" *")", "guided_whitespace_pattern"},
  };
  for (const auto& [extra, expected] : cases) {
    const ApiError e = parse_error(extra);
    EXPECT_EQ(e.status, 400) << extra;
    EXPECT_NE(e.message.find(expected), std::string::npos) << extra << " -> " << e.message;
  }
}

TEST(GuidedRequest, UnsupportedFeaturesAre400sNamingThem) {
  const std::pair<std::string, std::string> cases[] = {
      {R"("guided_json":{"type":"string","format":"iri"})", "the format \"iri\" is not supported"},
      {R"("guided_json":{"type":"object","patternProperties":{}})", "'patternProperties'"},
      {R"("guided_json":{"$defs":{"T":{"type":"array","items":{"$ref":"#/$defs/T"}}},"$ref":"#/$defs/T"})",
       "recursive"},
      {R"j("guided_regex":"(a)\\1")j", "backreferences"},
      {R"j("guided_regex":"a(?=b)")j", "lookaround"},
      // Found by fuzz_regex: bounded repetitions stacked on an optional, refused in ~0.1 s.
      {R"j("guided_regex":"[a-z]0,3}\\d?{164}?{164}?;1")j", "too complex"},
      {R"("response_format":{"type":"json_schema","json_schema":{"schema":{"if":{}}}})", "'if'"},
  };
  for (const auto& [extra, expected] : cases) {
    const ApiError e = compile_error(parsed(extra));
    EXPECT_EQ(e.status, 400) << extra;
    EXPECT_EQ(e.code, "invalid_constraint") << extra;
    EXPECT_NE(e.message.find(expected), std::string::npos) << extra << " -> " << e.message;
  }
}

}  // namespace constraint_request
}  // namespace shrike::server

namespace shrike::server {
namespace constraint_request {

TEST(GuidedRequest, JumpForwardOnByDefaultOffOnRequest) {
  for (const auto& [extra, want] : std::vector<std::pair<std::string, bool>>{
           {R"("guided_choice":["yes","no"])", true},
           {R"("guided_choice":["yes","no"],"jump_forward":false)", false}}) {
    ParsedRequest p = parsed(extra);
    EXPECT_EQ(p.jump_forward, want) << extra;
    auto r = to_generation_request(p, context());
    ASSERT_TRUE(std::holds_alternative<engine::GenerationRequest>(r));
    EXPECT_EQ(std::get<engine::GenerationRequest>(r).jump_forward, want) << extra;
  }
  EXPECT_EQ(parse_error(R"("jump_forward":"no")").param, "jump_forward");
}

}  // namespace constraint_request
}  // namespace shrike::server
