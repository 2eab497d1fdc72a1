// The task answer automaton (task_answer.h): labels and slot names of the task only, slots in any
// order and repeatable, values bounded JSON strings; and, token by token through a vocabulary
// whose tokens cross the JSON punctuation, a free-form answer with its slots out of sorted order
// and a name repeated is allowed at every step.
#include "task/answer_constraint.h"

#include <gtest/gtest.h>

#include <memory>
#include <string_view>

#include "constrain/constraint.h"
#include "constrain/error.h"

namespace shrike::task {
namespace {

using namespace constrain;

const std::vector<std::string> kIntents{"cancel_order", "order_status"};
const std::vector<std::string> kSlots{"date", "order_id"};

TEST(TaskAnswer, AcceptsTheTasksNamesInAnyOrderWithRepeats) {
  const Automaton a = task_answer_automaton(kIntents, kSlots, 8);
  EXPECT_TRUE(a.matches(R"({"intent":"cancel_order","slots":{}})"));
  EXPECT_TRUE(a.matches(R"({"intent":"order_status","slots":{"date":"x","order_id":"SO1"}})"));
  EXPECT_TRUE(a.matches(R"({"intent":"order_status","slots":{"order_id":"SO1","date":"x"}})"));
  EXPECT_TRUE(a.matches(R"({"intent":"order_status","slots":{"date":"x","date":"y"}})"));
  EXPECT_TRUE(a.matches(R"({"intent":"order_status","slots":{"date":"a\"b\u00e9"}})"));
  EXPECT_TRUE(
      a.matches("{\"intent\":\"order_status\",\"slots\":{\"date\":\"\xe6\x98\x8e\xe5\xa4\xa9\"}}"));
  EXPECT_TRUE(a.matches(R"({"intent":"order_status","slots":{"date":"12345678"}})"));
  EXPECT_FALSE(a.matches(R"({"intent":"order_status","slots":{"date":"123456789"}})"));  // > 8
  EXPECT_FALSE(a.matches(R"({"intent":"refund","slots":{}})"));
  EXPECT_FALSE(a.matches(R"({"intent":"order_status","slots":{"city":"x"}})"));
  EXPECT_FALSE(a.matches(R"({"intent":"order_status","slots":{"date":"x",}})"));
  EXPECT_FALSE(a.matches(R"({"intent":"order_status","slots":{"date":1}})"));
  EXPECT_FALSE(a.matches(R"({"intent":"order_status"})"));
}

TEST(TaskAnswer, BoundsTheNumberOfSlots) {
  const Automaton a = task_answer_automaton(kIntents, kSlots, 8, 3);
  EXPECT_TRUE(a.matches(R"({"intent":"cancel_order","slots":{"date":"1","date":"2","date":"3"}})"));
  EXPECT_FALSE(a.matches(
      R"({"intent":"cancel_order","slots":{"date":"1","date":"2","date":"3","date":"4"}})"));
}

TEST(TaskAnswer, WithoutSlotNamesOnlyAnEmptyObject) {
  const Automaton a = task_answer_automaton(kIntents, {});
  EXPECT_TRUE(a.matches(R"({"intent":"cancel_order","slots":{}})"));
  EXPECT_FALSE(a.matches(R"({"intent":"cancel_order","slots":{"date":"x"}})"));
}

TEST(TaskAnswer, RefusesAnEmptyLabelSetOrName) {
  EXPECT_THROW(task_answer_automaton({}, kSlots), ConstraintError);
  EXPECT_THROW(task_answer_automaton({""}, kSlots), ConstraintError);
  EXPECT_THROW(task_answer_automaton(kIntents, {"date", ""}), ConstraintError);
  EXPECT_THROW(task_answer_automaton({"\xff"}, kSlots), ConstraintError);
  EXPECT_THROW(task_answer_automaton(kIntents, kSlots, 8, 0), ConstraintError);
}

TEST(TaskAnswer, FreeFormTokensOutOfOrderAndRepeatedAreEachAllowed) {
  // Tokens as a task BPE makes them: punctuation fused across keys and values.
  const std::vector<std::string> pieces{"",
                                        "{\"intent\":\"",
                                        "order_status",
                                        "\",\"slots\":{\"",
                                        "order_id",
                                        "\":\"",
                                        "SO",
                                        "1",
                                        "2",
                                        "\",\"",
                                        "date",
                                        "\"}}",
                                        "\"",
                                        "}}",
                                        "city"};
  std::vector<uint8_t> usable(pieces.size(), 1);
  usable[0] = 0;
  auto vocab = std::make_shared<const TokenVocab>(pieces, usable, /*eos=*/0, false);
  auto c = std::make_shared<const Constraint>(task_answer_automaton(kIntents, kSlots), vocab);
  // {"intent":"order_status","slots":{"order_id":"SO1","date":"1","order_id":"SO2"}}
  const std::vector<int32_t> answer{1, 2, 3, 4, 5, 6, 7, 9, 10, 5, 7, 9, 4, 5, 6, 8, 11, 0};
  ConstraintState st(c);
  for (int32_t t : answer) {
    ASSERT_TRUE(st.allowed_mask().test(t)) << "token " << t << " '" << pieces[size_t(t)] << "'";
    ASSERT_TRUE(st.advance(t));
  }
  EXPECT_TRUE(st.is_complete());
  // An unknown name is refused where a name starts.
  ConstraintState other(c);
  for (int32_t t : {1, 2, 3}) ASSERT_TRUE(other.advance(t));
  EXPECT_FALSE(other.allowed_mask().test(14));
  EXPECT_TRUE(other.allowed_mask().test(10));
}

// Walks the bytes through a (possibly filled) constraint's own states.
bool accepts(const Constraint& c, std::string_view text) {
  int32_t s = 0;
  for (char ch : text)
    if ((s = c.step(s, uint8_t(ch))) < 0) return false;
  return c.accepting(s);
}

TEST(TaskValues, NonEmptySubstringsOfWholeCharactersAsJsonContent) {
  const Automaton v =
      task_values_automaton("say \"hi\" \xe6\x98\x8e\xe5\xa4\xa9");  // say "hi" 明天
  EXPECT_TRUE(v.matches("say"));
  EXPECT_TRUE(v.matches("ay \\\"h"));  // the quote as JSON escapes it
  EXPECT_TRUE(v.matches("\xe6\x98\x8e\xe5\xa4\xa9"));
  EXPECT_FALSE(v.matches("\xa4\xa9"));  // half a character
  EXPECT_FALSE(v.matches("\xe6\x98"));
  EXPECT_FALSE(v.matches("\\"));      // half an escape
  EXPECT_FALSE(v.matches("ay \"h"));  // an unescaped quote
  EXPECT_FALSE(v.matches(""));
  EXPECT_FALSE(v.matches("says"));
  EXPECT_THROW(task_values_automaton(""), ConstraintError);
}

TEST(TaskValues, AFilledAnswerTakesValuesFromTheUtteranceOnly) {
  const std::vector<std::string> pieces{"",
                                        "{\"intent\":\"",
                                        "order_status",
                                        "\",\"slots\":{\"",
                                        "order_id",
                                        "\":\"",
                                        "SO",
                                        "1",
                                        "2",
                                        "\"}}",
                                        "\":\"SO",
                                        "\xe6\x98\x8e",
                                        "\",\"",
                                        "date",
                                        "\xe5\xa4\xa9\"}}",
                                        "}}"};
  std::vector<uint8_t> usable(pieces.size(), 1);
  usable[0] = 0;
  auto vocab = std::make_shared<const TokenVocab>(pieces, usable, /*eos=*/0, false);
  auto holes =
      std::make_shared<const Constraint>(task_answer_automaton(kIntents, kSlots, kTaskValueMaxChars,
                                                               kTaskMaxSlotPairs, TaskValues::Hole),
                                         vocab);
  auto c = Constraint::with_holes_filled(
      holes, task_values_automaton("where is SO1 \xe6\x98\x8e\xe5\xa4\xa9"));
  EXPECT_TRUE(accepts(*c, R"({"intent":"order_status","slots":{"order_id":"SO1"}})"));
  EXPECT_TRUE(accepts(*c,
                      "{\"intent\":\"order_status\",\"slots\":{\"date\":"
                      "\"\xe6\x98\x8e\xe5\xa4\xa9\",\"order_id\":\"SO1\"}}"));
  EXPECT_FALSE(accepts(*c, R"({"intent":"order_status","slots":{"order_id":"SO12"}})"));
  EXPECT_FALSE(accepts(*c, R"({"intent":"order_status","slots":{"order_id":""}})"));
  EXPECT_FALSE(accepts(*holes, R"({"intent":"order_status","slots":{"order_id":"SO1"}})"));

  // Token by token, with tokens that cross into and out of a value.
  ConstraintState st(c);
  for (int32_t t : {1, 2, 3, 4}) ASSERT_TRUE(st.advance(t));
  EXPECT_TRUE(st.allowed_mask().test(10));  // ":"SO
  EXPECT_TRUE(st.allowed_mask().test(5));   // ":"
  ASSERT_TRUE(st.advance(10));
  EXPECT_TRUE(st.allowed_mask().test(7));   // 1: SO1 is in the utterance
  EXPECT_FALSE(st.allowed_mask().test(8));  // 2: SO2 is not
  EXPECT_TRUE(st.allowed_mask().test(9));   // "}}: "SO" alone is in it too
  ASSERT_TRUE(st.advance(7));
  EXPECT_FALSE(st.allowed_mask().test(7));                                // SO11 is not
  for (int32_t t : {12, 13, 5, 11, 14}) ASSERT_TRUE(st.advance(t)) << t;  // ,"date":"明天"}}
  EXPECT_TRUE(st.is_complete());

  // The states no token carries into a value keep the shared masks.
  EXPECT_EQ(c->mask(0, true).get(), holes->mask(0, true).get());
  // A request of another utterance: the same prefix, its own values.
  auto other = Constraint::with_holes_filled(holes, task_values_automaton("SO2"));
  ConstraintState o(other);
  for (int32_t t : {1, 2, 3, 4, 10}) ASSERT_TRUE(o.advance(t));
  EXPECT_TRUE(o.allowed_mask().test(8));
  EXPECT_FALSE(o.allowed_mask().test(7));
}

}  // namespace
}  // namespace shrike::task
