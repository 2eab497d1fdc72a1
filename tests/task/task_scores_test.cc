#include "task/task_scores.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace shrike::task {
namespace {

using data::Example;

using Slots = std::map<std::string, std::string>;

Example gold(std::string intent, Slots slots, std::string lang) {
  return Example{"text", std::move(intent), std::move(slots), std::move(lang)};
}

TaskPrediction pred(std::string intent, Slots slots, bool parsed = true) {
  return TaskPrediction{parsed, std::move(intent), std::move(slots)};
}

// Five examples whose scores are worked out by hand below.
struct Fixture {
  std::vector<Example> g = {
      gold("A", {{"x", "1"}, {"y", "2"}}, "en"),  // intent right, 1 of 2 slots right
      gold("B", {}, "en"),                        // B -> A
      gold("A", {{"z", "北京"}}, "zh"),           // exact
      gold("B", {}, "zh"),                        // unparsed, nothing recovered: B -> ""
      gold("B", {{"x", "1"}}, "en"),              // B -> A, 1 right + 1 spurious slot
  };
  std::vector<TaskPrediction> p = {
      pred("A", {{"x", "1"}, {"y", "3"}}), pred("A", {}),
      pred("A", {{"z", "北京"}}),          pred("", {}, false),
      pred("A", {{"x", "1"}, {"w", "2"}}),
  };
};

TEST(Metrics, SlotErrorsByKind) {
  const auto ex = [](std::string text, Slots slots) {
    return Example{std::move(text), "I", std::move(slots), "en"};
  };
  const std::vector<Example> g = {
      ex("play the song Blue Moon by Ella", {{"track", "Blue Moon"}, {"artist", "Ella"}}),
      ex("book a table in Paris for two", {{"city", "Paris"}, {"party_size", "two"}}),
      ex("rate this book four", {{"rating", "four"}}),
      ex("weather tomorrow", {{"date", "tomorrow"}}),
  };
  const std::vector<TaskPrediction> p = {
      // boundary ("Blue" inside "Blue Moon"), case only ("ella")
      pred("I", {{"track", "Blue"}, {"artist", "ella"}}),
      // wrong type (Paris as state), wrong value invented (three: not in the utterance)
      pred("I", {{"state", "Paris"}, {"party_size", "three"}}),
      // missing rating, spurious object ("book" is in the utterance)
      pred("I", {{"object", "book"}}), pred("", {}, false),  // one gold slot in an unparsed answer
  };
  const SlotErrorCounts e = score_task(g, p).slot_errors;
  EXPECT_EQ(e.boundary, 1);
  EXPECT_EQ(e.case_only, 1);
  EXPECT_EQ(e.wrong_type, 1);
  EXPECT_EQ(e.wrong_value, 1);
  EXPECT_EQ(e.missing, 1);
  EXPECT_EQ(e.spurious, 1);
  EXPECT_EQ(e.unparsed, 1);
  EXPECT_EQ(e.not_in_utterance, 2);  // "three" and "ella"
  const auto j = nlohmann::json::parse(scores_json(score_task(g, p)));
  EXPECT_EQ(j["slot_errors"]["wrong_type"], 1);
  EXPECT_NE(format_scores(score_task(g, p)).find("1 boundary, 1 wrong value, 1 case only"),
            std::string::npos);
}

TEST(Metrics, OverallNumbers) {
  const Fixture f;
  const TaskScores s = score_task(f.g, f.p);
  EXPECT_EQ(s.n, 5);
  EXPECT_EQ(s.intent_correct, 2);
  EXPECT_DOUBLE_EQ(s.intent_accuracy, 0.4);
  EXPECT_EQ(s.slot_true_positives, 3);
  EXPECT_EQ(s.slot_predicted, 5);
  EXPECT_EQ(s.slot_gold, 4);
  EXPECT_DOUBLE_EQ(s.slot_precision, 0.6);
  EXPECT_DOUBLE_EQ(s.slot_recall, 0.75);
  EXPECT_NEAR(s.slot_f1, 2 * 0.6 * 0.75 / 1.35, 1e-12);
  EXPECT_EQ(s.exact_correct, 1);
  EXPECT_DOUBLE_EQ(s.exact_accuracy, 0.2);
  EXPECT_EQ(s.parse_failures, 1);
}

TEST(Metrics, PerLanguageAndPerIntent) {
  const Fixture f;
  const TaskScores s = score_task(f.g, f.p);
  ASSERT_EQ(s.per_language.size(), 2u);
  const ScoreCounts& en = s.per_language.at("en");
  EXPECT_EQ(en.n, 3);
  EXPECT_EQ(en.intent_correct, 1);
  EXPECT_NEAR(en.intent_accuracy, 1.0 / 3, 1e-12);
  EXPECT_EQ(en.slot_true_positives, 2);
  EXPECT_EQ(en.slot_predicted, 4);
  EXPECT_EQ(en.slot_gold, 3);
  EXPECT_NEAR(en.slot_f1, 2 * 0.5 * (2.0 / 3) / (0.5 + 2.0 / 3), 1e-12);
  EXPECT_EQ(en.parse_failures, 0);
  const ScoreCounts& zh = s.per_language.at("zh");
  EXPECT_EQ(zh.n, 2);
  EXPECT_DOUBLE_EQ(zh.intent_accuracy, 0.5);
  EXPECT_DOUBLE_EQ(zh.slot_f1, 1.0);
  EXPECT_DOUBLE_EQ(zh.exact_accuracy, 0.5);
  EXPECT_EQ(zh.parse_failures, 1);

  ASSERT_EQ(s.per_intent.size(), 2u);
  EXPECT_EQ(s.per_intent.at("A").n, 2);
  EXPECT_DOUBLE_EQ(s.per_intent.at("A").accuracy, 1.0);
  EXPECT_EQ(s.per_intent.at("B").n, 3);
  EXPECT_EQ(s.per_intent.at("B").correct, 0);
  EXPECT_DOUBLE_EQ(s.per_intent.at("B").accuracy, 0.0);
}

TEST(Metrics, ConfusionsSortedByCountThenName) {
  std::vector<Example> g;
  std::vector<TaskPrediction> p;
  auto add = [&](const char* gi, const char* pi, int times) {
    for (int i = 0; i < times; ++i) g.push_back(gold(gi, {}, "en")), p.push_back(pred(pi, {}));
  };
  add("c", "a", 2);
  add("b", "a", 3);
  add("a", "b", 2);
  add("a", "a", 5);  // correct: no confusion
  const TaskScores s = score_task(g, p);
  ASSERT_EQ(s.confusions.size(), 3u);
  EXPECT_EQ(s.confusions[0].gold, "b");
  EXPECT_EQ(s.confusions[0].predicted, "a");
  EXPECT_EQ(s.confusions[0].count, 3);
  EXPECT_EQ(s.confusions[1].gold, "a");  // ties: by gold name
  EXPECT_EQ(s.confusions[1].count, 2);
  EXPECT_EQ(s.confusions[2].gold, "c");
}

TEST(Metrics, SlotScoresWithoutSlots) {
  // Neither side has slots: nothing missed, nothing invented.
  TaskScores s = score_task({gold("A", {}, "en")}, {pred("A", {})});
  EXPECT_DOUBLE_EQ(s.slot_precision, 1.0);
  EXPECT_DOUBLE_EQ(s.slot_recall, 1.0);
  EXPECT_DOUBLE_EQ(s.slot_f1, 1.0);
  // Invented slots on an intent-only example.
  s = score_task({gold("A", {}, "en")}, {pred("A", {{"x", "1"}})});
  EXPECT_DOUBLE_EQ(s.slot_precision, 0.0);
  EXPECT_DOUBLE_EQ(s.slot_recall, 0.0);
  EXPECT_DOUBLE_EQ(s.slot_f1, 0.0);
  // Missed slots, none predicted.
  s = score_task({gold("A", {{"x", "1"}}, "en")}, {pred("A", {})});
  EXPECT_DOUBLE_EQ(s.slot_recall, 0.0);
  EXPECT_DOUBLE_EQ(s.slot_f1, 0.0);
  // Nothing at all.
  s = score_task({}, {});
  EXPECT_EQ(s.n, 0);
  EXPECT_DOUBLE_EQ(s.intent_accuracy, 0.0);
}

TEST(Metrics, RecoveredIntentCountsButIsNotAnExactMatch) {
  const TaskScores s = score_task({gold("A", {}, "en")}, {pred("A", {}, false)});
  EXPECT_EQ(s.intent_correct, 1);
  EXPECT_EQ(s.exact_correct, 0);
  EXPECT_EQ(s.parse_failures, 1);
}

TEST(Metrics, SizeMismatchThrows) {
  EXPECT_THROW(score_task({gold("A", {}, "en")}, {}), std::invalid_argument);
}

TEST(Metrics, ReportAndJson) {
  const Fixture f;
  const TaskScores s = score_task(f.g, f.p);
  const std::string report = format_scores(s, 1);
  EXPECT_NE(report.find("intent accuracy  0.4000 (2/5)"), std::string::npos) << report;
  EXPECT_NE(report.find("0.6000 / 0.7500 / 0.6667"), std::string::npos) << report;
  EXPECT_NE(report.find("zh"), std::string::npos) << report;
  EXPECT_NE(report.find("2  B -> A"), std::string::npos) << report;
  EXPECT_EQ(report.find("B -> (none)"), std::string::npos) << report;  // only the top one
  EXPECT_NE(format_scores(s).find("B -> (none)"), std::string::npos);

  const auto j = nlohmann::json::parse(scores_json(s));
  EXPECT_EQ(j["n"], 5);
  EXPECT_DOUBLE_EQ(j["slot_recall"].get<double>(), 0.75);
  EXPECT_EQ(j["per_language"]["zh"]["parse_failures"], 1);
  EXPECT_EQ(j["per_intent"]["B"]["correct"], 0);
  ASSERT_EQ(j["confusions"].size(), 2u);
  EXPECT_EQ(j["confusions"][0]["count"], 2);
  EXPECT_EQ(j["confusions"][1]["predicted"], "");
}

}  // namespace
}  // namespace shrike::task
