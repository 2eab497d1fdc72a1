#include "data/importers.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include "core/file_buffer.h"
#include "shared_data.h"

namespace shrike::data {
namespace {

namespace fs = std::filesystem;
using Slots = std::map<std::string, std::string>;

// A fresh folder per test, removed afterwards.
class Importers : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("shrike_importers_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& content) {
    const fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }

  fs::path dir_;
};

// The FileError message of import_dataset(format, path), or "" when it did not throw one.
std::string import_error(DatasetFormat format, const std::string& path,
                         std::string_view split = {}) {
  try {
    import_dataset(format, path, split);
  } catch (const FileError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_ERROR_AT(format, path, line, what)                                       \
  do {                                                                                  \
    const std::string message__ = import_error(format, path);                           \
    EXPECT_NE(message__.find((path) + ":" #line ": "), std::string::npos) << message__; \
    EXPECT_NE(message__.find(what), std::string::npos) << message__;                    \
  } while (0)

TEST_F(Importers, FormatNames) {
  EXPECT_EQ(parse_dataset_format("banking77"), DatasetFormat::Banking77);
  EXPECT_EQ(parse_dataset_format("xsid"), DatasetFormat::Xsid);
  for (const char* name : {"banking77", "clinc150", "snips", "nlupp", "hint3", "bitext", "xsid"})
    EXPECT_STREQ(dataset_format_name(parse_dataset_format(name)), name);
  EXPECT_THROW(parse_dataset_format("Banking77"), std::invalid_argument);
  EXPECT_THROW(parse_dataset_format(""), std::invalid_argument);
}

TEST_F(Importers, Banking77Csv) {
  const std::string path =
      write("train.csv",
            "text,category\r\nI am still waiting on my card?,card_arrival\r\n"
            "\"How do I know, if my \"\"card\"\"\nwill arrive?\",card_arrival\r\n\r\n"
            "\"\n  padded  \n\",card_linking\r\n");
  const auto ex = import_dataset(DatasetFormat::Banking77, path);
  ASSERT_EQ(ex.size(), 3u);
  EXPECT_EQ(ex[0].text, "I am still waiting on my card?");
  EXPECT_EQ(ex[0].intent, "card_arrival");
  EXPECT_EQ(ex[0].lang, "en");
  EXPECT_TRUE(ex[0].slots.empty());
  EXPECT_EQ(ex[1].text, "How do I know, if my \"card\"\nwill arrive?");
  EXPECT_EQ(ex[2].text, "padded");
  EXPECT_EQ(ex[2].intent, "card_linking");
}

TEST_F(Importers, CsvErrors) {
  std::string p = write("a.csv", "text,category\nok,x\n\"never closed,x\n");
  EXPECT_ERROR_AT(DatasetFormat::Banking77, p, 3, "unterminated quoted field");
  p = write("b.csv", "text,category\nok,x\n\"quoted\"junk,x\n");
  EXPECT_ERROR_AT(DatasetFormat::Banking77, p, 3, "after a closing quote");
  p = write("c.csv", "text,label\nok,x\n");
  EXPECT_ERROR_AT(DatasetFormat::Banking77, p, 1, "no column \"category\"");
  p = write("d.csv", "text,category\nok,x\n\"two\nlines\"\n");
  EXPECT_ERROR_AT(DatasetFormat::Banking77, p, 3, "expected at least 2 fields, found 1");
  p = write("e.csv", "text,category\nok,x\n  ,x\n");
  EXPECT_ERROR_AT(DatasetFormat::Banking77, p, 3, "empty text");
  p = write("f.csv", "text,category\nok,\n");
  EXPECT_ERROR_AT(DatasetFormat::Banking77, p, 2, "empty intent");
  p = write("g.csv", "text,category\nok,x\nbad \xC3\x28,x\n");
  EXPECT_ERROR_AT(DatasetFormat::Banking77, p, 3, "invalid UTF-8");
  p = write("h.csv", "");
  EXPECT_NE(import_error(DatasetFormat::Banking77, p).find("empty file"), std::string::npos);
  EXPECT_NE(
      import_error(DatasetFormat::Banking77, (dir_ / "missing.csv").string()).find("cannot open"),
      std::string::npos);
  EXPECT_NE(import_error(DatasetFormat::Banking77, dir_.string()).find("is a folder"),
            std::string::npos);
  EXPECT_THROW(import_dataset(DatasetFormat::Banking77, p, "train"), std::invalid_argument);
}

TEST_F(Importers, Hint3CsvWithTrailingEmptyColumn) {
  const std::string path = write("powerplay11_train.csv",
                                 "sentence,label,\r\nHai not recieved my "
                                 "product,ORDER_STATUS,\r\n\"refund, pls\",REFUND,\r\n");
  const auto ex = import_dataset(DatasetFormat::Hint3, path);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].text, "Hai not recieved my product");
  EXPECT_EQ(ex[0].intent, "ORDER_STATUS");
  EXPECT_EQ(ex[1].text, "refund, pls");
  EXPECT_EQ(ex[1].intent, "REFUND");
}

TEST_F(Importers, BitextCsvWithEntitySpan) {
  const std::string header =
      "context,role,instruction,intent,entity_type,entity_value,start_offset,end_offset,category,"
      "tags,response\n";
  const std::string path =
      write("train.csv", header +
                             "customer support,virtual assistant,cancel purchase 00123842 pls,"
                             "cancel_order,order_id,123842,16,24,ORDER,BLQZ,\"Sure.\r\n\r\n1. "
                             "Say \"\"hi\"\".\"\n"
                             "customer support,virtual assistant,talk to a human,"
                             "contact_human_agent,,,,,CONTACT,B,ok\n"
                             // Upstream quirks: spans that overshoot the text or the id.
                             "c,r,refund $12,get_refund,refund_amount,12,8,12,REFUND,B,x\n"
                             "c,r,\"edit order 3707955617, help me\",edit_order,order_id,"
                             "3707955617,11,23,ORDER,B,x\n");
  const auto ex = import_dataset(DatasetFormat::Bitext, path);
  ASSERT_EQ(ex.size(), 4u);
  EXPECT_EQ(ex[2].slots, (Slots{{"refund_amount", "12"}}));
  EXPECT_EQ(ex[3].slots, (Slots{{"order_id", "3707955617"}}));
  EXPECT_EQ(ex[0].text, "cancel purchase 00123842 pls");
  EXPECT_EQ(ex[0].intent, "cancel_order");
  EXPECT_EQ(ex[0].slots, (Slots{{"order_id", "00123842"}}));  // the span, not entity_value
  EXPECT_EQ(ex[1].intent, "contact_human_agent");
  EXPECT_TRUE(ex[1].slots.empty());

  std::string bad = write("bad1.csv", header + "c,r,short text,i,order_id,1,10,99,C,B,x\n");
  EXPECT_ERROR_AT(DatasetFormat::Bitext, bad, 2, "selects nothing of the instruction");
  bad = write("bad2.csv", header + "c,r,short text,i,order_id,1,six,9,C,B,x\n");
  EXPECT_ERROR_AT(DatasetFormat::Bitext, bad, 2, "start_offset \"six\" is not");
  bad = write("bad3.csv", "context,role,instruction,intent\nc,r,t,i\n");
  EXPECT_ERROR_AT(DatasetFormat::Bitext, bad, 1, "no column \"entity_type\"");
}

TEST_F(Importers, Clinc150Splits) {
  const std::string path = write("data.json",
                                 "{\"train\": [\n"
                                 "  [\"how do i say hi in french\", \"translate\"],\n"
                                 "  [\"what is my balance\", \"balance\"]],\n"
                                 " \"val\": [[\"say bye in german\", \"translate\"]],\n"
                                 " \"oos_train\": [[\"how tall is everest\", \"oos\"]],\n"
                                 " \"oos_val\": [[\"sing a song\", \"oos\"]]}\n");
  auto ex = import_dataset(DatasetFormat::Clinc150, path, "train");
  ASSERT_EQ(ex.size(), 3u);
  EXPECT_EQ(ex[0].text, "how do i say hi in french");
  EXPECT_EQ(ex[0].intent, "translate");
  EXPECT_EQ(ex[2].intent, "oos");
  ex = import_dataset(DatasetFormat::Clinc150, path, "dev");
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].text, "say bye in german");
  EXPECT_EQ(ex[1].text, "sing a song");
  EXPECT_EQ(import_dataset(DatasetFormat::Clinc150, path, "val").size(), 2u);
  EXPECT_EQ(import_dataset(DatasetFormat::Clinc150, path, "all").size(), 5u);
  EXPECT_THROW(import_dataset(DatasetFormat::Clinc150, path), std::invalid_argument);
  EXPECT_THROW(import_dataset(DatasetFormat::Clinc150, path, "test"), std::invalid_argument);

  std::string bad = write("bad.json",
                          "{\"val\": [[\"a\", \"x\"]],\n"
                          "\"train\": [\n"
                          " [\"a\", \"x\"],\n"
                          " [\"b\", 3]]}\n");
  const std::string message = import_error(DatasetFormat::Clinc150, bad, "train");
  EXPECT_NE(message.find(bad + ":4: "), std::string::npos) << message;
  EXPECT_NE(message.find("[text, intent] pair"), std::string::npos) << message;
  bad = write("bad2.json", "{\"train\": [[\"a\", \"x\"],\n [\"b\" \"y\"]]}");
  const std::string parse_message = import_error(DatasetFormat::Clinc150, bad, "train");
  EXPECT_NE(parse_message.find(bad + ":2: invalid JSON"), std::string::npos) << parse_message;
  bad = write("bad3.json", "{\"val\": []}");
  EXPECT_NE(import_error(DatasetFormat::Clinc150, bad, "train").find("no \"train\" list"),
            std::string::npos);
}

TEST_F(Importers, SnipsFileAndFolder) {
  write("snips/AddToPlaylist.json", R"({
  "AddToPlaylist": [
    {"data": [{"text": "add "}, {"text": "Roar", "entity": "music_item"}, {"text": " to "},
              {"text": "my list ", "entity": "playlist"}, {"text": "and "},
              {"text": "Hey", "entity": "music_item"}]},
    {"data": [{"text": "add it"}]}
  ]
})");
  write(
      "snips/GetWeather.json",
      R"({"GetWeather": [{"data": [{"text": "weather in "}, {"text": "Köln", "entity": "city"}]}]})");
  write("snips/notes.txt", "not a dataset file");
  const auto ex = import_dataset(DatasetFormat::Snips, (dir_ / "snips").string());
  ASSERT_EQ(ex.size(), 3u);
  EXPECT_EQ(ex[0].text, "add Roar to my list and Hey");
  EXPECT_EQ(ex[0].intent, "AddToPlaylist");
  // The first value of a repeated slot; spaces around a span are trimmed.
  EXPECT_EQ(ex[0].slots, (Slots{{"music_item", "Roar"}, {"playlist", "my list"}}));
  EXPECT_TRUE(ex[1].slots.empty());
  EXPECT_EQ(ex[2].intent, "GetWeather");
  EXPECT_EQ(ex[2].slots, (Slots{{"city", "Köln"}}));
  EXPECT_EQ(import_dataset(DatasetFormat::Snips, (dir_ / "snips/GetWeather.json").string()).size(),
            1u);

