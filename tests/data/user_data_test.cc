// A user's own labelled utterances into splits: CSV and JSONL and folders read with errors naming
// file and line; a stratified, seeded split that never puts one utterance in two splits; the noisy
// test split and the calibration set derived from the user's texts with slot values verbatim.
#include "data/user_data.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/file_buffer.h"
#include "data/generator.h"

namespace shrike::data {
namespace {

namespace fs = std::filesystem;

class UserData : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("shrike_user_data_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = (dir_ / name).string();
    fs::create_directories(fs::path(p).parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  fs::path dir_;
};

// What a CSV or JSONL error says, or "" when there is none.
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const FileError& e) {
    return e.what();
  }
  return "";
}

TEST_F(UserData, CsvColumnsByNameWithOptionalSlotsAndLang) {
  const std::string p =
      write("mine.csv",
            "id,intent,text,slots,lang\r\n"
            "1,track,\"where is order A12, please\",\"{\"\"order_id\"\": \"\"A12\"\"}\",en\r\n"
            "2,greet,  hello  ,,\r\n"
            "3,track,订单A7到哪了,\"{\"\"order_id\"\": \"\"A7\"\"}\",zh\r\n");
  const std::vector<Example> ex = read_labelled(p);
  ASSERT_EQ(ex.size(), 3u);
  EXPECT_EQ(ex[0].text, "where is order A12, please");
  EXPECT_EQ(ex[0].intent, "track");
  EXPECT_EQ(ex[0].slots.at("order_id"), "A12");
  EXPECT_EQ(ex[0].lang, "en");
  EXPECT_EQ(ex[1].text, "hello");
  EXPECT_TRUE(ex[1].slots.empty());
  EXPECT_EQ(ex[2].lang, "zh");
  // Only text and intent are required.
  EXPECT_EQ(read_labelled(write("min.csv", "text,intent\nhi,greet\n")).size(), 1u);
}

TEST_F(UserData, BadInputsNameTheFileAndLine) {
  EXPECT_NE(error_of([&] {
              read_labelled(write("a.csv", "text,label\nhi,greet\n"));
            }).find("a.csv:1: the header has no column \"intent\""),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              read_labelled(write("b.csv", "text,intent,slots\nhi,greet,\nyo,greet,{not json\n"));
            }).find("b.csv:3: \"slots\" must be a JSON object"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              read_labelled(
                  write("c.csv", "text,intent,slots\nhi,greet,\"{\"\"name\"\": \"\"Bo\"\"}\"\n"));
            }).find("c.csv:2: slot \"name\" value \"Bo\" does not occur in the text"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              read_labelled(write("d.csv", "text,intent\n,greet\n"));
            }).find("d.csv:2: empty text"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              read_labelled(write("e.jsonl", "{\"text\": \"hi\"}\n"));
            }).find("e.jsonl:1: missing \"intent\""),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              read_labelled((dir_ / "missing.csv").string());
            }).find("missing.csv: cannot open"),
            std::string::npos);
  fs::create_directories(dir_ / "empty");
  EXPECT_NE(
      error_of([&] { read_labelled((dir_ / "empty").string()); }).find("no .jsonl or .csv file"),
      std::string::npos);
  EXPECT_NE(error_of([&] { read_labelled(write("f.csv", "text,intent\n")); }).find("no rows"),
            std::string::npos);
}

TEST_F(UserData, AFolderIsItsFilesInNameOrder) {
  write("folder/b.csv", "text,intent\nsecond,x\n");
  write("folder/a.jsonl", "{\"text\": \"first\", \"intent\": \"x\"}\n");
  write("folder/notes.txt", "ignored");
  const std::vector<Example> ex = read_labelled((dir_ / "folder").string());
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].text, "first");
  EXPECT_EQ(ex[1].text, "second");
}

// The built-in generator's utterances stand in for a user's: 40 intents, slots, en and zh.
std::vector<Example> utterances(int n) {
  GeneratorOptions o;
  o.n_train = n;
  o.seed = 11;
  return generate_dataset(o).train;
}

std::string folded(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != ' ') out.push_back(char(std::tolower(static_cast<unsigned char>(c))));
  return out;
}

