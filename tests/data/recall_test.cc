// The long-context recall generator: exact distances, keys stated once, decoys only under other
// labels, held-out keys, determinism, option errors and the files `shrike data gen --task recall`
// writes.
#include "data/recall.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <sstream>

#include "task/task_format.h"

namespace shrike::data {
namespace {

std::vector<std::string> words_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool is_key(std::string_view k, bool letters) {
  if (k.size() != 4) return false;
  for (size_t i = 0; i < 4; ++i) {
    const auto c = static_cast<unsigned char>(k[i]);
    if (letters && i % 2 == 1 ? !std::isupper(c) : !std::isdigit(c)) return false;
  }
  return true;
}

TEST(Recall, ExampleHasExactDistanceAndOneKey) {
  for (const int64_t d : {0, 1, 3, 7, 50, 400}) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      const bool letters = seed % 2 == 0;
      const Example ex = recall_example(d, seed, 0.08, letters);
      SCOPED_TRACE(ex.text);
      EXPECT_EQ(ex.intent, "recall");
      EXPECT_EQ(ex.lang, "en");
      ASSERT_EQ(ex.slots.size(), 1u);
      const std::string key = ex.slots.at("code");
      EXPECT_TRUE(is_key(key, letters)) << key;
      const auto [parsed_key, parsed_distance] = parse_recall_text(ex.text);
      EXPECT_EQ(parsed_key, key);
      EXPECT_EQ(parsed_distance, d);
      EXPECT_TRUE(ex.text.starts_with("the code is " + key + ". "));
      // "code" appears in the key's sentence and the question only.
      const auto w = words_of(ex.text);
      EXPECT_EQ(std::count_if(w.begin(), w.end(),
                              [](const std::string& s) { return s.starts_with("code"); }),
                2);
      EXPECT_EQ(task::task_answer(ex),
                "{\"intent\":\"recall\",\"slots\":{\"code\":\"" + key + "\"}}");
    }
  }
}

TEST(Recall, FillerNumbersAreWordsAndDecoysFollowOtherLabels) {
  int decoys = 0;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    const bool letters = seed % 2 == 0;
    const Example ex = recall_example(200, seed, 0.3, letters);
    const auto w = words_of(ex.text);
    const std::string key = ex.slots.at("code");
    for (size_t i = 4; i < w.size(); ++i) {  // after "the code is KEY."
      const bool has_digit =
          std::any_of(w[i].begin(), w[i].end(), [](char c) { return std::isdigit(uint8_t(c)); });
      if (!has_digit) continue;
      // A decoy: "the LABEL is XXXX." with another label and another key.
      ASSERT_GE(i, 3u);
      EXPECT_EQ(w[i - 3], "the");
      EXPECT_NE(w[i - 2], "code");
      EXPECT_EQ(w[i - 1], "is");
      ASSERT_TRUE(w[i].ends_with("."));
      const std::string decoy = w[i].substr(0, w[i].size() - 1);
      EXPECT_TRUE(is_key(decoy, letters)) << decoy;
      EXPECT_NE(decoy, key);
      ++decoys;
    }
  }
  EXPECT_GT(decoys, 100);  // ~0.3 of ~28 sentences, 30 times
  const Example none = recall_example(300, 5, 0.0);
  EXPECT_EQ(std::count_if(none.text.begin(), none.text.end(),
                          [](char c) { return std::isdigit(uint8_t(c)); }),
            4);  // the key's digits
}

TEST(Recall, ExamplesAreDeterministicAndVaried) {
  EXPECT_EQ(recall_example(100, 9).text, recall_example(100, 9).text);
  EXPECT_NE(recall_example(100, 9).text, recall_example(100, 10).text);
  std::set<std::string> keys, sentences;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const Example ex = recall_example(40, seed);
    keys.insert(ex.slots.at("code"));
    sentences.insert(ex.text.substr(17, 40));
  }
  EXPECT_GT(keys.size(), 190u);
  EXPECT_GT(sentences.size(), 190u);
}

