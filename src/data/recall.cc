#include "data/recall.h"

#include <array>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string_view>

#include "data/rng.h"

namespace shrike::data {
namespace {

uint64_t mix(uint64_t a, uint64_t b, uint64_t c) {
  return Rng(a ^ (b * 0x9e3779b97f4a7c15ULL) ^ (c * 0xc2b2ae3d27d4eb4fULL)).next();
}

// No filler word is "code", "is" or a digit: the key's sentence is the only "code is".
constexpr std::array<std::string_view, 50> kNouns = {
    "farmer", "lantern", "river",  "garden", "basket", "window", "candle", "teacher", "kitten",
    "rabbit", "bottle",  "letter", "ladder", "bucket", "carpet", "pencil", "blanket", "wagon",
    "mirror", "pillow",  "hammer", "button", "jacket", "bridge", "cloud",  "tower",   "forest",
    "dragon", "pebble",  "violin", "stone",  "apple",  "boat",   "lamp",   "road",    "bird",
    "horse",  "table",   "chair",  "door",   "clock",  "shell",  "map",    "cup",     "drum",
    "kite",   "tree",    "coin",   "ring",   "hill"};
constexpr std::array<std::string_view, 25> kVerbs = {
    "carried", "painted", "found",  "followed", "watched", "cleaned", "dropped", "lifted", "pushed",
    "pulled",  "opened",  "closed", "visited",  "counted", "fixed",   "moved",   "hid",    "chased",
    "touched", "sold",    "bought", "kept",     "saw",     "met",     "borrowed"};
constexpr std::array<std::string_view, 25> kAdjectives = {
    "old",    "quiet",  "bright", "small",  "heavy",  "gentle", "rusty",  "golden", "cold",
    "warm",   "tiny",   "tall",   "dusty",  "shiny",  "soft",   "empty",  "green",  "silver",
    "wooden", "lonely", "noisy",  "clever", "sleepy", "brave",  "strange"};
constexpr std::array<std::string_view, 20> kPlaces = {
    "market", "harbor", "station", "library", "kitchen", "village", "meadow",
    "castle", "bakery", "garage",  "museum",  "valley",  "beach",   "school",
    "barn",   "square", "island",  "cellar",  "attic",   "orchard"};
constexpr std::array<std::string_view, 20> kNames = {
    "anna", "ben", "clara", "david", "ella", "felix", "grace", "henry",  "iris",  "jack",
    "lena", "max", "nora",  "oscar", "rosa", "sam",   "tara",  "victor", "wendy", "zoe"};
constexpr std::array<std::string_view, 11> kNumberWords = {
    "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "twelve", "twenty"};
constexpr std::array<std::string_view, 8> kTimes = {"dawn",     "noon",  "dinner",    "sunset",
                                                    "midnight", "lunch", "breakfast", "class"};
// Labels of decoys: anything but "code".
constexpr std::array<std::string_view, 8> kDecoyLabels = {"room",  "gate", "locker", "ticket",
                                                          "shelf", "desk", "seat",   "box"};
constexpr std::array<std::string_view, 3> kQuestions = {"what is the code?", "what was the code?",
                                                        "tell me the code."};
constexpr std::string_view kKeyPrefix = "the code is ";

// Four digits ("4719") or digit, letter, digit, letter ("4K7Q").
std::string make_key(Rng& rng, bool letters) {
  std::string k;
  for (int i = 0; i < 4; ++i)
    k += letters && i % 2 == 1 ? char('A' + rng.below(26)) : char('0' + rng.below(10));
  return k;
}

// One filler sentence as words (the last carries the full stop).
std::vector<std::string> filler_sentence(Rng& rng) {
  std::vector<std::string_view> w;
  auto noun = [&] { return rng.pick(kNouns); };
  switch (rng.below(8)) {
    case 0:
      w = {"the", rng.pick(kAdjectives), noun(), rng.pick(kVerbs), "the", noun()};
      break;
    case 1:
      w = {"a", noun(), rng.pick(kVerbs), "near", "the", rng.pick(kPlaces)};
      break;
    case 2:
      w = {rng.pick(kNames), rng.pick(kVerbs), rng.pick(kNumberWords), "", "at", "the",
           rng.pick(kPlaces)};
      break;
    case 3:
      w = {"it", "was", rng.pick(kAdjectives), "and", rng.pick(kAdjectives),
           "in", "the", rng.pick(kPlaces)};
      break;
    case 4:
      w = {"then", "the", noun(), rng.pick(kVerbs), "a", rng.pick(kAdjectives), noun()};
      break;
    case 5:
      w = {rng.pick(kNames),  "and",   rng.pick(kNames), "walked", "to", "the",
           rng.pick(kPlaces), "after", rng.pick(kTimes)};
      break;
    case 6:
      w = {"every", rng.pick(kTimes), "the", noun(), "looked", rng.pick(kAdjectives)};
      break;
    default:
      w = {"nobody", "knew", "why", "the", noun(), "was", "so", rng.pick(kAdjectives)};
      break;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i].empty()) {  // case 2: a plural noun after the number
      out.push_back(std::string(noun()) + "s");
      continue;
    }
    out.emplace_back(w[i]);
  }
  return out;
}

int64_t count_words(std::string_view s) {
  int64_t n = 0;
  bool in_word = false;
  for (const char c : s) {
    const bool space = c == ' ';
    if (!space && !in_word) ++n;
    in_word = !space;
  }
  return n;
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("recall: " + what);
}

}  // namespace

