// The OpenAI request grammar and response shapes, without a server.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "server/openai_protocol.h"

namespace shrike::server {
namespace {

using nlohmann::json;

ParsedRequest ok(const std::string& body, Endpoint ep = Endpoint::Completions) {
  auto r = parse_request(body, ep);
  if (const auto* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << "unexpected error for " << body << ": " << e->message;
    return {};
  }
  return std::get<ParsedRequest>(r);
}

ApiError err(const std::string& body, Endpoint ep = Endpoint::Completions) {
  auto r = parse_request(body, ep);
  if (!std::holds_alternative<ApiError>(r)) {
    ADD_FAILURE() << "expected an error for " << body;
    return {};
  }
  return std::get<ApiError>(r);
}

// Checks a 400 naming `param` with a non-empty message.
void expect_400(const std::string& body, const std::string& param,
                Endpoint ep = Endpoint::Completions) {
  SCOPED_TRACE(body);
  const ApiError e = err(body, ep);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_FALSE(e.message.empty());
  EXPECT_EQ(e.param, param);
}

std::string completion(const std::string& extra) {
  return R"({"prompt": "hi")" + (extra.empty() ? "" : ", " + extra) + "}";
}
std::string chat(const std::string& extra) {
  return R"({"messages": [{"role": "user", "content": "hi"}])" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

TEST(ParseRequest, MinimalCompletionHasDefaults) {
  const ParsedRequest p = ok(completion(""));
  EXPECT_EQ(p.prompt_text, "hi");
  EXPECT_FALSE(p.prompt_is_tokens);
  EXPECT_FALSE(p.max_tokens.has_value());
  EXPECT_EQ(p.sampling.temperature, 0.0f);  // greedy unless asked
  EXPECT_EQ(p.sampling.top_k, 0);
  EXPECT_EQ(p.sampling.top_p, 1.0f);
  EXPECT_FALSE(p.seed_given);
  EXPECT_FALSE(p.stream);
  EXPECT_TRUE(p.stop.empty());
  EXPECT_FALSE(p.timeout_s.has_value());
}

TEST(ParseRequest, EveryParameterIsRead) {
  const ParsedRequest p = ok(completion(
      R"("model": "m", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 40,
         "min_p": 0.05, "seed": 42, "stop": ["a", "b"], "stream": true,
         "stream_options": {"include_usage": true}, "presence_penalty": 1.5,
         "frequency_penalty": -1, "repetition_penalty": 1.1, "ignore_eos": true, "n": 1,
         "logprobs": 3, "user": "u", "timeout": 2.5)"));
  EXPECT_EQ(p.model, "m");
  EXPECT_EQ(p.max_tokens, 7);
  EXPECT_FLOAT_EQ(p.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(p.sampling.top_p, 0.9f);
  EXPECT_EQ(p.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(p.sampling.min_p, 0.05f);
  EXPECT_TRUE(p.seed_given);
  EXPECT_EQ(p.sampling.seed, 42u);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(p.stream);
  EXPECT_TRUE(p.include_usage);
  EXPECT_FLOAT_EQ(p.sampling.presence_penalty, 1.5f);
  EXPECT_FLOAT_EQ(p.sampling.frequency_penalty, -1.0f);
  EXPECT_FLOAT_EQ(p.sampling.repetition_penalty, 1.1f);
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_TRUE(p.sampling.logprobs);
  EXPECT_EQ(p.sampling.top_logprobs, 3);
  EXPECT_DOUBLE_EQ(*p.timeout_s, 2.5);
}

TEST(ParseRequest, NullMeansAbsent) {
  const ParsedRequest p = ok(completion(
      R"("max_tokens": null, "temperature": null, "stop": null, "seed": null, "logprobs": null,
         "stream_options": null, "model": null)"));
  EXPECT_FALSE(p.max_tokens.has_value());
  EXPECT_FALSE(p.seed_given);
  EXPECT_FALSE(p.sampling.logprobs);
  EXPECT_TRUE(p.model.empty());
}

TEST(ParseRequest, IntegersMayBeWrittenAsWholeFloats) {
  EXPECT_EQ(ok(completion(R"("max_tokens": 16.0)")).max_tokens, 16);
  expect_400(completion(R"("max_tokens": 1.5)"), "max_tokens");
}

TEST(ParseRequest, TopKMinusOneAndZeroMeanNoLimit) {
  EXPECT_EQ(ok(completion(R"("top_k": -1)")).sampling.top_k, 0);
  EXPECT_EQ(ok(completion(R"("top_k": 0)")).sampling.top_k, 0);
  expect_400(completion(R"("top_k": -5)"), "top_k");
}

TEST(ParseRequest, SeedTakesTheWholeUnsignedRange) {
  EXPECT_EQ(ok(completion(R"("seed": 18446744073709551615)")).sampling.seed, UINT64_MAX);
  EXPECT_EQ(ok(completion(R"("seed": -1)")).sampling.seed, UINT64_MAX);
  expect_400(completion(R"("seed": "7")"), "seed");
}

TEST(ParseRequest, PromptForms) {
  const ParsedRequest ids = ok(R"({"prompt": [1, 2, 3]})");
  EXPECT_TRUE(ids.prompt_is_tokens);
  EXPECT_EQ(ids.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(ok(R"({"prompt": ["one prompt"]})").prompt_text, "one prompt");
  const ParsedRequest nested = ok(R"({"prompt": [[5, 6]]})");
  EXPECT_TRUE(nested.prompt_is_tokens);
  EXPECT_EQ(nested.prompt_tokens, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(ok(R"({"prompt": ""})").prompt_text, "");  // the server decides (BOS or 400)
  expect_400(R"({"prompt": []})", "prompt");
  expect_400(R"({"prompt": ["a", "b"]})", "prompt");
  expect_400(R"({"prompt": [1, -2]})", "prompt");
  expect_400(R"({"prompt": [1, 2.5]})", "prompt");
  expect_400(R"({"prompt": [1, "x"]})", "prompt");
  expect_400(R"({"prompt": [3000000000]})", "prompt");
  expect_400(R"({"prompt": 5})", "prompt");
  expect_400(R"({"prompt": {"text": "x"}})", "prompt");
  expect_400(R"({"max_tokens": 5})", "prompt");
  expect_400(R"({"prompt": null})", "prompt");
}

TEST(ParseRequest, PromptKeepsNulBytes) {
  const ParsedRequest p = ok(R"({"prompt": "a\u0000b"})");
  EXPECT_EQ(p.prompt_text, std::string("a\0b", 3));
}

TEST(ParseRequest, OutOfRangeValues) {
  for (const char* v : {"-1", "0", "\"10\"", "1.5", "true", "[]", "1e300"})
    expect_400(completion(std::string(R"("max_tokens": )") + v), "max_tokens");
  expect_400(completion(R"("temperature": -1)"), "temperature");
  expect_400(completion(R"("temperature": 3)"), "temperature");
  expect_400(completion(R"("temperature": "hot")"), "temperature");
  EXPECT_FLOAT_EQ(ok(completion(R"("temperature": 2)")).sampling.temperature, 2.0f);
  expect_400(completion(R"("top_p": 0)"), "top_p");
  expect_400(completion(R"("top_p": 2)"), "top_p");
  EXPECT_FLOAT_EQ(ok(completion(R"("top_p": 1)")).sampling.top_p, 1.0f);
  expect_400(completion(R"("min_p": 2)"), "min_p");
  expect_400(completion(R"("min_p": -0.1)"), "min_p");
  expect_400(completion(R"("presence_penalty": 5)"), "presence_penalty");
  expect_400(completion(R"("frequency_penalty": -2.5)"), "frequency_penalty");
  expect_400(completion(R"("repetition_penalty": 0)"), "repetition_penalty");
  expect_400(completion(R"("repetition_penalty": 2.5)"), "repetition_penalty");
  expect_400(completion(R"("timeout": 0)"), "timeout");
  expect_400(completion(R"("timeout": -3)"), "timeout");
}

TEST(ParseRequest, WrongTypes) {
  expect_400(completion(R"("stream": "yes")"), "stream");
  expect_400(completion(R"("stream": 1)"), "stream");
  expect_400(completion(R"("ignore_eos": "true")"), "ignore_eos");
  expect_400(completion(R"("model": 7)"), "model");
  expect_400(completion(R"("user": 7)"), "user");
  expect_400(completion(R"("top_k": 1.5)"), "top_k");
  expect_400(completion(R"("n": "1")"), "n");
  expect_400(completion(R"("logprobs": true)"), "logprobs");
  expect_400(completion(R"("stream": true, "stream_options": 1)"), "stream_options");
  expect_400(completion(R"("stream": true, "stream_options": {"include_usage": "y"})"),
             "stream_options.include_usage");
}

TEST(ParseRequest, NMustBeOne) {
  EXPECT_EQ(ok(completion(R"("n": 1)")).prompt_text, "hi");
  expect_400(completion(R"("n": 2)"), "n");
  expect_400(completion(R"("n": 0)"), "n");
}

TEST(ParseRequest, StopRules) {
  EXPECT_EQ(ok(completion(R"("stop": "x")")).stop, (std::vector<std::string>{"x"}));
  EXPECT_TRUE(ok(completion(R"("stop": [])")).stop.empty());
  EXPECT_EQ(ok(completion(R"("stop": ["a", "b", "c", "d"])")).stop.size(), 4u);
  expect_400(completion(R"("stop": ["a", "b", "c", "d", "e"])"), "stop");
  expect_400(completion(R"("stop": [1])"), "stop");
  expect_400(completion(R"("stop": 1)"), "stop");
  expect_400(completion(R"("stop": "")"), "stop");
  expect_400(completion(R"("stop": ["a", ""])"), "stop");
}

TEST(ParseRequest, LogprobsPerEndpoint) {
  expect_400(completion(R"("logprobs": 9)"), "logprobs");
  expect_400(completion(R"("logprobs": -1)"), "logprobs");
  const ParsedRequest zero = ok(completion(R"("logprobs": 0)"));
  EXPECT_TRUE(zero.sampling.logprobs);
  EXPECT_EQ(zero.sampling.top_logprobs, 0);

  const ParsedRequest c =
      ok(chat(R"("logprobs": true, "top_logprobs": 20)"), Endpoint::ChatCompletions);
  EXPECT_TRUE(c.sampling.logprobs);
  EXPECT_EQ(c.sampling.top_logprobs, 20);
  expect_400(chat(R"("logprobs": true, "top_logprobs": 21)"), "top_logprobs",
             Endpoint::ChatCompletions);
  expect_400(chat(R"("top_logprobs": 2)"), "top_logprobs", Endpoint::ChatCompletions);
  expect_400(chat(R"("logprobs": 3)"), "logprobs", Endpoint::ChatCompletions);
}

TEST(ParseRequest, StreamOptionsNeedStream) {
  expect_400(completion(R"("stream_options": {"include_usage": true})"), "stream_options");
  EXPECT_FALSE(ok(completion(R"("stream": true, "stream_options": {})")).include_usage);
}

TEST(ParseRequest, UnsupportedOptionsAreRefusedNotIgnored) {
  expect_400(completion(R"("echo": true)"), "echo");
  expect_400(completion(R"("best_of": 3)"), "best_of");
  expect_400(completion(R"("suffix": "x")"), "suffix");
  // json_object / json_schema are constraints now (constraint_request_test.cc); other types not.
  expect_400(chat(R"("response_format": {"type": "yaml"})"), "response_format",
             Endpoint::ChatCompletions);
  expect_400(chat(R"("tools": [{"type": "function"}])"), "tools", Endpoint::ChatCompletions);
  expect_400(completion(R"("logit_bias": {"5": 10})"), "logit_bias");
  // Their neutral values are fine.
  ok(completion(R"("echo": false, "best_of": 1, "suffix": "", "logit_bias": {})"));
  ok(chat(R"("response_format": {"type": "text"}, "tools": [])"), Endpoint::ChatCompletions);
}

TEST(ParseRequest, UnknownFieldsAreIgnored) {
  EXPECT_EQ(ok(completion(R"("something_new": [1, {"x": 2}])")).prompt_text, "hi");
}

TEST(ParseRequest, ChatMessages) {
  const ParsedRequest p = ok(
      R"({"messages": [{"role": "system", "content": "be brief"},
                       {"role": "developer", "content": "really"},
                       {"role": "user", "content": [{"type": "text", "text": "a"},
                                                    {"type": "text", "text": "b"}]},
                       {"role": "assistant", "content": null},
                       {"role": "user", "content": "c", "name": "bob"}],
          "max_completion_tokens": 9})",
      Endpoint::ChatCompletions);
  ASSERT_EQ(p.messages.size(), 5u);
  EXPECT_EQ(p.messages[0].role, "system");
  EXPECT_EQ(p.messages[1].role, "system");  // developer is the newer name for system
  EXPECT_EQ(p.messages[2].content, "ab");
  EXPECT_EQ(p.messages[3].content, "");
  EXPECT_EQ(p.messages[4].content, "c");
  EXPECT_EQ(p.max_tokens, 9);
  EXPECT_EQ(ok(chat(R"("max_tokens": 4)"), Endpoint::ChatCompletions).max_tokens, 4);
  expect_400(chat(R"("max_completion_tokens": 0)"), "max_completion_tokens",
             Endpoint::ChatCompletions);
}

TEST(ParseRequest, ChatMessageErrors) {
  const auto ep = Endpoint::ChatCompletions;
  expect_400(R"({"messages": []})", "messages", ep);
  expect_400(R"({"messages": "hi"})", "messages", ep);
  expect_400(R"({"prompt": "hi"})", "messages", ep);
  expect_400(R"({"messages": ["hi"]})", "messages[0]", ep);
  expect_400(R"({"messages": [{"content": "hi"}]})", "messages[0].role", ep);
  expect_400(R"({"messages": [{"role": "user"}]})", "messages[0].content", ep);
  expect_400(R"({"messages": [{"role": "wizard", "content": "hi"}]})", "messages[0].role", ep);
  expect_400(R"({"messages": [{"role": "tool", "content": "hi"}]})", "messages[0].role", ep);
  expect_400(R"({"messages": [{"role": 5, "content": "hi"}]})", "messages[0].role", ep);
  expect_400(R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content", ep);
  expect_400(R"({"messages": [{"role": "user", "content": {"text": "x"}}]})", "messages[0].content",
             ep);
  expect_400(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
             "messages[0].content[0].type", ep);
  expect_400(R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})",
             "messages[0].content[0].text", ep);
  expect_400(R"({"messages": [{"role": "user", "content": ["x"]}]})", "messages[0].content[0]", ep);
  expect_400(R"({"messages": [{"role": "user", "content": "a"}, {"role": "x", "content": "b"}]})",
             "messages[1].role", ep);
}

TEST(ParseRequest, MalformedBodies) {
  for (const char* body : {"", "{", "{\"prompt\": \"hi\"", "{\"prompt\": hi}", "nul", "{} x",
                           "{\"prompt\": \"a\" \"b\"}", "{'prompt': 'x'}"}) {
    SCOPED_TRACE(body);
    const ApiError e = err(body);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.code, "invalid_json");
    EXPECT_NE(e.message.find("Invalid JSON"), std::string::npos) << e.message;
  }
  for (const char* body : {"[]", "\"prompt\"", "42", "null", "true"}) {
    SCOPED_TRACE(body);
    const ApiError e = err(body);
    EXPECT_EQ(e.status, 400);
    EXPECT_NE(e.message.find("must be a JSON object"), std::string::npos) << e.message;
  }
}

TEST(ParseRequest, InvalidUtf8IsRefused) {
  const ApiError e = err(std::string("{\"prompt\": \"a\xff\xfe b\"}"));
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "invalid_json");
  // The error body itself stays valid JSON (the bad bytes are replaced).
  EXPECT_FALSE(json::parse(error_body(e))["error"]["message"].get<std::string>().empty());
  // A lone surrogate escape is not a character either.
  EXPECT_EQ(err(R"({"prompt": "\ud800"})").status, 400);
}

TEST(ParseRequest, DeepNestingIsRefusedWithoutRecursion) {
  const std::string deep(100000, '[');
  const ApiError e = err(deep);
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.message.find("deeper than"), std::string::npos);
  // 64 levels are fine, 65 are not.
  auto nested = [](int depth) {
    std::string s = R"({"prompt": "x", "extra": )";
    for (int i = 1; i < depth; ++i) s += "[";
    for (int i = 1; i < depth; ++i) s += "]";
    return s + "}";
  };
  ok(nested(kMaxJsonDepth));
  EXPECT_EQ(err(nested(kMaxJsonDepth + 1)).status, 400);
}

TEST(JsonTooDeep, IgnoresBracketsInsideStrings) {
  const std::string in_string = "{\"prompt\": \"" + std::string(200, '[') + "\"}";
  EXPECT_FALSE(json_too_deep(in_string, 4));
  EXPECT_TRUE(json_too_deep("[[[[[", 4));
  EXPECT_FALSE(json_too_deep("[[[[]]]]", 4));
  // An escaped quote does not end the string.
  EXPECT_FALSE(json_too_deep(R"({"a": "\"[[[[[[["})", 2));
}

TEST(ResolveMaxTokens, ContextRules) {
  EXPECT_EQ(std::get<int64_t>(resolve_max_tokens(10, std::nullopt, 100)), 90);
  EXPECT_EQ(std::get<int64_t>(resolve_max_tokens(10, 90, 100)), 90);
  const ApiError over = std::get<ApiError>(resolve_max_tokens(10, 91, 100));
  EXPECT_EQ(over.status, 400);
  EXPECT_EQ(over.code, "context_length_exceeded");
  EXPECT_NE(over.message.find("100"), std::string::npos);
  EXPECT_NE(over.message.find("91"), std::string::npos);
  EXPECT_NE(over.message.find("10 prompt"), std::string::npos);
  const ApiError huge = std::get<ApiError>(resolve_max_tokens(10, INT64_MAX, 100));
  EXPECT_EQ(huge.status, 400);
  const ApiError full = std::get<ApiError>(resolve_max_tokens(100, std::nullopt, 100));
  EXPECT_EQ(full.code, "context_length_exceeded");
  EXPECT_EQ(std::get<ApiError>(resolve_max_tokens(150, 1, 100)).status, 400);
}

TEST(ErrorBody, HasTheOpenAiShape) {
  const json j = json::parse(error_body(bad_request("bad", "top_p", "invalid_value")));
  EXPECT_EQ(j["error"]["message"], "bad");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "top_p");
  EXPECT_EQ(j["error"]["code"], "invalid_value");
  const json n = json::parse(error_body(server_error("x")));
  EXPECT_TRUE(n["error"]["param"].is_null());
  EXPECT_EQ(unauthorized("k").status, 401);
  EXPECT_EQ(model_not_found("m").status, 404);
  EXPECT_EQ(model_not_found("m").code, "model_not_found");
  EXPECT_EQ(payload_too_large(10).status, 413);
  EXPECT_EQ(queue_full("q").status, 429);
  EXPECT_EQ(unavailable("d").status, 503);
}

TEST(Responses, CompletionShape) {
  ResponseMeta meta{Endpoint::Completions, "cmpl-1", 1700000000, "tiny", false};
  const json j = completion_response(meta, "hello", engine::FinishReason::Length, {}, {5, 3, 2});
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"], "cmpl-1");
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["choices"][0]["text"], "hello");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_FALSE(j["choices"][0].contains("finish_detail"));
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  EXPECT_EQ(j["usage"]["total_tokens"], 8);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
  EXPECT_FALSE(j["usage"].contains("speculative"));
  // The speculative-decoding extension, when the server speculates.
  const json s =
      completion_response(meta, "hello", engine::FinishReason::Length, {}, {5, 3, 2, true, 7, 4});
  EXPECT_EQ(s["usage"]["speculative"]["proposed"], 7);
  EXPECT_EQ(s["usage"]["speculative"]["accepted"], 4);
}

