// What a request's tokens become: streamed text of whole characters, stop strings cut with the
// text that may begin one held back, EOS, max_tokens and a full context, logprobs, usage.
#include "engine/output_processor.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/vocab.h"

namespace shrike::engine {
namespace {

using tokenizer::TokenType;

enum : int32_t { kEos = 2, kHello = 3, kWor, kLd, kBang, kE2, k82, kAc, kSt, kOp };

tokenizer::Tokenizer tiny_tokenizer() {
  tokenizer::Vocab v;
  v.pieces = {"<unk>", "<s>",    "</s>",   "\u2581Hello", "\u2581wor", "ld",
              "!",     "<0xE2>", "<0x82>", "<0xAC>",      "ST",        "OP"};
  v.scores.assign(v.pieces.size(), 0.0f);
  v.types.assign(v.pieces.size(), TokenType::Normal);
  v.types[0] = TokenType::Unknown;
  v.types[1] = v.types[2] = TokenType::Control;
  v.types[kE2] = v.types[k82] = v.types[kAc] = TokenType::Byte;
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = kEos;
  return tokenizer::Tokenizer(std::move(v));
}

GenerationRequest request(std::vector<std::string> stop = {}, int64_t max_tokens = 16) {
  GenerationRequest r;
  r.prompt = {1, kHello};
  r.max_tokens = max_tokens;
  r.stop = std::move(stop);
  return r;
}

decode::SampleResult token(int32_t t) {
  decode::SampleResult r;
  r.token = t;
  r.logprob = -0.5f;
  return r;
}

class OutputProcessorTest : public ::testing::Test {
 protected:
  tokenizer::Tokenizer tok = tiny_tokenizer();
};

TEST_F(OutputProcessorTest, StreamsTextAndEndsAtMaxTokensWithUsage) {
  OutputProcessor out(request({}, 3), tok, kEos);
  out.set_cached_prompt(1);
  auto u = out.add(token(kHello), false);
  EXPECT_FALSE(u.finish);
  EXPECT_EQ(u.event.text, "Hello");  // the leading space of the first piece is dropped
  EXPECT_EQ(u.event.tokens, std::vector<int32_t>{kHello});
  EXPECT_TRUE(u.event.logprobs.empty());  // not requested
  EXPECT_EQ(out.add(token(kWor), false).event.text, " wor");
  u = out.add(token(kLd), false);
  ASSERT_EQ(u.finish, FinishReason::Length);
  EXPECT_TRUE(u.event.finished);
  EXPECT_EQ(u.event.text, "ld");
  EXPECT_EQ(u.event.prompt_tokens, 2);
  EXPECT_EQ(u.event.completion_tokens, 3);
  EXPECT_EQ(u.event.cached_prompt_tokens, 1);
}

TEST_F(OutputProcessorTest, AFullContextEndsWithLength) {
  OutputProcessor out(request(), tok, kEos);
  const auto u = out.add(token(kHello), true);
  EXPECT_EQ(u.finish, FinishReason::Length);
  EXPECT_EQ(u.event.text, "Hello");
}

TEST_F(OutputProcessorTest, EosEndsWithStopAndIsNotOutputUnlessIgnored) {
  OutputProcessor out(request(), tok, kEos);
  out.add(token(kHello), false);
  const auto u = out.add(token(kEos), false);
  EXPECT_EQ(u.finish, FinishReason::Stop);
  EXPECT_TRUE(u.event.tokens.empty());
  EXPECT_EQ(u.event.completion_tokens, 1);
  EXPECT_EQ(out.output(), std::vector<int32_t>{kHello});
  // The model's own EOS id counts as well as the tokenizer's.
  OutputProcessor model_eos(request(), tok, kBang);
  EXPECT_EQ(model_eos.add(token(kBang), false).finish, FinishReason::Stop);
  GenerationRequest r = request();
  r.ignore_eos = true;
  OutputProcessor ignoring(r, tok, kEos);
  EXPECT_FALSE(ignoring.add(token(kEos), false).finish);
  EXPECT_EQ(ignoring.output(), std::vector<int32_t>{kEos});
}

TEST_F(OutputProcessorTest, AStopStringIsHeldBackThenCut) {
  OutputProcessor out(request({"STOP"}), tok, kEos);
  EXPECT_EQ(out.add(token(kHello), false).event.text, "Hello");
  auto u = out.add(token(kSt), false);  // "ST" may begin "STOP": held back
  EXPECT_FALSE(u.finish);
  EXPECT_EQ(u.event.text, "");
  EXPECT_EQ(u.event.tokens, std::vector<int32_t>{kSt});  // the token is still reported
  u = out.add(token(kOp), false);
  ASSERT_EQ(u.finish, FinishReason::Stop);
  EXPECT_EQ(u.event.text, "");  // nothing of the stop string, nothing after it
  EXPECT_EQ(u.event.completion_tokens, 3);
}

TEST_F(OutputProcessorTest, HeldBackTextIsSentWhenNoStopStringFollows) {
  OutputProcessor out(request({"STOP", "ld!"}), tok, kEos);
  out.add(token(kHello), false);
  EXPECT_EQ(out.add(token(kSt), false).event.text, "");
  EXPECT_EQ(out.add(token(kWor), false).event.text, "ST wor");
  EXPECT_EQ(out.add(token(kLd), false).event.text, "");  // "ld" may begin "ld!"
  const auto u = out.add(token(kBang), false);
  EXPECT_EQ(u.finish, FinishReason::Stop);
  EXPECT_EQ(u.event.text, "");
}

TEST_F(OutputProcessorTest, FinishSendsWhatWasHeldBack) {
  OutputProcessor out(request({"STOP"}), tok, kEos);
  out.add(token(kHello), false);
  out.add(token(kSt), false);
  const StreamEvent ev = out.finish(FinishReason::Cancelled);
  EXPECT_TRUE(ev.finished);
  EXPECT_EQ(ev.finish_reason, FinishReason::Cancelled);
  EXPECT_EQ(ev.text, "ST");
  EXPECT_EQ(out.finish(FinishReason::Error, "boom").error, "boom");
}

TEST_F(OutputProcessorTest, OnlyWholeCharactersAreSent) {
  OutputProcessor out(request(), tok, kEos);
  EXPECT_EQ(out.add(token(kE2), false).event.text, "");
  EXPECT_EQ(out.add(token(k82), false).event.text, "");
  EXPECT_EQ(out.add(token(kAc), false).event.text, "\u20ac");
}

TEST_F(OutputProcessorTest, LogprobsAreCarriedWhenRequested) {
  GenerationRequest r = request();
  r.sampling.top_logprobs = 1;
  OutputProcessor out(r, tok, kEos);
  decode::SampleResult s = token(kHello);
  s.top = {{kHello, -0.5f}};
  const auto u = out.add(s, false);
  ASSERT_EQ(u.event.logprobs.size(), 1u);
  EXPECT_EQ(u.event.logprobs[0].token, kHello);
  EXPECT_EQ(u.event.logprobs[0].logprob, -0.5f);
  EXPECT_EQ(u.event.logprobs[0].top.size(), 1u);
}

}  // namespace
}  // namespace shrike::engine
