// One labelled utterance of an intent/slot task, and its JSONL form
// {"text": ..., "intent": ..., "slots": {name: value, ...}, "lang": ...}: what `shrike data gen`
// and `shrike data import` write and what train, distill and eval read.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace shrike::data {

struct Example {
  std::string text;
  std::string intent;
  // Slot name -> value as it appears in the text. One value per slot name: a sentence that
  // names two values of one slot keeps the first (the task format is a JSON object).
  std::map<std::string, std::string> slots;
  std::string lang;  // "en", "zh", ... ("" when unknown); eval reports per language
};

// Reads a JSONL file of examples. "text" and "intent" are required strings, "slots" an optional
// object of strings, "lang" an optional string; other keys are ignored; blank lines are skipped.
// Throws FileError "PATH:LINE: ..." naming what is wrong.
std::vector<Example> read_examples(const std::string& path);

// Writes one JSON object per line (UTF-8, keys in the order text, intent, slots, lang). Throws
// FileError when the file cannot be written.
void write_examples(const std::vector<Example>& examples, const std::string& path);

// Creates `dir` (and its parents) for a dataset's files. Throws FileError "DIR: cannot create
// directory" when it cannot be made or is not a directory.
void create_dataset_directory(const std::string& dir);

}  // namespace shrike::data
