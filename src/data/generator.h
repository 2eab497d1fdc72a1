// The built-in customer-service intent/slot dataset (`shrike data gen`): e-commerce requests in
// Chinese and English, composed from templates, with colloquial phrasing, mixed scripts and an
// optional noise pass (typos, txt-speak, filler particles, homophones, width swaps).
//
// A template is the full surface pattern of an utterance: an optional opener ("hi, ", "亲，"),
// one core phrase of an intent with slot placeholders ("where's my order {order_id}") and an
// optional suffix (", thanks", "，在线等"). Templates are split by a hash of their pattern and
// the seed, so dev, test and test_noisy use only combinations that never occur in train, while
// every core phrase still occurs in train: a model is measured on unseen wordings of requests it
// has learned, not on phrases it could not know. Noise never touches slot values, so every value
// stays a verbatim substring of its text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/example.h"
#include "data/rng.h"

namespace shrike::data {

struct GeneratorOptions {
  std::vector<std::string> langs{"zh", "en"};  // "zh" and/or "en"; examples alternate between them
  int64_t n_train = 20000;                     // dev, test and test_noisy get max(200, n/10)
  double noise = 0.15;                         // fraction of train and dev examples made noisy
  uint64_t seed = 1;                           // the data and the template split
};

// Where one example came from, for tests and reports.
struct ExampleOrigin {
  std::string template_id;  // opener + core + suffix, "{slot}" placeholders, before noise
  std::string core;         // the intent's core phrase inside it
  bool noisy = false;       // whether the noise pass edited this example
};

struct GeneratedData {
  std::vector<Example> train, dev, test, test_noisy;
  // Parallel to the example vectors. test_noisy[i] is test[i] with noise applied.
  std::vector<ExampleOrigin> train_origin, dev_origin, test_origin, test_noisy_origin;
};

// Throws std::invalid_argument naming the bad option (no languages, an unknown or repeated
// language, n_train < 1 or absurdly large, noise outside [0, 1]). Same options, same bytes.
GeneratedData generate_dataset(const GeneratorOptions& options);

// The generator's noise pass (typos, txt-speak, case and punctuation for English; filler
// particles, dropped or repeated characters, homophones, full/half width for Chinese) on any
// labelled utterance, e.g. a user's own: slot values stay verbatim (the pass edits only the text
// around them), so the labels still hold. Chinese when lang is "zh" or the text has a CJK
// ideograph. One to three edits; the result may equal the input when none applies.
Example noisy_copy(const Example& ex, Rng& rng);

// Creates dir (and parents) if needed and writes train.jsonl, dev.jsonl, test.jsonl and
// test_noisy.jsonl. Throws FileError when a file cannot be written.
void write_dataset(const GeneratedData& data, const std::string& dir);

// What the generator can produce: every intent with the slots its phrases may carry, and every
// slot type. A generated example's slots are a subset of its intent's.
struct IntentInfo {
  std::string name;
  std::vector<std::string> slots;
};
std::vector<IntentInfo> generator_intents();
std::vector<std::string> generator_slot_types();

// Number of distinct core phrases (expanded, with placeholders) of one intent in one language;
// 0 for an unknown intent or language.
int64_t generator_core_count(std::string_view intent, std::string_view lang);

// The pieces the generator is built from, defined in generator_catalog.cc and used by
// generator.cc; not meant for other callers.
namespace gen_detail {

using Rng = data::Rng;

enum class Lang { en, zh };

// One intent's core phrases per language. Pattern syntax: "[a|b|]" picks one alternative (empty
// allowed, no nesting), "{slot}" or "{slot:flavour}" is a slot placeholder (date flavours: past,
// future). Each expansion of a pattern is one core phrase.
// Which openers and suffixes an intent's phrases combine with: "thanks, bye" takes no "quick
// question: " in front and no " asap" behind.
enum class Frame { full, plain_suffixes, plain };
struct IntentPatterns {
  const char* name;
  std::vector<const char*> slots;  // the intent's plausible slots
  std::vector<const char*> en, zh;
  Frame frame = Frame::full;
};
const std::vector<IntentPatterns>& intent_patterns();
const std::vector<const char*>& slot_types();
// Openers and suffixes of a language (index 0 is the empty string); literal text, no slots. The
// first kPlainOpeners / kPlainSuffixes of each suit small talk too.
constexpr size_t kPlainOpeners = 5, kPlainSuffixes = 5;
const std::vector<const char*>& openers(Lang lang);
const std::vector<const char*>& suffixes(Lang lang);
// A realistic value of a slot as a user would type it ("SO20231123456", "一百二十块", "next
// Monday"). Throws std::logic_error for an unknown slot (a catalog bug).
std::string slot_value(std::string_view slot, std::string_view flavour, Lang lang, Rng& rng);

}  // namespace gen_detail
}  // namespace shrike::data
