// Long-context recall: a key is stated at the start of the text, then comes D words of varied
// filler (with decoy keys under other labels), then a question asking for the key. The examples
// are ordinary intent/slot Examples (intent "recall", slot "code"), so `shrike train` and
// `shrike eval --task` work unchanged and the slot accuracy is the recall accuracy, per distance.
// The KV-cache experiment reads it: does a quantised cache still find a key D words back?
//
//   text:   the code is 4719. the old farmer carried a lantern past the mill. the gate is 2093.
//           ... what is the code?
//   answer: {"intent":"recall","slots":{"code":"4719"}}
//
// Keys are four digits, or with key_letters digit, letter, digit, letter ("4K7Q"); either way
// the task tokenizer (digits never merge; letters never merge with digits or punctuation) gives
// a key the same tokens in the text and in the answer. Copying 26 letters needs wider heads than
// copying 10 digits (a 2-layer model with heads of 16 learns the digits of "4K7Q" long before
// its letters). Decoys look like keys but follow another label ("the gate is 2093."), so only
// the label tells them apart; the filler's own numbers are words, never digits.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/example.h"

namespace shrike::data {

struct RecallOptions {
  int64_t n_train = 20000;
  int64_t n_dev = 200;
  int64_t n_test = 200;  // per evaluation distance
  // Training and dev distances are drawn uniformly from [min_distance, max_distance] words.
  int64_t min_distance = 20, max_distance = 400;
  std::vector<int64_t> eval_distances{50, 100, 200, 400};
  // Chance that a filler sentence is a decoy ("the gate is 2B9M."), in [0, 1].
  double decoy_rate = 0.08;
  bool key_letters = false;  // "4K7Q" instead of "4719"
  uint64_t seed = 1;
};

// One example whose filler is exactly `distance` words (the key's sentence and the question not
// counted), deterministic in (distance, seed). Throws std::invalid_argument for distance < 0.
Example recall_example(int64_t distance, uint64_t seed, double decoy_rate = 0.08,
                       bool key_letters = false);

// The key of an example's text and the number of filler words between it and the question, as
// recall_example wrote them; for tests and reports. Throws std::invalid_argument when the text
// is not a recall example.
std::pair<std::string, int64_t> parse_recall_text(const std::string& text);

struct RecallData {
  std::vector<Example> train, dev;
  std::vector<std::pair<int64_t, std::vector<Example>>> test;  // (distance, examples)
};

// Throws std::invalid_argument naming a bad option (counts < 1 or absurdly large, a distance
// range that is empty or negative, evaluation distances negative or repeated, decoy_rate
// outside [0, 1]). Same options, same bytes. No key of dev or test occurs in train.
RecallData generate_recall(const RecallOptions& options);

// Creates dir (and parents) if needed and writes train.jsonl, dev.jsonl and test_d<D>.jsonl for
// each evaluation distance. Throws FileError when a file cannot be written.
void write_recall(const RecallData& data, const std::string& dir);

}  // namespace shrike::data