  const std::string bad = write("bad/Bad.json",
                                "{\"Bad\": [\n"
                                "  {\"data\": [{\"text\": \"ok\"}]},\n"
                                "  {\"data\": [{\"entity\": \"x\"}]}\n"
                                "]}\n");
  EXPECT_ERROR_AT(DatasetFormat::Snips, bad, 3, "missing \"text\"");
  fs::create_directories(dir_ / "empty");
  EXPECT_NE(import_error(DatasetFormat::Snips, (dir_ / "empty").string()).find("no .json files"),
            std::string::npos);
}

TEST_F(Importers, NluppMultiLabelAndSpans) {
  write("nlupp/banking/fold0.json", R"([
  {"text": "Change my card on 5 March for 50 €", "intents": ["change", "card", "change"],
   "slots": {"date": {"text": "5 March", "span": [18, 25], "value": {"day": 5}},
             "amount_of_money": {"text": "50 €", "span": [30, 34], "value": 50}}},
  {"text": "next week", "slots": {"date_period": {"text": "next week", "span": [0, 9],
                                                  "values": {"type": "absolute"}}}}
])");
  write("nlupp/hotels/fold0.json", R"([{"text": "Is there a gym?", "intents": ["gym"]}])");
  const auto ex = import_dataset(DatasetFormat::Nlupp, (dir_ / "nlupp").string());
  ASSERT_EQ(ex.size(), 3u);
  EXPECT_EQ(ex[0].intent, "card+change");
  EXPECT_EQ(ex[0].slots, (Slots{{"amount_of_money", "50 €"}, {"date", "5 March"}}));
  EXPECT_EQ(ex[1].intent, "none");
  EXPECT_EQ(ex[1].slots, (Slots{{"date_period", "next week"}}));
  EXPECT_EQ(ex[2].intent, "gym");

  std::string bad = write("bad1.json",
                          "[\n {\"text\": \"ok\"},\n"
                          " {\"text\": \"on Monday\", \"slots\": {\"date\": {\"text\": \"Monday\", "
                          "\"span\": [0, 6]}}}]");
  EXPECT_ERROR_AT(DatasetFormat::Nlupp, bad, 3, "\"span\" does not select \"Monday\"");
  bad = write("bad2.json", "[{\"text\": \"x\", \"intents\": \"card\"}]");
  EXPECT_ERROR_AT(DatasetFormat::Nlupp, bad, 1, "\"intents\" must be a list");
  bad = write("bad3.json", "[{\"text\": \"x\", \"slots\": {\"d\": {\"text\": \"y\"}}}]");
  EXPECT_ERROR_AT(DatasetFormat::Nlupp, bad, 1, "\"y\" is not in the text");
  bad = write("bad4.json",
              "[{\"text\": \"abc\", \"slots\": {\"d\": {\"text\": \"a\", \"span\": "
              "[-1, 2]}}}]");
  EXPECT_ERROR_AT(DatasetFormat::Nlupp, bad, 1, "does not select");
  bad = write("bad5.json", "{\"text\": \"x\"}");
  EXPECT_NE(import_error(DatasetFormat::Nlupp, bad).find("expected a JSON list"),
            std::string::npos);
  bad = write("bad6.json", "[{\"text\": \"\xff\"}]");
  EXPECT_NE(import_error(DatasetFormat::Nlupp, bad).find("invalid JSON"), std::string::npos);
}

