#include "task/task_format.h"

#include <gtest/gtest.h>

namespace shrike::task {
namespace {

using data::Example;

Example make(std::string text, std::string intent, std::map<std::string, std::string> slots) {
  return Example{std::move(text), std::move(intent), std::move(slots), "en"};
}

TEST(TaskFormat, PromptIsTheInstructionTheTextAndOneNewline) {
  EXPECT_EQ(task_prompt("where is my order"), "intent+slots: where is my order\n");
  // Line breaks inside the text become spaces: the final newline stays the only separator.
  EXPECT_EQ(task_prompt("a\nb\r\nc\rd"), "intent+slots: a b c d\n");
  EXPECT_EQ(task_prompt("我的订单"), "intent+slots: 我的订单\n");
}

TEST(TaskFormat, AnswerIsCompactJsonWithRawUtf8) {
  const Example ex =
      make("3月5日的订单SO123在哪", "order_status", {{"order_id", "SO123"}, {"date", "3月5日"}});
  EXPECT_EQ(task_answer(ex),
            R"({"intent":"order_status","slots":{"date":"3月5日","order_id":"SO123"}})");
  EXPECT_EQ(task_answer(make("hi", "greet", {})), R"({"intent":"greet","slots":{}})");
  // Only what JSON requires is escaped.
  EXPECT_EQ(task_answer(make("x", "a\"b", {{"k", "c\\d\ne\x01"}})),
            R"({"intent":"a\"b","slots":{"k":"c\\d\ne\u0001"}})");
}

TEST(TaskFormat, SlotsFollowTheirValuesThroughTheUtterance) {
  // Utterance order, not name order: playlist_owner before playlist, artist first.
  EXPECT_EQ(task_answer(make("add Eef Barzelay to my Country Coffeehouse", "AddToPlaylist",
                             {{"artist", "Eef Barzelay"},
                              {"playlist", "Country Coffeehouse"},
                              {"playlist_owner", "my"}})),
            R"({"intent":"AddToPlaylist","slots":{"artist":"Eef Barzelay","playlist_owner":"my",)"
            R"("playlist":"Country Coffeehouse"}})");
  // A value found only ignoring case takes its place; a value not in the text, or two values at
  // one place, follow by name.
  EXPECT_EQ(task_answer(make("Book a table in PARIS for two", "book",
                             {{"z_missing", "x y"},
                              {"party", "two"},
                              {"city", "paris"},
                              {"b_same", "two"},
                              {"a_gone", "nowhere"}})),
            R"({"intent":"book","slots":{"city":"paris","b_same":"two","party":"two",)"
            R"("a_gone":"nowhere","z_missing":"x y"}})");
}

TEST(TaskFormat, AnswerRoundTripsThroughTheParser) {
  const std::vector<Example> cases = {
      make("", "order_status", {{"date", "3月5日"}, {"order_id", "SO123"}}),
      make("", "say \"hi\"", {{"path", "C:\\dir\\file"}, {"quote", "\"q\""}}),
      make("", "multi+label", {}),
      make("", "取消订单", {{"城市", "北京"}, {"emoji", "😀"}, {"tab", "a\tb"}}),
  };
  for (const Example& ex : cases) {
    const TaskPrediction p = parse_task_answer(task_answer(ex));
    EXPECT_TRUE(p.parsed) << task_answer(ex);
    EXPECT_EQ(p.intent, ex.intent);
    EXPECT_EQ(p.slots, ex.slots);
  }
}

TEST(TaskFormat, ParserIgnoresTextAroundTheFirstObject) {
  const TaskPrediction p =
      parse_task_answer(R"( {"intent":"a","slots":{"x":"}{"}} trailing {"intent":"b"} junk)");
  EXPECT_TRUE(p.parsed);
  EXPECT_EQ(p.intent, "a");
  EXPECT_EQ(p.slots, (std::map<std::string, std::string>{{"x", "}{"}}));
}

TEST(TaskFormat, ParserAcceptsMissingOrNullSlotsAndConvertsScalars) {
  TaskPrediction p = parse_task_answer(R"({"intent":"a"})");
  EXPECT_TRUE(p.parsed);
  EXPECT_TRUE(p.slots.empty());
  p = parse_task_answer(R"({"slots":null,"intent":"a"})");
  EXPECT_TRUE(p.parsed);
  EXPECT_EQ(p.intent, "a");
  p = parse_task_answer(
      R"({"intent":"a","slots":{"n":5,"b":true,"z":null,"l":[1],"o":{},"s":"v"}})");
  EXPECT_TRUE(p.parsed);
  EXPECT_EQ(p.slots, (std::map<std::string, std::string>{{"b", "true"}, {"n", "5"}, {"s", "v"}}));
}

TEST(TaskFormat, TruncatedOrMalformedAnswersAreNotParsed) {
  // Cut at the token limit, after the intent: the intent is recovered.
  TaskPrediction p = parse_task_answer(R"({"intent":"order_status","slots":{"date":"3月)");
  EXPECT_FALSE(p.parsed);
  EXPECT_EQ(p.intent, "order_status");
  EXPECT_TRUE(p.slots.empty());
  // Cut inside the intent: nothing to recover.
  p = parse_task_answer(R"({"intent":"order_st)");
  EXPECT_FALSE(p.parsed);
  EXPECT_EQ(p.intent, "");
  // Balanced but invalid JSON (missing comma).
  p = parse_task_answer(R"({"intent":"a" "slots":{}})");
  EXPECT_FALSE(p.parsed);
  EXPECT_EQ(p.intent, "a");
  // Wrong types.
  p = parse_task_answer(R"({"intent":3,"slots":{}})");
  EXPECT_FALSE(p.parsed);
  EXPECT_EQ(p.intent, "");
  p = parse_task_answer(R"({"intent":"a","slots":["x"]})");
  EXPECT_FALSE(p.parsed);
  EXPECT_EQ(p.intent, "a");
  // No object at all.
  for (const char* text : {"", "order_status", "}{", "[\"intent\"]"}) {
    p = parse_task_answer(text);
    EXPECT_FALSE(p.parsed) << text;
    EXPECT_EQ(p.intent, "") << text;
  }
  // Invalid UTF-8 inside a string.
  p = parse_task_answer("{\"intent\":\"a\xff\"}");
  EXPECT_FALSE(p.parsed);
}

TEST(TaskFormat, EveryPrefixOfAnAnswerIsHandled) {
  const std::string answer = task_answer(make(
      "", "order_status", {{"date", "3月5日"}, {"note", "say \"}{\" \\"}, {"order_id", "SO123"}}));
  const std::string intent_end = R"({"intent":"order_status")";
  for (size_t n = 0; n < answer.size(); ++n) {
    const TaskPrediction p = parse_task_answer(answer.substr(0, n));
    EXPECT_FALSE(p.parsed) << n;
    EXPECT_EQ(p.intent, n >= intent_end.size() ? "order_status" : "") << n;
  }
  EXPECT_TRUE(parse_task_answer(answer).parsed);
}

TEST(TaskFormat, DeeplyNestedGarbageDoesNotCrash) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const TaskPrediction p = parse_task_answer("{\"intent\":\"a\",\"slots\":" + deep + "}");
  EXPECT_FALSE(p.parsed);
  EXPECT_EQ(p.intent, "a");
}

}  // namespace
}  // namespace shrike::task
