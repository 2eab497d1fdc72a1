// Slot-value swapping: training copies of labelled utterances whose slot values are replaced, in
// the text and in the slots alike, by other values. A small model trained from scratch on a few
// thousand utterances otherwise memorises which values go with which sentences and writes a
// remembered value instead of the one in front of it (SNIPS: 928 of 1,020 wrong slot values
// were not in the utterance at all). With the value changed and the sentence kept, the only way
// to the right answer is to copy the span, and the only way to the right slot name is the
// context around it.
#pragma once

#include <cstdint>
#include <vector>

#include "data/example.h"

namespace shrike::data {

struct ValueSwapOptions {
  // Swapped copies per example (0: none). Each copy draws new values.
  int64_t copies = 0;
  // Of the new values, this fraction are words drawn at random from all utterances (as many words
  // as the value had), the rest are values of the same slot name from other examples. Random
  // words are values the model cannot have seen under that name: it must copy them.
  double random_word_fraction = 0.5;
  uint64_t seed = 1;
};

// Returns the swapped copies only (copies x the examples that can be swapped, in input order).
// An example can be swapped when it has slots and every value occurs in its text without
// overlapping another value's first occurrence; each value's first occurrence is replaced.
// Deterministic: the same examples and options give the same copies.
std::vector<Example> swap_slot_values(const std::vector<Example>& examples,
                                      const ValueSwapOptions& opt);

}  // namespace shrike::data