TEST(Responses, DeadlineReadsAsLengthWithDetail) {
  ResponseMeta meta{Endpoint::ChatCompletions, "chatcmpl-1", 1, "tiny", false};
  const json j = completion_response(meta, "hi", engine::FinishReason::Deadline, {}, {});
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "hi");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["choices"][0]["finish_detail"], "deadline");
  EXPECT_STREQ(openai_finish_reason(engine::FinishReason::Stop), "stop");
  EXPECT_STREQ(finish_detail(engine::FinishReason::Cancelled), "cancelled");
}

TEST(Responses, ChatChunks) {
  ResponseMeta meta{Endpoint::ChatCompletions, "chatcmpl-1", 1, "tiny", false};
  const json first = stream_chunk(meta, "He", {}, true, std::nullopt);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first["choices"][0]["delta"]["content"], "He");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  const json last = stream_chunk(meta, "", {}, false, engine::FinishReason::Stop);
  EXPECT_TRUE(last["choices"][0]["delta"].is_object());
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  const json usage = usage_chunk(meta, {4, 2, 0});
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 6);
}

TEST(Responses, Logprobs) {
  std::vector<LogprobEntry> lp = {{"He", -0.5f, {{"He", -0.5f}, {"Ha", -1.5f}}, 0},
                                  {"llo", -std::numeric_limits<float>::infinity(), {}, 2}};
  ResponseMeta chat_meta{Endpoint::ChatCompletions, "c", 1, "m", true};
  const json c = completion_response(chat_meta, "Hello", engine::FinishReason::Stop, lp, {});
  const json& content = c["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], "He");
  EXPECT_FLOAT_EQ(content[0]["logprob"].get<float>(), -0.5f);
  EXPECT_EQ(content[0]["bytes"], json({72, 101}));
  EXPECT_EQ(content[0]["top_logprobs"][1]["token"], "Ha");
  EXPECT_FLOAT_EQ(content[1]["logprob"].get<float>(), -9999.0f);  // -inf is not JSON

  ResponseMeta cmpl_meta{Endpoint::Completions, "c", 1, "m", true};
  const json t = completion_response(cmpl_meta, "Hello", engine::FinishReason::Stop, lp, {});
  const json& l = t["choices"][0]["logprobs"];
  EXPECT_EQ(l["tokens"], json({"He", "llo"}));
  EXPECT_EQ(l["text_offset"], json({0, 2}));
  EXPECT_FLOAT_EQ(l["top_logprobs"][0]["Ha"].get<float>(), -1.5f);
}

TEST(Responses, SseEventSurvivesHalfCharacters) {
  ResponseMeta meta{Endpoint::Completions, "c", 1, "m", false};
  // A token may be the first byte of a multi-byte character: the event must still be written.
  const std::string ev = sse_event(stream_chunk(meta, "\xe4", {}, false, std::nullopt));
  EXPECT_EQ(ev.rfind("data: {", 0), 0u);
  EXPECT_EQ(ev.substr(ev.size() - 2), "\n\n");
  EXPECT_EQ(json::parse(ev.substr(6))["object"], "text_completion");
}

}  // namespace
}  // namespace shrike::server
