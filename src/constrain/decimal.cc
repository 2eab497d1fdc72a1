#include "constrain/decimal.h"

#include <string>
#include <vector>

#include "constrain/error.h"

namespace shrike::constrain {
namespace {

constexpr uint64_t kMaxStates = 60000;

[[noreturn]] void bad_step(const std::string& text, const std::string& why) {
  throw ConstraintError("'multipleOf' " + text + ": " + why);
}

}  // namespace

DecimalStep parse_decimal_step(const nlohmann::ordered_json& value) {
  if (!value.is_number()) bad_step(value.dump(), "must be a number");
  const std::string text = value.dump();
  std::string digits;
  int fraction_digits = 0, exponent = 0;
  bool in_fraction = false;
  size_t i = 0;
  if (!text.empty() && text[0] == '-') bad_step(text, "must be greater than 0");
  for (; i < text.size() && text[i] != 'e' && text[i] != 'E'; ++i) {
    if (text[i] == '.') {
      in_fraction = true;
    } else {
      digits.push_back(text[i]);
      fraction_digits += in_fraction;
    }
  }
  if (i < text.size()) exponent = std::stoi(text.substr(i + 1));
  const size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) bad_step(text, "must be greater than 0");
  digits = digits.substr(first);
  int decimals = fraction_digits - exponent;
  while (decimals > 0 && digits.size() > 1 && digits.back() == '0') {
    digits.pop_back();
    --decimals;
  }
  if (decimals < 0) digits.append(size_t(-decimals), '0'), decimals = 0;
  if (decimals > kMaxStepDecimals)
    bad_step(text, "more than " + std::to_string(kMaxStepDecimals) + " decimals");
  if (digits.size() > 7 || std::stoull(digits) > kMaxStepDigits)
    bad_step(text, "its digits as an integer exceed " + std::to_string(kMaxStepDigits));
  return {std::stoull(digits), decimals};
}

Frag decimal_multiples(Nfa& nfa, DecimalStep step, int int_digits, bool fraction) {
  const uint64_t m = step.m;
  const int frac_digits = fraction ? step.decimals : 0;
  if (m * uint64_t(int_digits + frac_digits + 1) > kMaxStates)
    throw ConstraintError("'multipleOf' with " + std::to_string(m) +
                          " as its digits needs too large an automaton (at most " +
                          std::to_string(kMaxStates / uint64_t(int_digits + frac_digits + 1)) +
                          ")");
  // pow10[k] = 10^k mod m: a numeral with r as the remainder of its digits and k decimals short
  // of the step's is a multiple when r * 10^k == 0 (mod m).
  std::vector<uint64_t> pow10(size_t(step.decimals) + 1, 1 % m);
  for (size_t k = 1; k < pow10.size(); ++k) pow10[k] = pow10[k - 1] * 10 % m;
  auto multiple = [&](uint64_t r, int short_by) { return r * pow10[size_t(short_by)] % m == 0; };

  const int32_t in = nfa.add_state(), magnitude = nfa.add_state(), out = nfa.add_state();
  nfa.add_eps(in, magnitude);
  nfa.add_edge(in, '-', '-', magnitude);
  // Integer digits: level k (1..int_digits) holds one state per remainder, made when reached.
  std::vector<std::vector<int32_t>> integer(size_t(int_digits) + 1, std::vector<int32_t>(m, -1));
  std::vector<std::vector<int32_t>> frac(size_t(frac_digits) + 1, std::vector<int32_t>(m, -1));
  auto frac_state = [&](int f, uint64_t r) {
    int32_t& s = frac[size_t(f)][r];
    if (s < 0) {
      s = nfa.add_state();
      if (f > 0 && multiple(r, step.decimals - f)) nfa.add_eps(s, out);
    }
    return s;
  };
  // A complete integer part with remainder r: accepts as is, or takes a fraction.
  auto end_of_integer = [&](int32_t s, uint64_t r) {
    if (multiple(r, step.decimals)) nfa.add_eps(s, out);
    if (frac_digits > 0) nfa.add_edge(s, '.', '.', frac_state(0, r));
  };
  const int32_t zero = nfa.add_state();
  nfa.add_edge(magnitude, '0', '0', zero);
  end_of_integer(zero, 0);
  for (uint8_t d = 1; d <= 9; ++d) {
    int32_t& s = integer[1][d % m];
    if (s < 0) s = nfa.add_state();
    nfa.add_edge(magnitude, uint8_t('0' + d), uint8_t('0' + d), s);
  }
  for (int k = 1; k <= int_digits; ++k)
    for (uint64_t r = 0; r < m; ++r) {
      const int32_t s = integer[size_t(k)][r];
      if (s < 0) continue;
      end_of_integer(s, r);
      if (k == int_digits) continue;
      for (uint8_t d = 0; d <= 9; ++d) {
        int32_t& t = integer[size_t(k) + 1][(r * 10 + d) % m];
        if (t < 0) t = nfa.add_state();
        nfa.add_edge(s, uint8_t('0' + d), uint8_t('0' + d), t);
      }
    }
  for (int f = 0; f < frac_digits; ++f)
    for (uint64_t r = 0; r < m; ++r) {
      const int32_t s = frac[size_t(f)][r];
      if (s < 0) continue;
      for (uint8_t d = 0; d <= 9; ++d)
        nfa.add_edge(s, uint8_t('0' + d), uint8_t('0' + d), frac_state(f + 1, (r * 10 + d) % m));
    }
  return {in, out};
}

}  // namespace shrike::constrain
