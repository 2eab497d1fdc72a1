// The one exception type of the constraint layer: a user's regex, schema or choice list that
// cannot be compiled. The message names the problem (the unsupported feature, the position in a
// pattern, the limit exceeded); the server answers it with HTTP 400.
#pragma once

#include <stdexcept>
#include <string>

namespace shrike::constrain {

class ConstraintError : public std::invalid_argument {
 public:
  explicit ConstraintError(const std::string& what) : std::invalid_argument(what) {}
};

}  // namespace shrike::constrain
