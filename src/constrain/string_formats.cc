#include "constrain/string_formats.h"

#include <array>
#include <utility>

namespace shrike::constrain {
namespace {

// Month-day pairs that exist in every year.
const std::string kMonthDay =
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|"
    "02-(?:0[1-9]|1[0-9]|2[0-8]))";
const std::string kDate = "[0-9]{4}-" + kMonthDay;
const std::string kTime =
    "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,9})?"
    "(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
// 62 characters, not DNS's 63: four labels and their dots stay within 253.
const std::string kLabel = "[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,60}[a-zA-Z0-9])?";
const std::string kHex4 = "[0-9a-fA-F]{1,4}";

std::string ipv6() {
  // Eight groups, or n groups, "::", then m groups with n + m <= 7 (n or m may be 0).
  std::string alts = "(?:" + kHex4 + ":){7}" + kHex4;
  for (int n = 0; n <= 7; ++n) {
    const int m_max = 7 - n;
    std::string left = n == 0 ? "" : "(?:" + kHex4 + ":){" + std::to_string(n - 1) + "}" + kHex4;
    std::string right =
        m_max == 0 ? ""
                   : "(?:" + kHex4 + "(?::" + kHex4 + "){0," + std::to_string(m_max - 1) + "})?";
    alts += "|" + left + "::" + right;
  }
  return "(?:" + alts + ")";
}

std::string duration() {
  const std::string n = "[0-9]{1,9}";
  // Date part: Y, M, D in order, any subset but empty; time part: T then H, M, S likewise.
  const std::string date =
      "(?:" + n + "Y(?:" + n + "M)?(?:" + n + "D)?|" + n + "M(?:" + n + "D)?|" + n + "D)";
  const std::string time =
      "T(?:" + n + "H(?:" + n + "M)?(?:" + n + "S)?|" + n + "M(?:" + n + "S)?|" + n + "S)";
  return "P(?:" + date + "(?:" + time + ")?|" + time + "|" + n + "W)";
}

const std::array<std::pair<const char*, std::string>, 9>& formats() {
  static const std::array<std::pair<const char*, std::string>, 9> k{{
      {"date-time", kDate + "T" + kTime},
      {"date", kDate},
      {"time", kTime},
      {"duration", duration()},
      {"email",
       "[a-zA-Z0-9_+-]{1,32}(?:\\.[a-zA-Z0-9_+-]{1,15}){0,2}@(?:" + kLabel + "\\.){1,3}" + kLabel},
      {"hostname", kLabel + "(?:\\." + kLabel + "){0,3}"},
      {"ipv4",
       "(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}"
       "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"},
      {"ipv6", ipv6()},
      {"uuid", "[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}"},
  }};
  return k;
}

}  // namespace

std::optional<std::string> string_format_regex(std::string_view format) {
  for (const auto& [name, regex] : formats())
    if (format == name) return regex;
  return std::nullopt;
}

std::string supported_string_formats() {
  std::string out;
  for (const auto& [name, regex] : formats()) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

}  // namespace shrike::constrain
