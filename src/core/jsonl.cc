#include "core/jsonl.h"

#include <fstream>
#include <istream>
#include <nlohmann/json.hpp>

#include "core/file_buffer.h"

namespace shrike {

void for_each_jsonl_object(std::istream& in, const std::string& name, const JsonlVisitor& each,
                           int64_t limit) {
  std::string line;
  int64_t seen = 0;
  for (int64_t line_no = 1; seen < limit && std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = name + ":" + std::to_string(line_no) + ": ";
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw FileError(where + "invalid JSON (" + e.what() + ")");
    }
    if (!j.is_object()) throw FileError(where + "expected a JSON object");
    each(j, where);
    ++seen;
  }
  if (in.bad()) throw FileError(name + ": read failed");
}

void for_each_jsonl_object_in_file(const std::string& path, const JsonlVisitor& each,
                                   int64_t limit) {
  std::ifstream in(path);
  if (!in) throw FileError(path + ": cannot open");
  for_each_jsonl_object(in, path, each, limit);
}

}  // namespace shrike
