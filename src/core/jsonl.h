// JSON Lines input (one JSON object per line), shared by every reader of such files so that they
// all skip blank lines and report a bad line the same way: "NAME:LINE: what is wrong".
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <limits>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace shrike {

// Called with each line's object and "NAME:LINE: ", the prefix of the caller's own messages
// about that record (throw FileError(where + "...")).
using JsonlVisitor = std::function<void(const nlohmann::json& object, const std::string& where)>;

// Parses each non-blank line of `in` and calls `each`, stopping after `limit` objects. Throws
// FileError "NAME:LINE: invalid JSON (...)" or "NAME:LINE: expected a JSON object".
void for_each_jsonl_object(std::istream& in, const std::string& name, const JsonlVisitor& each,
                           int64_t limit = std::numeric_limits<int64_t>::max());
// The same over the file at `path` (named by its path); FileError "PATH: cannot open" first.
void for_each_jsonl_object_in_file(const std::string& path, const JsonlVisitor& each,
                                   int64_t limit = std::numeric_limits<int64_t>::max());

}  // namespace shrike
