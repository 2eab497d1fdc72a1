// Locating ../shared (the read-only reference data beside the checkout) from tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace shrike::testing {

// The shared/ folder: $SHRIKE_SHARED if set, else ../shared beside the source tree. Empty when
// absent.
inline std::string shared_dir() {
  if (const char* env = std::getenv("SHRIKE_SHARED")) return env;
  const auto p = std::filesystem::path(SHRIKE_SOURCE_DIR).parent_path() / "shared";
  return std::filesystem::exists(p) ? p.string() : std::string();
}

// The real vocabularies with expected token ids (reference/tokenizers).
inline std::string tokenizer_vectors_dir() {
  return shared_dir() + "/reference/tokenizers";
}

}  // namespace shrike::testing

// Skips the current test, saying why, when shared/ (or a file in it) is missing.
#define SHRIKE_REQUIRE_SHARED(relative_path)                                            \
  do {                                                                                  \
    const std::string shared__ = ::shrike::testing::shared_dir();                       \
    if (shared__.empty() || !std::filesystem::exists(shared__ + "/" + (relative_path))) \
      GTEST_SKIP() << "SKIPPED: needs ../shared/" << (relative_path)                    \
                   << " (the shared reference data is absent beside this checkout)";    \
  } while (0)