Example recall_example(int64_t distance, uint64_t seed, double decoy_rate, bool key_letters) {
  require(distance >= 0, "distance " + std::to_string(distance) + " < 0");
  require(decoy_rate >= 0 && decoy_rate <= 1, "decoy rate outside [0, 1]");
  Rng rng(seed);
  const std::string key = make_key(rng, key_letters);
  std::string text = std::string(kKeyPrefix) + key + ".";
  int64_t left = distance;
  while (left > 0) {
    std::vector<std::string> words;
    if (left >= 4 && rng.uniform() < decoy_rate) {
      std::string decoy = make_key(rng, key_letters);
      while (decoy == key) decoy = make_key(rng, key_letters);
      words = {"the", std::string(rng.pick(kDecoyLabels)), "is", decoy};
    } else {
      words = filler_sentence(rng);
    }
    // The last sentence is cut to the words left, so the distance is exact.
    if (int64_t(words.size()) > left) words.resize(size_t(left));
    left -= int64_t(words.size());
    words.back() += ".";
    for (const std::string& w : words) text += " " + w;
  }
  text += " ";
  text += rng.pick(kQuestions);
  Example ex;
  ex.text = std::move(text);
  ex.intent = "recall";
  ex.slots["code"] = key;
  ex.lang = "en";
  return ex;
}

std::pair<std::string, int64_t> parse_recall_text(const std::string& text) {
  require(text.starts_with(kKeyPrefix), "text does not start with \"the code is\"");
  const size_t stop = text.find('.', kKeyPrefix.size());
  require(stop != std::string::npos, "the key's sentence has no full stop");
  for (const std::string_view q : kQuestions) {
    if (!text.ends_with(q)) continue;
    const std::string_view filler =
        std::string_view(text).substr(stop + 1, text.size() - q.size() - stop - 1);
    return {text.substr(kKeyPrefix.size(), stop - kKeyPrefix.size()), count_words(filler)};
  }
  throw std::invalid_argument("recall: text does not end with a question");
}

RecallData generate_recall(const RecallOptions& o) {
  constexpr int64_t kMaxCount = 10'000'000, kMaxDistance = 100'000;
  require(o.n_train >= 1 && o.n_train <= kMaxCount, "n_train outside [1, 10000000]");
  require(o.n_dev >= 1 && o.n_dev <= kMaxCount, "n_dev outside [1, 10000000]");
  require(o.n_test >= 1 && o.n_test <= kMaxCount, "n_test outside [1, 10000000]");
  require(o.min_distance >= 0 && o.min_distance <= o.max_distance && o.max_distance <= kMaxDistance,
          "distance range [" + std::to_string(o.min_distance) + ", " +
              std::to_string(o.max_distance) + "] is not within [0, 100000]");
  const std::set<int64_t> distinct(o.eval_distances.begin(), o.eval_distances.end());
  require(distinct.size() == o.eval_distances.size(), "an evaluation distance is repeated");
  for (const int64_t d : o.eval_distances)
    require(d >= 0 && d <= kMaxDistance,
            "evaluation distance " + std::to_string(d) + " outside [0, 100000]");
  require(o.decoy_rate >= 0 && o.decoy_rate <= 1, "decoy rate outside [0, 1]");
  // Keys are drawn from 10^4 (or 10 x 26 x 10 x 26); train needs most of them left.
  const int64_t key_space = o.key_letters ? 67600 : 10000;
  require(o.n_dev + o.n_test * int64_t(o.eval_distances.size()) <= key_space / 2,
          "too many dev and test examples to keep their keys out of train");
  // Each split draws from its own stream; held-out keys are kept out of train by redrawing.
  enum Split : uint64_t { kTrain = 1, kDev = 2, kTest = 3 };
  RecallData out;
  std::set<std::string> held_out;
  const uint64_t span = uint64_t(o.max_distance - o.min_distance + 1);
  for (const int64_t d : o.eval_distances) {
    std::vector<Example> set;
    for (int64_t i = 0; i < o.n_test; ++i) {
      set.push_back(recall_example(d, mix(o.seed, kTest * 1'000'003 + uint64_t(d), uint64_t(i)),
                                   o.decoy_rate, o.key_letters));
      held_out.insert(set.back().slots["code"]);
    }
    out.test.emplace_back(d, std::move(set));
  }
  for (int64_t i = 0; i < o.n_dev; ++i) {
    Rng rng(mix(o.seed, kDev, uint64_t(i)));
    const int64_t d = o.min_distance + int64_t(rng.below(span));
    out.dev.push_back(recall_example(d, rng.next(), o.decoy_rate, o.key_letters));
    held_out.insert(out.dev.back().slots["code"]);
  }
  for (int64_t i = 0; i < o.n_train; ++i) {
    Rng rng(mix(o.seed, kTrain, uint64_t(i)));
    const int64_t d = o.min_distance + int64_t(rng.below(span));
    Example ex = recall_example(d, rng.next(), o.decoy_rate, o.key_letters);
    while (held_out.count(ex.slots["code"]))
      ex = recall_example(d, rng.next(), o.decoy_rate, o.key_letters);
    out.train.push_back(std::move(ex));
  }
  return out;
}

void write_recall(const RecallData& data, const std::string& dir) {
  create_dataset_directory(dir);
  const std::filesystem::path root(dir);
  write_examples(data.train, (root / "train.jsonl").string());
  write_examples(data.dev, (root / "dev.jsonl").string());
  for (const auto& [d, examples] : data.test)
    write_examples(examples, (root / ("test_d" + std::to_string(d) + ".jsonl")).string());
}

}  // namespace shrike::data
