// The API key check of `shrike serve` (--api-key): "Authorization: Bearer KEY".
#pragma once

#include <string_view>

namespace shrike::server {

// Whether `given` (what the client sent after "Bearer ") equals `key`. The time taken depends
// only on the two lengths, never on where or whether the bytes differ, so response times do not
// reveal how much of a guess was right (an early-exit compare like memcmp or == would).
bool api_key_matches(std::string_view given, std::string_view key);

}  // namespace shrike::server