TEST_F(Importers, XsidChineseAndEnglish) {
  const std::string zh = write("zh.valid.conll",
                               "# id = 1\n"
                               "# text-en = Is it going to rain today?\n"
                               "# text = 今天会下雨吗？\n"
                               "# intent = weather/find\n"
                               "1\t今天\tweather/find\tB-datetime\n"
                               "2\t会\tweather/find\tO\n"
                               "3\t下雨\tweather/find\tB-weather/attribute\n"
                               "4\t吗？\tweather/find\tO\n"
                               "\n"
                               "# id = 2\n"
                               "# text = 提醒我明天下午 4点 开会\n"
                               "# intent = reminder/set_reminder\n"
                               "1\t提醒\treminder/set_reminder\tO\n"
                               "2\t我\treminder/set_reminder\tO\n"
                               "3\t明天\treminder/set_reminder\tB-datetime\n"
                               "4\t下午\treminder/set_reminder\tI-datetime\n"
                               "5\t4点\treminder/set_reminder\tI-datetime\n"
                               "6\t开会\treminder/set_reminder\tI-reminder/todo\n");
  auto ex = import_dataset(DatasetFormat::Xsid, zh);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].text, "今天会下雨吗？");
  EXPECT_EQ(ex[0].intent, "weather/find");
  EXPECT_EQ(ex[0].lang, "zh");
  EXPECT_EQ(ex[0].slots, (Slots{{"datetime", "今天"}, {"weather/attribute", "下雨"}}));
  // Values are cut from the text (its space kept, none added); an I- tag after another type
  // starts a slot.
  EXPECT_EQ(ex[1].slots, (Slots{{"datetime", "明天下午 4点"}, {"reminder/todo", "开会"}}));

  const std::string en = write("en.valid.conll",
                               "# text = Add a reminder for today at 4pm\n"
                               "# intent = reminder/set_reminder\n"
                               "# slots: 26:39:datetime\n"
                               "1\tAdd\treminder/set_reminder\tO\n"
                               "2\ta\treminder/set_reminder\tO\n"
                               "3\treminder\treminder/set_reminder\tO\n"
                               "4\tfor\treminder/set_reminder\tO\n"
                               "5\ttoday\treminder/set_reminder\tB-datetime\n"
                               "6\tat\treminder/set_reminder\tI-datetime\n"
                               "7\t4pm\treminder/set_reminder\tI-datetime\n");
  ex = import_dataset(DatasetFormat::Xsid, en);
  ASSERT_EQ(ex.size(), 1u);
  EXPECT_EQ(ex[0].lang, "en");
  EXPECT_EQ(ex[0].slots, (Slots{{"datetime", "today at 4pm"}}));
  // An empty token (zh.valid has one) takes up no text.
  ex = import_dataset(DatasetFormat::Xsid, write("zh.test.conll",
                                                 "# text = 找 Time 的照片\n"
                                                 "1\t找\tx\tO\n"
                                                 "2\tTime\tx\tB-object_name\n"
                                                 "3\t\tx\tO\n"
                                                 "4\t的\tx\tO\n"
                                                 "5\t照片\tx\tB-object_type\n"));
  ASSERT_EQ(ex.size(), 1u);
  EXPECT_EQ(ex[0].intent, "x");  // from the token lines when there is no "# intent"
  EXPECT_EQ(ex[0].slots, (Slots{{"object_name", "Time"}, {"object_type", "照片"}}));
  EXPECT_EQ(import_dataset(DatasetFormat::Xsid, write("utterances.conll",
                                                      "# text = hi\n"
                                                      "1\thi\tgreet\tO\n"))[0]
                .lang,
            "");
}

