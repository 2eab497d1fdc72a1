#include "server/api_key.h"

#include <cstddef>
#include <cstdint>

namespace shrike::server {

bool api_key_matches(std::string_view given, std::string_view key) {
  // Every byte of the key is visited and the differences OR-ed together; the only branch is on
  // the client's own length. The volatile accumulator keeps the compiler from turning the loop
  // into an early exit once a difference is seen.
  volatile uint8_t diff = given.size() == key.size() ? 0 : 1;
  for (size_t i = 0; i < key.size(); ++i) {
    const uint8_t g = i < given.size() ? uint8_t(given[i]) : 0;
    diff = uint8_t(diff | (g ^ uint8_t(key[i])));
  }
  return diff == 0;
}

}  // namespace shrike::server
