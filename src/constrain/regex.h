// A hand-written regex compiler for constrained decoding: the subset users and JSON schema
// patterns need, always matched against the whole output (as if wrapped in ^...$).
//
// Supported: literals (UTF-8), escapes (\n \t \r \f \v \0 \xHH \x{H..} \uHHHH, escaped
// punctuation), classes [a-z] [^...] with escapes inside, \d \w \s (ASCII, as ECMAScript) and
// their negations, '.' (any code point but \n), groups ( ) (?: ) (?<name> ) (?P<name> ),
// alternation, ? * + {m} {m,} {m,n} (lazy forms accepted: same language), '^' at the start and
// '$' at the end (redundant under full match).
// Refused with a ConstraintError naming the feature: backreferences, lookaround, word
// boundaries, inline flags, Unicode properties, POSIX classes, possessive quantifiers, anchors
// elsewhere. Limits: 16 KiB of pattern, 256 levels of nesting, repetition counts up to 1000.
#pragma once

#include <string_view>

#include "constrain/automaton.h"
#include "constrain/nfa.h"

namespace shrike::constrain {

struct RegexOptions {
  // Inside a JSON string (a schema's "pattern"): characters JSON must escape (", \, controls)
  // are removed from every literal and class, so the match is always valid JSON string content.
  bool json_string = false;
};

// Adds the pattern's fragment to `nfa`. Throws ConstraintError "regex: ... at offset N".
Frag compile_regex(Nfa& nfa, std::string_view pattern, const RegexOptions& options = {});

// The pattern's DFA (full match).
Automaton regex_automaton(std::string_view pattern);

}  // namespace shrike::constrain