TEST_F(Importers, XsidErrors) {
  const std::string head = "# text = set an alarm\n# intent = alarm/set_alarm\n";
  std::string p =
      write("a.conll", head + "1\tset\talarm/set_alarm\tO\n2\tan\talarm/set_alarm\tX-y\n");
  EXPECT_ERROR_AT(DatasetFormat::Xsid, p, 4, "unknown slot tag \"X-y\"");
  p = write("b.conll", head + "1\tset\talarm/set_alarm\tO\n2\tthe\talarm/set_alarm\tO\n");
  EXPECT_ERROR_AT(DatasetFormat::Xsid, p, 4, "token \"the\" does not continue");
  p = write("c.conll", head + "1\tset\talarm/set_alarm\n");
  EXPECT_ERROR_AT(DatasetFormat::Xsid, p, 3, "expected 4 tab-separated columns");
  p = write("d.conll", head + "1\tset\tweather/find\tO\n");
  EXPECT_ERROR_AT(DatasetFormat::Xsid, p, 3, "differs from the utterance's");
  p = write("e.conll", "# intent = x\n1\tset\tx\tO\n");
  EXPECT_ERROR_AT(DatasetFormat::Xsid, p, 1, "without a \"# text = \" line");
  p = write("f.conll", head + "1\tset\talarm/set_alarm\tO\n# text = again\n");
  EXPECT_ERROR_AT(DatasetFormat::Xsid, p, 4, "a second \"# text\" line");
  p = write("g.conll", head + "1\tset\talarm/set_alarm\tB-\n");
  EXPECT_ERROR_AT(DatasetFormat::Xsid, p, 3, "unknown slot tag");
  p = write("h.conll", "# text = \xE4\xBD\n1\tx\ty\tO\n");
  EXPECT_ERROR_AT(DatasetFormat::Xsid, p, 1, "invalid UTF-8");
}

