#include "data/value_swap.h"

#include <gtest/gtest.h>

#include <set>

namespace shrike::data {
namespace {

using Slots = std::map<std::string, std::string>;

std::vector<Example> examples() {
  return {
      {"play Blue Moon by Ella Fitzgerald", "PlayMusic",
       Slots{{"track", "Blue Moon"}, {"artist", "Ella Fitzgerald"}}, "en"},
      {"play Yesterday by The Beatles now", "PlayMusic",
       Slots{{"track", "Yesterday"}, {"artist", "The Beatles"}}, "en"},
      {"what is the weather", "GetWeather", Slots{}, "en"},           // no slots: not copied
      {"book for 2 people", "Book", Slots{{"party", "3"}}, "en"},     // value not in the text
      {"查询北京天气", "GetWeather", Slots{{"city", "北京"}}, "zh"},  // no spaces: characters
  };
}

TEST(ValueSwap, EveryValueIsReplacedInTheTextAndTheSlotsAlike) {
  const std::vector<Example> in = examples();
  ValueSwapOptions opt;
  opt.copies = 20;
  const std::vector<Example> out = swap_slot_values(in, opt);
  ASSERT_EQ(out.size(), 20u * 3);  // the three examples whose values are all in their text
  std::set<std::string> tracks;
  for (const Example& ex : out) {
    for (const auto& [name, value] : ex.slots) {
      ASSERT_FALSE(value.empty());
      EXPECT_NE(ex.text.find(value), std::string::npos) << ex.text << " / " << value;
    }
    if (ex.intent == "PlayMusic") {
      ASSERT_EQ(ex.slots.size(), 2u);
      EXPECT_TRUE(ex.text.starts_with("play ")) << ex.text;
      EXPECT_NE(ex.text.find(" by "), std::string::npos) << ex.text;
      tracks.insert(ex.slots.at("track"));
    } else {
      EXPECT_EQ(ex.lang, "zh");
      EXPECT_TRUE(ex.text.starts_with("查询") && ex.text.ends_with("天气")) << ex.text;
      EXPECT_EQ(ex.slots.at("city").size(), 6u);  // two characters, as the value had
    }
  }
  // Values of the same name from other examples and random words both occur.
  EXPECT_TRUE(tracks.contains("Blue Moon") && tracks.contains("Yesterday"));
  EXPECT_GT(tracks.size(), 4u);
}

TEST(ValueSwap, DeterministicAndOffWithoutCopies) {
  ValueSwapOptions opt;
  opt.copies = 3;
  const auto a = swap_slot_values(examples(), opt), b = swap_slot_values(examples(), opt);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].text, b[i].text);
  opt.copies = 0;
  EXPECT_TRUE(swap_slot_values(examples(), opt).empty());
  opt.copies = 1;
  opt.random_word_fraction = 0;  // only values of the same name: the two songs trade places
  for (const Example& ex : swap_slot_values(examples(), opt)) {
    if (ex.intent == "PlayMusic") {
      EXPECT_TRUE(ex.slots.at("artist") == "Ella Fitzgerald" ||
                  ex.slots.at("artist") == "The Beatles");
    }
  }
}

}  // namespace
}  // namespace shrike::data
