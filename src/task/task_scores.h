// Scores of an intent/slot model against gold examples: intent accuracy, slot precision/recall/F1
// and whole-answer exact match, overall, per language and per intent, and the commonest intent
// confusions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/example.h"
#include "task/task_format.h"

namespace shrike::task {

// The numbers for one group of examples (all of them, or one language).
//
// Slots are scored micro-averaged over exact (name, value) pairs: a predicted pair is a true
// positive when the gold example has the same name with the same value. With no predicted pairs
// precision is 1 when there are no gold pairs either (nothing was wrongly found) and 0 otherwise;
// with no gold pairs recall is 1 when nothing was predicted and 0 otherwise; F1 is 0 when
// precision + recall is 0. So an intent-only dataset scores slot F1 = 1 exactly when the model
// invents no slots.
//
// The intent counts use TaskPrediction::intent even when parsed is false (the intent recovered
// from a truncated or malformed answer); parse_failures counts those answers separately. An
// exact match needs a parsed answer with the gold intent and exactly the gold slots.
struct ScoreCounts {
  int64_t n = 0;
  int64_t intent_correct = 0;
  double intent_accuracy = 0;
  int64_t slot_true_positives = 0, slot_predicted = 0, slot_gold = 0;
  double slot_precision = 0, slot_recall = 0, slot_f1 = 0;
  int64_t exact_correct = 0;
  double exact_accuracy = 0;
  int64_t parse_failures = 0;
};

struct IntentAccuracy {
  int64_t n = 0;        // gold examples of this intent
  int64_t correct = 0;  // of which the predicted intent was right
  double accuracy = 0;
};

struct Confusion {
  std::string gold, predicted;  // predicted is "" when nothing could be read from the answer
  int64_t count = 0;
};

// Where the slot errors come from, each missed gold slot and each wrong predicted slot counted
// once, by the first kind that fits:
//   case_only   right name, the value differs only in letter case;
//   boundary    right name, one value contains the other (a word too many or too few);
//   wrong_value right name, a value that shares nothing with the gold one;
//   wrong_type  the gold value predicted under another slot name (the gold slot is missed and the
//               predicted one is wrong: one error of this kind, not a missing + a spurious);
//   missing     a gold slot with nothing predicted for it;
//   spurious    a predicted slot whose name and value are in no gold slot;
//   unparsed    gold slots of answers that could not be read (parse failures).
// not_in_utterance counts, over the wrong predicted slots, values that are not a substring of
// the utterance (the model invented or mis-copied them: what value copying prevents).
struct SlotErrorCounts {
  int64_t case_only = 0, boundary = 0, wrong_value = 0, wrong_type = 0, missing = 0, spurious = 0,
          unparsed = 0;
  int64_t not_in_utterance = 0;
};

struct TaskScores : ScoreCounts {
  SlotErrorCounts slot_errors;
  std::map<std::string, ScoreCounts> per_language;   // by Example::lang ("" when unknown)
  std::map<std::string, IntentAccuracy> per_intent;  // by gold intent
  std::vector<Confusion> confusions;  // every gold != predicted pair; by count, then names
};

// pred[i] is the model's answer for gold[i]. Throws std::invalid_argument when the sizes differ.
TaskScores score_task(const std::vector<data::Example>& gold,
                      const std::vector<TaskPrediction>& pred);

// A readable report: the overall numbers, one line per language, the top_confusions commonest
// confusions.
std::string format_scores(const TaskScores& scores, int top_confusions = 10);

// Every number of scores as one JSON object (indented), for scripts and result files.
std::string scores_json(const TaskScores& scores);

}  // namespace shrike::task
