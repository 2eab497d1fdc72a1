// JSON schema -> byte automaton, and the "any JSON object" automaton of response_format
// {"type": "json_object"}.
//
// Output is compact JSON: no whitespace between tokens (the model is never offered a space or a
// newline, which also keeps the automaton small and forces the shortest output). Object
// properties come in the schema's order, as outlines does: each may be left out unless
// "required", none may repeat, no others may appear.
//
// Supported keywords: type (one or a list), properties, required, additionalProperties (false or
// absent only), enum, const, anyOf, allOf with one member, $ref to #/$defs/... or
// #/definitions/... (not recursive), string (pattern: a regex over the raw JSON string content,
// see regex.h; format: see string_formats.h; minLength / maxLength in code points; any of these
// together hold together), integer and number (minimum, maximum, exclusiveMinimum,
// exclusiveMaximum, multipleOf: on integers exactly the integers in range within int64; on
// numbers a subset of the range, see bounded_number; multipleOf exactly, see decimal.h), boolean,
// null, array (items, minItems, maxItems), and annotations (title, description, default,
// examples, $schema, $id, $comment, deprecated, readOnly, writeOnly). Type-specific keywords
// without a "type" are refused (they would go unenforced). Beside $ref, allOf, const, enum or
// anyOf, other constraining keywords hold too (the two halves meet as an intersection). Anything
// else (recursion, patternProperties, if/then/else, oneOf, uniqueItems, ...) throws a
// ConstraintError naming the keyword and where it is. Nesting is limited to 32 levels.
//
// Values of no particular type ({} or true, an object without properties, an array without
// items) are any JSON value of bounded nesting (kAnyValueDepth), and {"type": "json_object"} is
// any object nested at most kJsonObjectDepth deep: JSON itself is not regular, but JSON of
// bounded depth is, so both are plain automata whose states encode the stack of open containers.
#pragma once

#include <nlohmann/json.hpp>

#include "constrain/automaton.h"

namespace shrike::constrain {

inline constexpr int kJsonObjectDepth = 6;
inline constexpr int kAnyValueDepth = 3;
inline constexpr int kMaxSchemaDepth = 32;
inline constexpr size_t kMaxProperties = 1000;  // per object
// Numbers are generated so that every parser can hold them: integer parts of at most 19 digits,
// exponents of at most 2 (the JSON grammar has no limit, but 1e999 overflows a double).
inline constexpr int kMaxIntegerDigits = 19;
inline constexpr int kMaxExponentDigits = 2;

// The schema as written (ordered_json keeps the properties' order).
Automaton json_schema_automaton(const nlohmann::ordered_json& schema);

// One character of JSON string content: unescaped (not ", \ or a control) or an escape (\u
// escapes of surrogates left out: a lone one is invalid, and pairs are not worth it).
Frag json_string_char(Nfa& nfa);

// Any JSON object with containers nested at most max_depth deep (the object itself is level 1).
Automaton json_object_automaton(int max_depth = kJsonObjectDepth);

}  // namespace shrike::constrain