TEST_F(UserData, SplitHoldsOutEachIntentAndNeverSharesAnUtterance) {
  std::vector<Example> all = utterances(2000);
  // Repeats differing in case and spacing must land in one split.
  for (int i = 0; i < 50; ++i) {
    Example e = all[size_t(i)];
    e.text = "  " + e.text + "  ";
    if (e.slots.empty())  // (a slot value must stay a substring of its text)
      for (char& c : e.text) c = char(std::toupper(static_cast<unsigned char>(c)));
    all.push_back(e);
  }
  const UserSplits s = split_examples(all, {});
  EXPECT_EQ(s.train.size() + s.dev.size() + s.test.size(), all.size());
  std::set<std::string> train_texts, intents_in_test;
  for (const Example& e : s.train) train_texts.insert(folded(e.text));
  for (const auto* v : {&s.dev, &s.test})
    for (const Example& e : *v) EXPECT_EQ(train_texts.count(folded(e.text)), 0u) << e.text;
  for (const Example& e : s.test) intents_in_test.insert(e.intent);
  std::set<std::string> intents;
  for (const Example& e : all) intents.insert(e.intent);
  EXPECT_EQ(intents_in_test, intents);  // every intent has enough texts to hold some out
  EXPECT_NEAR(double(s.test.size()) / double(all.size()), 0.1, 0.03);
  EXPECT_NEAR(double(s.dev.size()) / double(all.size()), 0.1, 0.03);
  // test_noisy is test through the noise pass, slot values verbatim; calib is train + dev only.
  ASSERT_EQ(s.test_noisy.size(), s.test.size());
  EXPECT_GT(s.noisy_changed, int64_t(s.test.size()) * 8 / 10);
  for (size_t i = 0; i < s.test.size(); ++i) {
    EXPECT_EQ(s.test_noisy[i].intent, s.test[i].intent);
    EXPECT_EQ(s.test_noisy[i].slots, s.test[i].slots);
    for (const auto& [name, value] : s.test_noisy[i].slots)
      EXPECT_NE(s.test_noisy[i].text.find(value), std::string::npos) << s.test_noisy[i].text;
  }
  EXPECT_EQ(s.calib.size(), s.train.size() + s.dev.size());
  // Seeded: the same seed gives the same split, another seed another one.
  const UserSplits again = split_examples(all, {});
  ASSERT_EQ(again.test.size(), s.test.size());
  for (size_t i = 0; i < s.test.size(); ++i) EXPECT_EQ(again.test[i].text, s.test[i].text);
  EXPECT_EQ(again.test_noisy[0].text, s.test_noisy[0].text);
  SplitOptions other;
  other.seed = 2;
  const UserSplits reseeded = split_examples(all, other);
  size_t same = 0;
  for (size_t i = 0; i < std::min(reseeded.test.size(), s.test.size()); ++i)
    same += reseeded.test[i].text == s.test[i].text;
  EXPECT_LT(same, s.test.size() / 2);
}

TEST_F(UserData, IntentsWithTooFewTextsStayInTraining) {
  const std::vector<Example> few = {{"hi", "greet", {}, ""},
                                    {"hello", "greet", {}, ""},
                                    {"a", "x", {}, ""},
                                    {"b", "x", {}, ""},
                                    {"c", "x", {}, ""}};
  const UserSplits s = split_examples(few, {});
  EXPECT_EQ(s.test.size(), 1u);  // one of x's three texts
  EXPECT_EQ(s.test[0].intent, "x");
  EXPECT_EQ(s.train.size() + s.dev.size(), 4u);
  EXPECT_THROW(split_examples({}, {}), std::invalid_argument);
  SplitOptions bad;
  bad.test = 0.7;
  EXPECT_THROW(split_examples(few, bad), std::invalid_argument);
}

TEST_F(UserData, NoisyCopyEditsAroundSlotValuesInEitherLanguage) {
  Rng rng(5);
  const Example en{"please track my order A12 to Berlin today",
                   "track",
                   {{"order_id", "A12"}, {"city", "Berlin"}},
                   "en"};
  const Example zh{"请帮我查一下订单A7的物流信息", "track", {{"order_id", "A7"}}, ""};
  int changed_en = 0, changed_zh = 0;
  for (int i = 0; i < 20; ++i) {
    const Example a = noisy_copy(en, rng), b = noisy_copy(zh, rng);
    changed_en += a.text != en.text;
    changed_zh += b.text != zh.text;
    EXPECT_NE(a.text.find("A12"), std::string::npos) << a.text;
    EXPECT_NE(a.text.find("Berlin"), std::string::npos) << a.text;
    EXPECT_NE(b.text.find("A7"), std::string::npos) << b.text;
    EXPECT_EQ(a.slots, en.slots);
  }
  EXPECT_GE(changed_en, 16);
  EXPECT_GE(changed_zh, 16);
}

TEST_F(UserData, APresplitFolderKeepsItsSplitsAndDerivesTheRest) {
  write("pre/train.jsonl",
        "{\"text\": \"track order A1\", \"intent\": \"track\", \"slots\": "
        "{\"order_id\": \"A1\"}}\n");
  write("pre/dev.jsonl", "{\"text\": \"hello\", \"intent\": \"greet\"}\n");
  write("pre/test.jsonl", "{\"text\": \"where is my order\", \"intent\": \"track\"}\n");
  UserSplits s;
  ASSERT_TRUE(read_presplit((dir_ / "pre").string(), {}, s));
  EXPECT_EQ(s.train.size(), 1u);
  EXPECT_EQ(s.test[0].text, "where is my order");
  EXPECT_EQ(s.test_noisy.size(), 1u);
  EXPECT_EQ(s.calib.size(), 2u);
  write_user_splits(s, (dir_ / "out").string());
  for (const char* f : {"train", "dev", "test", "test_noisy", "calib"})
    EXPECT_EQ(read_examples((dir_ / "out" / (std::string(f) + ".jsonl")).string()).size(),
              f[0] == 'c' ? 2u : 1u)
        << f;
  EXPECT_FALSE(read_presplit((dir_ / "out" / "train.jsonl").string(), {}, s));
  write("pre2/train.jsonl", "{\"text\": \"a\", \"intent\": \"x\"}\n");
  EXPECT_FALSE(read_presplit((dir_ / "pre2").string(), {}, s));  // no dev/test: not split
}

}  // namespace
}  // namespace shrike::data
