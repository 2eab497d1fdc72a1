#include "data/example.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

#include "core/file_buffer.h"
#include "core/jsonl.h"

namespace shrike::data {

std::vector<Example> read_examples(const std::string& path) {
  std::vector<Example> out;
  for_each_jsonl_object_in_file(path, [&](const nlohmann::json& j, const std::string& where) {
    Example ex;
    auto need_string = [&](const char* key, std::string& dst, bool required) {
      const auto it = j.find(key);
      if (it == j.end()) {
        if (required) throw FileError(where + "missing \"" + key + "\"");
        return;
      }
      if (!it->is_string()) throw FileError(where + "\"" + key + "\" must be a string");
      dst = it->get<std::string>();
    };
    need_string("text", ex.text, true);
    need_string("intent", ex.intent, true);
    need_string("lang", ex.lang, false);
    if (const auto it = j.find("slots"); it != j.end() && !it->is_null()) {
      if (!it->is_object()) throw FileError(where + "\"slots\" must be an object");
      for (const auto& [name, value] : it->items()) {
        if (!value.is_string())
          throw FileError(where + "slot \"" + name + "\" must have a string value");
        ex.slots[name] = value.get<std::string>();
      }
    }
    out.push_back(std::move(ex));
  });
  return out;
}

void write_examples(const std::vector<Example>& examples, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw FileError(path + ": cannot write");
  for (const Example& ex : examples) {
    nlohmann::ordered_json j;
    j["text"] = ex.text;
    j["intent"] = ex.intent;
    j["slots"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : ex.slots) j["slots"][k] = v;
    if (!ex.lang.empty()) j["lang"] = ex.lang;
    out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  }
  if (!out) throw FileError(path + ": write failed");
}

void create_dataset_directory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw FileError(dir + ": cannot create directory" + (ec ? ": " + ec.message() : ""));
}

}  // namespace shrike::data