// Every prefix of a valid file (a file cut short) imports or throws FileError; nothing else.
TEST_F(Importers, TruncatedFilesFailCleanly) {
  const std::vector<std::pair<DatasetFormat, std::string>> files = {
      {DatasetFormat::Banking77, "text,category\r\n\"a, \"\"b\"\"\nc\",x\r\n"},
      {DatasetFormat::Bitext,
       "context,role,instruction,intent,entity_type,entity_value,start_offset,end_offset\n"
       "c,r,cancel 1234,cancel_order,order_id,1234,7,11\n"},
      {DatasetFormat::Snips,
       R"({"A": [{"data": [{"text": "play "}, {"text": "Höhner", "entity": "artist"}]}]})"},
      {DatasetFormat::Nlupp,
       R"([{"text": "on 5 März", "intents": ["b", "a"], "slots": {"date": {"text": "5 März", "span": [3, 9]}}}])"},
      {DatasetFormat::Xsid,
       "# text = 今天下雨\n# intent = w\n1\t今天\tw\tB-datetime\n2\t下雨\tw\tI-x\n"},
  };
  for (const auto& [format, content] : files) {
    for (size_t n = 0; n <= content.size(); ++n) {
      const std::string path = write("prefix.dat", content.substr(0, n));
      try {
        import_dataset(format, path);
      } catch (const FileError&) {
      } catch (const std::exception& e) {
        ADD_FAILURE() << dataset_format_name(format) << " prefix " << n << ": " << e.what();
      }
    }
    EXPECT_EQ(import_dataset(format, write("whole.dat", content)).size(), 1u)
        << dataset_format_name(format);
  }
}

