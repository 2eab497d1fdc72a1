// multipleOf for JSON numbers: the decimal numerals whose value is a multiple of a step, as an
// automaton fragment that tracks the remainder of the digits read so far modulo the step.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "constrain/nfa.h"

namespace shrike::constrain {

// A multipleOf value m / 10^decimals, m a positive integer with no factor 10 left when decimals >
// 0.
struct DecimalStep {
  uint64_t m = 1;
  int decimals = 0;
};

inline constexpr uint64_t kMaxStepDigits = 1000000;  // m at most this
inline constexpr int kMaxStepDecimals = 9;
// Numerals of a multipleOf have at most this many integer digits: 15 keeps every value (and its
// quotient by the step) exact in a double, so validators that divide in floating point agree.
inline constexpr int kMultipleIntDigits = 15;

// The step of a schema's multipleOf, read from the number as JSON writes it ("5", "0.25", "1e-3").
// Throws ConstraintError when it is not positive or needs more than kMaxStepDecimals decimals or
// more than kMaxStepDigits as an integer.
DecimalStep parse_decimal_step(const nlohmann::ordered_json& value);

// [-]I[.F] with I "0" or without leading zeros and at most int_digits digits, and, when
// `fraction` and the step has decimals, F of 1 to step.decimals digits; exactly those whose value
// is a multiple of the step. Throws ConstraintError when the automaton would be too large.
Frag decimal_multiples(Nfa& nfa, DecimalStep step, int int_digits, bool fraction);

}  // namespace shrike::constrain
