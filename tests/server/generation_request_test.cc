// The translation of a parsed OpenAI request into the engine's request, without a server.
#include "server/generation_request.h"

#include <gtest/gtest.h>

#include "tokenizer/bpe_trainer.h"

namespace shrike::server {
namespace {

const tokenizer::Tokenizer& tok() {
  static const tokenizer::Tokenizer t(
      tokenizer::train_bpe({"hello world", "hello there", "System: User: Assistant:"}));
  return t;
}

RequestContext context() {
  return RequestContext{tok(),
                        ChatFormat::Plain,
                        /*add_bos=*/true,
                        /*context_length=*/64,
                        /*model_name=*/"shrike",
                        /*default_timeout_s=*/0,
                        /*fresh_seed=*/1234,
                        std::chrono::steady_clock::time_point(std::chrono::seconds(100))};
}

ParsedRequest parsed(const std::string& body, Endpoint ep = Endpoint::Completions) {
  auto r = parse_request(body, ep);
  EXPECT_TRUE(std::holds_alternative<ParsedRequest>(r)) << body;
  return std::get<ParsedRequest>(r);
}

engine::GenerationRequest ok(ParsedRequest p, const RequestContext& c = context()) {
  auto r = to_generation_request(p, c);
  if (const auto* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << e->message;
    return {};
  }
  return std::get<engine::GenerationRequest>(r);
}

ApiError err(ParsedRequest p, const RequestContext& c = context()) {
  auto r = to_generation_request(p, c);
  EXPECT_TRUE(std::holds_alternative<ApiError>(r));
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

TEST(SubmitRefusal, ADrainingEngineIs404UnlessTheServerDrains) {
  engine::SubmitResult sub;
  sub.status = engine::SubmitStatus::Draining;
  const ApiError removed = submit_refusal(sub, false, "racer");
  EXPECT_EQ(removed.status, 404);
  EXPECT_NE(removed.message.find("racer"), std::string::npos) << removed.message;
  EXPECT_EQ(submit_refusal(sub, true, "racer").status, 503);
  sub.status = engine::SubmitStatus::QueueFull;
  EXPECT_EQ(submit_refusal(sub, false, "racer").status, 429);
  sub.status = engine::SubmitStatus::Invalid;
  sub.message = "max_tokens must be at least 1";
  EXPECT_EQ(submit_refusal(sub, false, "racer").status, 400);
}

TEST(GenerationRequest, TextPromptIsEncodedWithTheModelsBos) {
  const auto g = ok(parsed(R"({"prompt": "hello world", "max_tokens": 5, "stop": ["x"]})"));
  EXPECT_EQ(g.prompt, tok().encode("hello world", true, true));
  EXPECT_EQ(g.max_tokens, 5);
  EXPECT_EQ(g.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(g.sampling.seed, 1234u);  // none given: the fresh one
  EXPECT_FALSE(g.deadline);
  RequestContext no_bos = context();
  no_bos.add_bos = false;
  EXPECT_EQ(ok(parsed(R"({"prompt": "hello"})"), no_bos).prompt, tok().encode("hello", false));
}

TEST(GenerationRequest, TokenPromptIsCheckedAgainstTheVocabulary) {
  EXPECT_EQ(ok(parsed(R"({"prompt": [3, 4]})")).prompt, (std::vector<int32_t>{3, 4}));
  const int32_t n = tok().n_vocab();
  const ApiError e = err(parsed(R"({"prompt": [3, )" + std::to_string(n) + "]}"));
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "prompt");
  EXPECT_EQ(e.code, "invalid_value");
  EXPECT_NE(e.message.find("'prompt[1]'"), std::string::npos) << e.message;
}

TEST(GenerationRequest, ChatIsRenderedInTheServersFormat) {
  const auto p =
      parsed(R"({"messages": [{"role": "user", "content": "hello"}]})", Endpoint::ChatCompletions);
  EXPECT_EQ(ok(p).prompt, tok().encode(render_chat(ChatFormat::Plain, p.messages), true, true));
}

TEST(GenerationRequest, OtherModelEmptyPromptAndFullContextAreRefused) {
  EXPECT_EQ(err(parsed(R"({"model": "gpt-4", "prompt": "hello"})")).status, 404);
  RequestContext no_bos = context();
  no_bos.add_bos = false;
  EXPECT_EQ(err(parsed(R"({"prompt": ""})"), no_bos).code, "empty_prompt");
  EXPECT_EQ(err(parsed(R"({"prompt": "hello", "max_tokens": 64})")).code,
            "context_length_exceeded");
  EXPECT_EQ(ok(parsed(R"({"model": "shrike", "prompt": "hello"})")).max_tokens,
            64 - int64_t(tok().encode("hello", true, true).size()));
}

TEST(GenerationRequest, SeedAndDeadlineComeFromTheRequestOrTheServer) {
  const auto g = ok(parsed(R"({"prompt": "hello", "seed": 7, "timeout": 2.5})"));
  EXPECT_EQ(g.sampling.seed, 7u);
  ASSERT_TRUE(g.deadline);
  EXPECT_EQ(*g.deadline - context().now, std::chrono::milliseconds(2500));
  RequestContext server_timeout = context();
  server_timeout.default_timeout_s = 1;
  const auto d = ok(parsed(R"({"prompt": "hello"})"), server_timeout);
  ASSERT_TRUE(d.deadline);
  EXPECT_EQ(*d.deadline - context().now, std::chrono::seconds(1));
}

}  // namespace
}  // namespace shrike::server