// ---- the real files in shared/data ---------------------------------------------------------

struct RealFile {
  DatasetFormat format;
  const char* path;  // under shared/
  const char* split;
  size_t count;    // as the dataset's README gives it
  size_t intents;  // distinct intents (0: not checked)
};

void check_real(const RealFile& f) {
  const std::string path = testing::shared_dir() + "/" + f.path;
  const std::vector<Example> ex = import_dataset(f.format, path, f.split);
  EXPECT_EQ(ex.size(), f.count) << f.path;
  std::set<std::string> intents;
  for (const Example& e : ex) {
    intents.insert(e.intent);
    EXPECT_FALSE(e.text.empty());
    EXPECT_FALSE(e.intent.empty());
    for (const auto& [name, value] : e.slots) {
      EXPECT_NE(e.text.find(value), std::string::npos)
          << f.path << ": slot " << name << "=\"" << value << "\" not in \"" << e.text << "\"";
    }
  }
  if (f.intents != 0) {
    EXPECT_EQ(intents.size(), f.intents) << f.path;
  }
}

TEST(RealDatasets, Banking77) {
  SHRIKE_REQUIRE_SHARED("data/banking77/train.csv");
  check_real({DatasetFormat::Banking77, "data/banking77/train.csv", "", 9038, 77});
  check_real({DatasetFormat::Banking77, "data/banking77/dev.csv", "", 965, 77});
}

TEST(RealDatasets, Clinc150) {
  SHRIKE_REQUIRE_SHARED("data/clinc150/data_full.train_val.json");
  check_real(
      {DatasetFormat::Clinc150, "data/clinc150/data_full.train_val.json", "train", 15100, 151});
  check_real({DatasetFormat::Clinc150, "data/clinc150/data_full.train_val.json", "val", 3100, 151});
}

TEST(RealDatasets, Snips) {
  SHRIKE_REQUIRE_SHARED("data/snips/train");
  check_real({DatasetFormat::Snips, "data/snips/train", "", 13098, 7});
  check_real({DatasetFormat::Snips, "data/snips/dev", "", 686, 7});
  const auto ex = import_dataset(DatasetFormat::Snips, testing::shared_dir() + "/data/snips/train");
  std::set<std::string> slot_types;
  for (const Example& e : ex)
    for (const auto& [name, value] : e.slots) slot_types.insert(name);
  EXPECT_EQ(slot_types.size(), 39u);
}