TEST(Recall, DatasetSplitsDistancesAndHeldOutKeys) {
  RecallOptions o;
  o.n_train = 1500;
  o.n_dev = 50;
  o.n_test = 40;
  o.min_distance = 10;
  o.max_distance = 60;
  o.eval_distances = {0, 25, 80};
  const RecallData d = generate_recall(o);
  ASSERT_EQ(d.train.size(), 1500u);
  ASSERT_EQ(d.dev.size(), 50u);
  ASSERT_EQ(d.test.size(), 3u);
  std::set<std::string> held_out;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(d.test[i].first, o.eval_distances[i]);
    ASSERT_EQ(d.test[i].second.size(), 40u);
    for (const Example& ex : d.test[i].second) {
      EXPECT_EQ(parse_recall_text(ex.text).second, o.eval_distances[i]);
      held_out.insert(ex.slots.at("code"));
    }
  }
  int64_t lo = 1000, hi = -1;
  for (const std::vector<Example>* split : {&d.train, &d.dev}) {
    for (const Example& ex : *split) {
      const int64_t dist = parse_recall_text(ex.text).second;
      EXPECT_GE(dist, 10);
      EXPECT_LE(dist, 60);
      lo = std::min(lo, dist), hi = std::max(hi, dist);
    }
  }
  EXPECT_EQ(lo, 10);
  EXPECT_EQ(hi, 60);
  for (const Example& ex : d.dev) held_out.insert(ex.slots.at("code"));
  for (const Example& ex : d.train) EXPECT_EQ(held_out.count(ex.slots.at("code")), 0u);

  const RecallData again = generate_recall(o);
  ASSERT_EQ(again.train.size(), d.train.size());
  for (size_t i = 0; i < d.train.size(); ++i) EXPECT_EQ(again.train[i].text, d.train[i].text);
  o.seed = 2;
  EXPECT_NE(generate_recall(o).train[0].text, d.train[0].text);
}

TEST(Recall, RejectsBadOptions) {
  auto bad = [](auto edit) {
    RecallOptions o;
    o.n_train = 10, o.n_dev = 5, o.n_test = 5;
    edit(o);
    EXPECT_THROW(generate_recall(o), std::invalid_argument);
  };
  bad([](RecallOptions& o) { o.n_train = 0; });
  bad([](RecallOptions& o) { o.n_dev = 0; });
  bad([](RecallOptions& o) { o.n_test = -1; });
  bad([](RecallOptions& o) { o.min_distance = -1; });
  bad([](RecallOptions& o) { o.min_distance = 50, o.max_distance = 40; });
  bad([](RecallOptions& o) { o.max_distance = 1'000'000; });
  bad([](RecallOptions& o) { o.eval_distances = {50, 50}; });
  bad([](RecallOptions& o) { o.eval_distances = {-5}; });
  bad([](RecallOptions& o) { o.decoy_rate = 1.5; });
  bad([](RecallOptions& o) { o.n_test = 20000; });  // held-out keys would crowd out train's
  bad([](RecallOptions& o) { o.n_test = 1300; });   // 5205 of the 10000 digit keys
  RecallOptions letters;
  letters.n_train = 10, letters.n_dev = 5, letters.n_test = 1300, letters.key_letters = true;
  const RecallData d = generate_recall(letters);  // 5205 of 67600
  EXPECT_TRUE(std::isupper(static_cast<unsigned char>(d.train[0].slots.at("code")[1])));
  EXPECT_THROW(recall_example(-1, 1), std::invalid_argument);
  EXPECT_THROW(parse_recall_text("hello"), std::invalid_argument);
  EXPECT_THROW(parse_recall_text("the code is 1A2B. what now"), std::invalid_argument);
}

TEST(Recall, WritesTrainDevAndOneTestFilePerDistance) {
  RecallOptions o;
  o.n_train = 30, o.n_dev = 5, o.n_test = 4;
  o.eval_distances = {50, 100};
  const RecallData d = generate_recall(o);
  const auto dir = std::filesystem::temp_directory_path() /
                   ("recall_test_" + std::to_string(getpid())) / "nested";
  write_recall(d, dir.string());
  EXPECT_EQ(read_examples((dir / "train.jsonl").string()).size(), 30u);
  EXPECT_EQ(read_examples((dir / "dev.jsonl").string()).size(), 5u);
  const auto t100 = read_examples((dir / "test_d100.jsonl").string());
  ASSERT_EQ(t100.size(), 4u);
  EXPECT_EQ(t100[2].text, d.test[1].second[2].text);
  EXPECT_EQ(t100[2].slots, d.test[1].second[2].slots);
  EXPECT_TRUE(std::filesystem::exists(dir / "test_d50.jsonl"));
  std::filesystem::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace shrike::data
