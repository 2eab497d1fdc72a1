// The built-in customer-service dataset: coverage, balance, verbatim slot values, the template
// split (test wordings never seen in train, every core phrase learnable), determinism, noise and
// the JSONL round trip.
#include "data/generator.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include "core/file_buffer.h"

namespace shrike::data {
namespace {

// The default dataset, generated once for the tests that only read it.
const GeneratedData& default_data() {
  static const GeneratedData data = generate_dataset(GeneratorOptions{});
  return data;
}

struct NamedSplit {
  const char* name;
  const std::vector<Example>* examples;
  const std::vector<ExampleOrigin>* origins;
};

std::vector<NamedSplit> splits(const GeneratedData& d) {
  return {{"train", &d.train, &d.train_origin},
          {"dev", &d.dev, &d.dev_origin},
          {"test", &d.test, &d.test_origin},
          {"test_noisy", &d.test_noisy, &d.test_noisy_origin}};
}

size_t utf8_length(const std::string& s) {
  return static_cast<size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

size_t word_count(const std::string& s) {
  size_t n = 0;
  bool in_word = false;
  for (char c : s) {
    const bool space = c == ' ';
    if (!space && !in_word) ++n;
    in_word = !space;
  }
  return n;
}

TEST(Generator, SplitSizesFollowN) {
  const GeneratedData& d = default_data();
  EXPECT_EQ(d.train.size(), 20000u);
  EXPECT_EQ(d.dev.size(), 2000u);
  EXPECT_EQ(d.test.size(), 2000u);
  EXPECT_EQ(d.test_noisy.size(), 2000u);
  for (const NamedSplit& s : splits(d)) EXPECT_EQ(s.examples->size(), s.origins->size()) << s.name;

  GeneratorOptions small;
  small.n_train = 100;
  const GeneratedData tiny = generate_dataset(small);
  EXPECT_EQ(tiny.train.size(), 100u);
  EXPECT_EQ(tiny.dev.size(), 200u);  // evaluation splits never shrink below 200
  EXPECT_EQ(tiny.test.size(), 200u);
}

TEST(Generator, ManyIntentsAndSlotTypesOccur) {
  const GeneratedData& d = default_data();
  std::set<std::string> intents, slots;
  for (const Example& e : d.train) {
    intents.insert(e.intent);
    for (const auto& [name, value] : e.slots) slots.insert(name);
  }
  EXPECT_GE(intents.size(), 30u);
  EXPECT_GE(slots.size(), 10u);
  EXPECT_EQ(intents.size(), generator_intents().size());
  EXPECT_EQ(slots.size(), generator_slot_types().size());
}

TEST(Generator, EveryIntentInEverySplitAndLanguagesBalanced) {
  const GeneratedData& d = default_data();
  const size_t n_intents = generator_intents().size();
  for (const NamedSplit& s : splits(d)) {
    std::map<std::string, std::set<std::string>> intents_by_lang;
    size_t en = 0, zh = 0;
    for (const Example& e : *s.examples) {
      intents_by_lang[e.lang].insert(e.intent);
      en += e.lang == "en";
      zh += e.lang == "zh";
    }
    EXPECT_EQ(en + zh, s.examples->size()) << s.name;
    EXPECT_LE(std::max(en, zh) - std::min(en, zh), 1u) << s.name;
    EXPECT_EQ(intents_by_lang["en"].size(), n_intents) << s.name;
    EXPECT_EQ(intents_by_lang["zh"].size(), n_intents) << s.name;
  }
}

TEST(Generator, SlotValuesAreVerbatimAndPlausibleForTheIntent) {
  std::map<std::string, std::set<std::string>> allowed;
  for (const IntentInfo& i : generator_intents())
    allowed[i.name] = std::set<std::string>(i.slots.begin(), i.slots.end());
  size_t with_slots = 0, total = 0;
  for (const NamedSplit& s : splits(default_data()))
    for (const Example& e : *s.examples) {
      ++total;
      with_slots += !e.slots.empty();
      ASSERT_TRUE(allowed.count(e.intent)) << e.intent;
      for (const auto& [name, value] : e.slots) {
        EXPECT_FALSE(value.empty()) << e.text;
        EXPECT_NE(e.text.find(value), std::string::npos)
            << s.name << ": '" << value << "' not in '" << e.text << "'";
        EXPECT_TRUE(allowed[e.intent].count(name)) << e.intent << " has slot " << name;
      }
    }
  EXPECT_GT(with_slots, total / 3);  // slots are common, not an afterthought
}

TEST(Generator, TestTemplatesNeverOccurInTrainButTheirCoresDo) {
  const GeneratedData& d = default_data();
  std::set<std::string> train_templates, train_cores;
  for (size_t i = 0; i < d.train.size(); ++i) {
    train_templates.insert(d.train_origin[i].template_id);
    train_cores.insert(d.train[i].lang + "|" + d.train_origin[i].core);
  }
  for (const NamedSplit& s : splits(d)) {
    if (std::string(s.name) == "train") continue;
    for (size_t i = 0; i < s.examples->size(); ++i) {
      const ExampleOrigin& o = (*s.origins)[i];
      EXPECT_FALSE(train_templates.count(o.template_id)) << s.name << ": " << o.template_id;
      EXPECT_TRUE(train_cores.count((*s.examples)[i].lang + "|" + o.core))
          << s.name << ": core never in train: " << o.core;
    }
  }
  for (size_t i = 0; i < d.test.size(); ++i)
    EXPECT_EQ(d.test_noisy_origin[i].template_id, d.test_origin[i].template_id);
}

TEST(Generator, EveryCorePhraseOccursInTrainAndBelongsToOneIntent) {
  const GeneratedData& d = default_data();
  std::map<std::string, std::set<std::string>> cores;  // "intent|lang" -> cores seen in train
  std::map<std::string, std::set<std::string>> intents_of_core;
  for (size_t i = 0; i < d.train.size(); ++i) {
    const Example& e = d.train[i];
    cores[e.intent + "|" + e.lang].insert(d.train_origin[i].core);
    intents_of_core[e.lang + "|" + d.train_origin[i].core].insert(e.intent);
  }
  for (const IntentInfo& intent : generator_intents())
    for (const char* lang : {"en", "zh"}) {
      const int64_t n = generator_core_count(intent.name, lang);
      EXPECT_GE(n, 4) << intent.name << " " << lang;
      EXPECT_EQ(static_cast<int64_t>(cores[intent.name + "|" + lang].size()), n)
          << intent.name << " " << lang;
    }
  for (const auto& [core, intents] : intents_of_core)
    EXPECT_EQ(intents.size(), 1u) << "core shared by intents: " << core;
  EXPECT_EQ(generator_core_count("no_such_intent", "en"), 0);
  EXPECT_EQ(generator_core_count("order_status", "fr"), 0);
}

TEST(Generator, HundredsOfTemplatesPerIntentAndLanguage) {
  const GeneratedData& d = default_data();
  std::map<std::string, std::set<std::string>> templates;
  for (size_t i = 0; i < d.train.size(); ++i)
    templates[d.train[i].intent + "|" + d.train[i].lang].insert(d.train_origin[i].template_id);
  ASSERT_EQ(templates.size(), 2 * generator_intents().size());
  for (const auto& [key, set] : templates) EXPECT_GE(set.size(), 200u) << key;
}

TEST(Generator, SmallTalkTakesOnlyPlainOpenersAndSuffixes) {
  const GeneratedData& d = default_data();
  size_t checked = 0;
  for (size_t i = 0; i < d.train.size(); ++i) {
    const Example& e = d.train[i];
    if (e.intent != "greeting" && e.intent != "goodbye") continue;
    ++checked;
    const ExampleOrigin& o = d.train_origin[i];
    const size_t at = o.template_id.rfind(o.core);
    ASSERT_NE(at, std::string::npos) << o.template_id;
    const std::string opener = o.template_id.substr(0, at);
    const std::string suffix = o.template_id.substr(at + o.core.size());
    const gen_detail::Lang lang = e.lang == "en" ? gen_detail::Lang::en : gen_detail::Lang::zh;
    auto plain = [](const std::vector<const char*>& list, size_t n, const std::string& s) {
      return std::find(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(n), s) !=
             list.begin() + static_cast<std::ptrdiff_t>(n);
    };
    EXPECT_TRUE(plain(gen_detail::suffixes(lang), gen_detail::kPlainSuffixes, suffix))
        << o.template_id;
    if (e.intent == "goodbye") {
      EXPECT_TRUE(plain(gen_detail::openers(lang), gen_detail::kPlainOpeners, opener))
          << o.template_id;
    }
  }
  EXPECT_GT(checked, 0u);
}

TEST(Generator, SentenceLengthsAreMostlyInRange) {
  size_t en = 0, en_ok = 0, zh = 0, zh_ok = 0, zh_mixed = 0;
  for (const Example& e : default_data().test) {
    if (e.lang == "en") {
      ++en;
      const size_t w = word_count(e.text);
      en_ok += w >= 5 && w <= 25;
    } else {
      ++zh;
      const size_t n = utf8_length(e.text);
      zh_ok += n >= 6 && n <= 35;
      zh_mixed += std::any_of(e.text.begin(), e.text.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
      });
    }
  }
  EXPECT_GE(en_ok, en * 85 / 100);
  EXPECT_GE(zh_ok, zh * 85 / 100);
  EXPECT_GE(zh_mixed, zh / 10);  // English brand names and words inside Chinese text
}

TEST(Generator, SameSeedSameDataOtherSeedOtherData) {
  GeneratorOptions o;
  o.n_train = 2000;
  o.seed = 7;
  const GeneratedData a = generate_dataset(o), b = generate_dataset(o);
  o.seed = 8;
  const GeneratedData c = generate_dataset(o);
  ASSERT_EQ(a.train.size(), c.train.size());
  size_t differ = 0;
  for (size_t i = 0; i < a.train.size(); ++i) {
    EXPECT_EQ(a.train[i].text, b.train[i].text);
    EXPECT_EQ(a.train[i].intent, b.train[i].intent);
    EXPECT_EQ(a.train[i].slots, b.train[i].slots);
    differ += a.train[i].text != c.train[i].text;
  }
  for (size_t i = 0; i < a.test_noisy.size(); ++i)
    EXPECT_EQ(a.test_noisy[i].text, b.test_noisy[i].text);
  EXPECT_GT(differ, a.train.size() * 9 / 10);
}

TEST(Generator, TemplateSplitMovesWithTheSeed) {
  GeneratorOptions o;
  o.seed = 2;
  const GeneratedData other = generate_dataset(o);
  std::set<std::string> test_seed1;
  for (const ExampleOrigin& x : default_data().test_origin) test_seed1.insert(x.template_id);
  size_t now_in_train = 0;
  for (const ExampleOrigin& x : other.train_origin) now_in_train += test_seed1.count(x.template_id);
  EXPECT_GT(now_in_train, 20u);  // ~100 expected: 80% of seed 1's test templates are train here
}

TEST(Generator, NoisyTestKeepsLabelsAndChangesText) {
  const GeneratedData& d = default_data();
  ASSERT_EQ(d.test.size(), d.test_noisy.size());
  size_t changed = 0;
  for (size_t i = 0; i < d.test.size(); ++i) {
    const Example &clean = d.test[i], &noisy = d.test_noisy[i];
    EXPECT_EQ(clean.intent, noisy.intent);
    EXPECT_EQ(clean.slots, noisy.slots);
    EXPECT_EQ(clean.lang, noisy.lang);
    EXPECT_FALSE(d.test_origin[i].noisy);
    changed += clean.text != noisy.text;
    EXPECT_EQ(clean.text != noisy.text, d.test_noisy_origin[i].noisy);
  }
  EXPECT_GT(changed, d.test.size() * 95 / 100);
}

TEST(Generator, NoiseFractionOfTrainFollowsTheOption) {
  for (double noise : {0.0, 0.15, 1.0}) {
    GeneratorOptions o;
    o.n_train = 4000;
    o.noise = noise;
    const GeneratedData d = generate_dataset(o);
    const double noisy =
        static_cast<double>(std::count_if(d.train_origin.begin(), d.train_origin.end(),
                                          [](const ExampleOrigin& x) { return x.noisy; })) /
        static_cast<double>(d.train.size());
    // A few noisy draws leave the text unchanged (a typo swapping equal letters, say).
    EXPECT_NEAR(noisy, noise * 0.97, 0.03) << noise;
  }
}

TEST(Generator, SingleLanguage) {
  GeneratorOptions o;
  o.langs = {"en"};
  o.n_train = 500;
  const GeneratedData d = generate_dataset(o);
  for (const NamedSplit& s : splits(d))
    for (const Example& e : *s.examples) EXPECT_EQ(e.lang, "en");
}

TEST(Generator, BadOptionsThrow) {
  auto with = [](auto edit) {
    GeneratorOptions o;
    o.n_train = 10;
    edit(o);
    return o;
  };
  EXPECT_THROW(generate_dataset(with([](GeneratorOptions& o) { o.langs = {}; })),
               std::invalid_argument);
  EXPECT_THROW(generate_dataset(with([](GeneratorOptions& o) { o.langs = {"fr"}; })),
               std::invalid_argument);
  EXPECT_THROW(generate_dataset(with([](GeneratorOptions& o) {
                 o.langs = {"en", ""};
               })),
               std::invalid_argument);
  EXPECT_THROW(generate_dataset(with([](GeneratorOptions& o) {
                 o.langs = {"en", "en"};
               })),
               std::invalid_argument);
  EXPECT_THROW(generate_dataset(with([](GeneratorOptions& o) { o.n_train = 0; })),
               std::invalid_argument);
  EXPECT_THROW(generate_dataset(with([](GeneratorOptions& o) { o.n_train = -3; })),
               std::invalid_argument);
  EXPECT_THROW(generate_dataset(with([](GeneratorOptions& o) { o.n_train = int64_t{1} << 40; })),
               std::invalid_argument);
  EXPECT_THROW(generate_dataset(with([](GeneratorOptions& o) { o.noise = -0.1; })),
               std::invalid_argument);
  EXPECT_THROW(generate_dataset(with([](GeneratorOptions& o) { o.noise = 1.5; })),
               std::invalid_argument);
  EXPECT_THROW(generate_dataset(with([](GeneratorOptions& o) { o.noise = std::nan(""); })),
               std::invalid_argument);
  try {
    generate_dataset(with([](GeneratorOptions& o) { o.langs = {"zh", "de"}; }));
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'de'"), std::string::npos) << e.what();
  }
}

TEST(Generator, WriteAndReadBack) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("shrike_gen_test_" + std::to_string(getpid())) / "nested";
  GeneratorOptions o;
  o.n_train = 300;
  const GeneratedData d = generate_dataset(o);
  write_dataset(d, dir.string());
  const std::vector<std::pair<const char*, const std::vector<Example>*>> files = {
      {"train.jsonl", &d.train},
      {"dev.jsonl", &d.dev},
      {"test.jsonl", &d.test},
      {"test_noisy.jsonl", &d.test_noisy}};
  for (const auto& [name, expected] : files) {
    const std::vector<Example> back = read_examples((dir / name).string());
    ASSERT_EQ(back.size(), expected->size()) << name;
    for (size_t i = 0; i < back.size(); ++i) {
      EXPECT_EQ(back[i].text, (*expected)[i].text);
      EXPECT_EQ(back[i].intent, (*expected)[i].intent);
      EXPECT_EQ(back[i].slots, (*expected)[i].slots);
      EXPECT_EQ(back[i].lang, (*expected)[i].lang);
    }
  }
  // A folder that cannot be created (a file is in the way) is a FileError, not a crash.
  const std::filesystem::path blocker = dir / "train.jsonl" / "sub";
  EXPECT_THROW(write_dataset(d, blocker.string()), FileError);
  std::filesystem::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace shrike::data
