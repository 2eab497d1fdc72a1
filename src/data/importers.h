// Importers of public intent/slot datasets (the files under shared/data/, in their upstream
// formats) into Examples.
//
// Common rules:
// - Texts and slot values are trimmed of surrounding whitespace (some upstream texts begin or end
//   with line breaks, some spans with a space); a slot whose value is empty after trimming is
//   dropped. Every slot value is a verbatim substring of its example's text.
// - A slot name that occurs twice in one utterance keeps its first value (Example holds one value
//   per name).
// - lang is "en", except for xSID, whose language comes from the file name (zh.valid.conll ->
//   "zh", en.valid.conll -> the parallel English, "en").
// - Any malformed input (bad CSV quoting, invalid JSON or UTF-8, a missing field, a span outside
//   its text, an unknown BIO tag...) throws FileError "PATH:LINE: what is wrong".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "data/example.h"

namespace shrike::data {

enum class DatasetFormat {
  Banking77,  // CSV "text,category"
  Clinc150,   // data_full.json-style object of [text, intent] lists; needs a split
  Snips,      // {"<Intent>": [{"data": [{"text"}, {"text", "entity"}, ...]}]}; file or folder
  Nlupp,      // fold JSON lists of {text, intents, slots}; file or folder
  Hint3,      // CSV "sentence,label" (one bot's file)
  Bitext,     // Bitext CSV: instruction, intent, entity code-point span (a Python slice: an
              // end past the text is clamped; a trailing ", " it takes in is trimmed)
  Xsid,       // CoNLL-like: "# text", "# intent" and token lines with BIO slot tags
};

// "banking77", "clinc150", "snips", "nlupp", "hint3", "bitext" or "xsid"; throws
// std::invalid_argument naming the accepted names otherwise.
DatasetFormat parse_dataset_format(std::string_view name);
const char* dataset_format_name(DatasetFormat format);

// Reads one dataset file; Snips and NLU++ also take a folder, whose *.json files (recursively,
// in path order) are read in turn. Formats whose files hold one split take no split (pass "");
// CLINC150's file holds several, so split must be "train" (keys train + oos_train), "val" or
// "dev" (val + oos_val), or "all" (every key, in file order). Multi-label NLU++ intents become
// their sorted labels joined by "+" ("affirm+card"); an utterance with no intent gets "none".
// Throws FileError for unreadable or malformed files and std::invalid_argument for a split the
// format does not have.
std::vector<Example> import_dataset(DatasetFormat format, const std::string& path,
                                    std::string_view split = {});

// A user's own labelled utterances as CSV with a header row: "text" and "intent" columns
// (required), "slots" (optional: a JSON object of slot name -> value, each value a substring of
// the text; empty for none) and "lang" (optional); other columns are ignored. Throws FileError
// "PATH:LINE: ..." for a missing column, an empty text or label, malformed slots or a slot value
// that is not in its text.
std::vector<Example> read_labelled_csv(const std::string& path);

}  // namespace shrike::data
