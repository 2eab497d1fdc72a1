// A user's own labelled utterances, made into the splits every later step reads: read from JSONL,
// CSV or a folder of them; split into train/dev/test with no text in two splits; the noisy test
// split and the calibration set derived from the user's utterances (the generator's noise pass,
// slot values verbatim), never from the built-in catalogue. `shrike data split` and
// `shrike optimize --data FILE` use it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/example.h"

namespace shrike::data {

// Reads labelled utterances from `path`: a .jsonl file (read_examples), a .csv file
// (read_labelled_csv), or a folder whose *.jsonl and *.csv files are read in name order and
// concatenated. Throws FileError naming the file (and line) for anything unreadable or malformed,
// and for a folder with no such file or an input with no examples.
std::vector<Example> read_labelled(const std::string& path);

struct SplitOptions {
  double dev = 0.1, test = 0.1;  // fractions of each intent's distinct texts
  uint64_t seed = 1;
};

struct UserSplits {
  std::vector<Example> train, dev, test;
  std::vector<Example> test_noisy;  // test[i] through the noise pass
  std::vector<Example> calib;       // train and dev through the noise pass: calibration traffic
  int64_t distinct_texts = 0;       // after folding case and spaces
  int64_t intents = 0;
  int64_t noisy_changed = 0;  // test_noisy entries that differ from their test example
};

// Splits examples by intent (stratified): each intent's distinct texts (case and runs of spaces
// folded, so repeats of one utterance land together) are ordered by a hash of the text and the
// seed, and the first `test` fraction go to test, the next `dev` fraction to dev (at least one of
// each once an intent has 3 distinct texts; with fewer, all train). Each split keeps file order.
// Throws std::invalid_argument for fractions outside [0, 0.5] or no examples.
UserSplits split_examples(const std::vector<Example>& examples, const SplitOptions& options);

// The splits of an input that is already split: a folder holding train.jsonl, dev.jsonl and
// test.jsonl (test_noisy.jsonl too, or it is derived). Returns false when `path` is not such a
// folder.
bool read_presplit(const std::string& path, const SplitOptions& options, UserSplits& out);

// Writes train, dev, test, test_noisy and calib .jsonl into dir (created if needed).
void write_user_splits(const UserSplits& splits, const std::string& dir);

}  // namespace shrike::data
