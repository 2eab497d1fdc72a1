// The shared JSON Lines reader: blank lines skipped, line numbers counted over all lines, and
// every bad line reported as "NAME:LINE: ...".
#include "core/jsonl.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "core/file_buffer.h"

namespace shrike {
namespace {

std::string error_of(const std::string& text) {
  std::istringstream in(text);
  try {
    for_each_jsonl_object(in, "t.jsonl", [](const nlohmann::json&, const std::string&) {});
  } catch (const FileError& e) {
    return e.what();
  }
  return "";
}

TEST(Jsonl, VisitsEachObjectWithItsLine) {
  std::istringstream in("{\"a\": 1}\n\n  \r\n{\"a\": 2}\r\n");
  std::vector<std::pair<int, std::string>> seen;
  for_each_jsonl_object(in, "t.jsonl", [&](const nlohmann::json& j, const std::string& where) {
    seen.emplace_back(j["a"].get<int>(), where);
  });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], std::make_pair(1, std::string("t.jsonl:1: ")));
  EXPECT_EQ(seen[1], std::make_pair(2, std::string("t.jsonl:4: ")));
}

TEST(Jsonl, StopsAfterTheLimitWithoutReadingFurther) {
  std::istringstream in("{\"a\": 1}\nnot json\n");
  int n = 0;
  for_each_jsonl_object(
      in, "t.jsonl", [&](const nlohmann::json&, const std::string&) { ++n; }, 1);
  EXPECT_EQ(n, 1);
}

TEST(Jsonl, NamesTheBadLine) {
  EXPECT_EQ(error_of("{}\n{\"a\":}\n").rfind("t.jsonl:2: invalid JSON (", 0), 0u);
  EXPECT_EQ(error_of("\n[1, 2]\n"), "t.jsonl:2: expected a JSON object");
  EXPECT_EQ(error_of(""), "");
}

TEST(Jsonl, MissingFileCannotOpen) {
  try {
    for_each_jsonl_object_in_file("/nonexistent/x.jsonl",
                                  [](const nlohmann::json&, const std::string&) {});
    FAIL() << "no error";
  } catch (const FileError& e) {
    EXPECT_EQ(std::string(e.what()), "/nonexistent/x.jsonl: cannot open");
  }
}

}  // namespace
}  // namespace shrike