TEST(RealDatasets, Nlupp) {
  SHRIKE_REQUIRE_SHARED("data/nlupp/train");
  check_real({DatasetFormat::Nlupp, "data/nlupp/train", "", 2467, 0});
  check_real({DatasetFormat::Nlupp, "data/nlupp/train/banking", "", 1658, 0});
  check_real({DatasetFormat::Nlupp, "data/nlupp/train/hotels", "", 809, 0});
  check_real({DatasetFormat::Nlupp, "data/nlupp/dev", "", 311, 0});
  check_real({DatasetFormat::Nlupp, "data/nlupp/dev/banking", "", 209, 0});
  check_real({DatasetFormat::Nlupp, "data/nlupp/dev/hotels", "", 102, 0});
}

TEST(RealDatasets, Hint3) {
  SHRIKE_REQUIRE_SHARED("data/hint3/train");
  check_real({DatasetFormat::Hint3, "data/hint3/train/sofmattress_train.csv", "", 300, 21});
  check_real({DatasetFormat::Hint3, "data/hint3/train/curekart_train.csv", "", 551, 28});
  check_real({DatasetFormat::Hint3, "data/hint3/train/powerplay11_train.csv", "", 448, 57});
  check_real({DatasetFormat::Hint3, "data/hint3/dev/sofmattress_dev.csv", "", 28, 0});
  check_real({DatasetFormat::Hint3, "data/hint3/dev/curekart_dev.csv", "", 48, 0});
  check_real({DatasetFormat::Hint3, "data/hint3/dev/powerplay11_dev.csv", "", 23, 0});
}

TEST(RealDatasets, Bitext) {
  SHRIKE_REQUIRE_SHARED("data/bitext_customer_support/train.csv");
  check_real({DatasetFormat::Bitext, "data/bitext_customer_support/train.csv", "", 3599, 27});
  check_real({DatasetFormat::Bitext, "data/bitext_customer_support/dev.csv", "", 452, 27});
}

TEST(RealDatasets, Xsid) {
  SHRIKE_REQUIRE_SHARED("data/xsid/zh.valid.conll");
  check_real({DatasetFormat::Xsid, "data/xsid/zh.valid.conll", "", 300, 15});
  check_real({DatasetFormat::Xsid, "data/xsid/en.valid.conll", "", 300, 15});
  const auto zh =
      import_dataset(DatasetFormat::Xsid, testing::shared_dir() + "/data/xsid/zh.valid.conll");
  const auto en =
      import_dataset(DatasetFormat::Xsid, testing::shared_dir() + "/data/xsid/en.valid.conll");
  ASSERT_EQ(zh.size(), en.size());
  for (size_t i = 0; i < zh.size(); ++i) {
    EXPECT_EQ(zh[i].lang, "zh");
    EXPECT_EQ(en[i].lang, "en");
    EXPECT_EQ(zh[i].intent, en[i].intent) << i;  // parallel items, in the same order
  }
}

// Found by fuzz/task_data: a number too large for a double is not a JSON syntax error
// (nlohmann throws out_of_range, not parse_error), and escaped the importers as a non-FileError.
TEST_F(Importers, JsonNumberTooLargeIsAFileError) {
  const std::string huge(400, '3');
  const struct {
    DatasetFormat format;
    std::string file, text, split;
  } cases[] = {
      {DatasetFormat::Snips, "big_snips.json", "{\"A\": [" + huge + "]}", ""},
      {DatasetFormat::Nlupp, "big_nlupp.json", "[" + huge + "]", ""},
      {DatasetFormat::Clinc150, "big_clinc.json", "{\"train\": " + huge + "}", "train"},
  };
  for (const auto& c : cases) {
    const std::string path = write(c.file, c.text);
    const std::string message = import_error(c.format, path, c.split);
    EXPECT_NE(message.find(path + ": invalid JSON"), std::string::npos) << message;
    EXPECT_NE(message.find("number overflow"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace shrike::data
