// The string formats of OpenAI's structured outputs ("format": date-time, date, time, duration,
// email, hostname, ipv4, ipv6, uuid) as regexes over a JSON string's content.
//
// Each is a subset of what a validator accepts (Ajv's ajv-formats in its "full" mode, and the
// RFCs behind it), never a superset: a constrained answer must validate, while a model can still
// write every common form. What is left out, and why:
// - date: 29 February (valid only in leap years; a regex tracking leap years is not worth it);
// - time: a time zone is always written (RFC 3339's full-time requires one), leap second 60 never;
// - email: local parts of letters, digits and . _ + - (no quoted or exotic forms), at most 64
//   characters; domains as hostname but with at least two labels;
// - hostname: at most 4 labels of at most 62 characters, so never past 253 characters;
// - ipv6: the eight-group form and the common :: compressions with groups on either side;
// - duration: at most 9 digits a component (so it fits a 32-bit integer), weeks alone.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace shrike::constrain {

// The format's regex (for compile_regex with json_string), or nullopt when it is not one of the
// formats above.
std::optional<std::string> string_format_regex(std::string_view format);

// "date-time, date, time, ...": for error messages.
std::string supported_string_formats();

}  // namespace shrike::constrain
