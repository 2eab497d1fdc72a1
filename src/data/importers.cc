#include "data/importers.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "core/file_buffer.h"

namespace shrike::data {
namespace {

using Json = nlohmann::ordered_json;  // keeps the file's key order (CLINC150's splits, SNIPS)

// ---- text helpers --------------------------------------------------------------------------

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

int64_t line_at(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + std::count(text.begin(), text.begin() + std::ptrdiff_t(offset), '\n');
}

std::string at(const std::string& path, int64_t line) {
  return path + ":" + std::to_string(line) + ": ";
}

// The offset of the first byte that is not part of well-formed UTF-8 (no overlongs, surrogates
// or code points past U+10FFFF), or npos.
size_t invalid_utf8_at(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = uint8_t(s[i]);
    size_t len = 0;
    uint32_t cp = 0, min = 0;
    if (b < 0x80) {
      ++i;
      continue;
    } else if ((b & 0xE0) == 0xC0) {
      len = 2, cp = b & 0x1Fu, min = 0x80;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3, cp = b & 0x0Fu, min = 0x800;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4, cp = b & 0x07u, min = 0x10000;
    } else {
      return i;
    }
    if (i + len > s.size()) return i;
    for (size_t k = 1; k < len; ++k) {
      const auto c = uint8_t(s[i + k]);
      if ((c & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (c & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

// The byte offset of code point number `index` of valid UTF-8 s (s.size() for index == count),
// or npos when s has fewer code points. Upstream spans are Python string indices.
size_t code_point_offset(std::string_view s, int64_t index) {
  if (index < 0) return std::string_view::npos;
  size_t i = 0;
  for (int64_t k = 0; k < index; ++k) {
    if (i >= s.size()) return std::string_view::npos;
    ++i;
    while (i < s.size() && (uint8_t(s[i]) & 0xC0) == 0x80) ++i;
  }
  return i;
}

std::string read_file(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw FileError(path + ": is a folder, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw FileError(path + ": read failed");
  std::string text = ss.str();
  if (text.starts_with("\xEF\xBB\xBF")) text.erase(0, 3);  // a UTF-8 byte order mark
  return text;
}

// Reads a file that must be UTF-8 throughout (CSV, CoNLL; JSON is checked by its parser).
std::string read_utf8_file(const std::string& path) {
  std::string text = read_file(path);
  if (const size_t bad = invalid_utf8_at(text); bad != std::string_view::npos)
    throw FileError(at(path, line_at(text, bad)) + "invalid UTF-8");
  return text;
}

// The files a Snips or NLU++ path names: itself, or a folder's *.json files in path order.
std::vector<std::string> json_files(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return {path};
  std::vector<std::string> files;
  std::filesystem::recursive_directory_iterator it(path, ec), end;
  if (ec) throw FileError(path + ": cannot list the folder: " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) throw FileError(path + ": cannot list the folder: " + ec.message());
    if (it->is_regular_file(ec) && it->path().extension() == ".json")
      files.push_back(it->path().string());
  }
  if (files.empty()) throw FileError(path + ": no .json files in this folder");
  std::sort(files.begin(), files.end());
  return files;
}

// ---- building examples ---------------------------------------------------------------------

// Adds a slot unless the value is blank or the name already has one (the first value wins).
void add_slot(Example& ex, const std::string& name, std::string_view value) {
  value = trim(value);
  if (!value.empty()) ex.slots.emplace(name, std::string(value));
}

Example make_example(std::string_view text, std::string intent, const std::string& where) {
  Example ex;
  ex.text = std::string(trim(text));
  if (ex.text.empty()) throw FileError(where + "empty text");
  ex.intent = std::string(trim(intent));
  if (ex.intent.empty()) throw FileError(where + "empty intent label");
  ex.lang = "en";
  return ex;
}

// ---- CSV -----------------------------------------------------------------------------------

struct CsvRow {
  int64_t line = 0;  // where the row begins
  std::vector<std::string> fields;
};

// RFC 4180 CSV: fields separated by ',', rows by LF or CRLF, fields optionally in double quotes
// (which may hold commas and line breaks; "" is a quote). Blank lines are skipped.
std::vector<CsvRow> parse_csv(std::string_view text, const std::string& path) {
  std::vector<CsvRow> rows;
  size_t i = 0;
  int64_t line = 1;
  while (i < text.size()) {
    CsvRow row;
    row.line = line;
    bool row_done = false;
    while (!row_done) {
      std::string field;
      if (i < text.size() && text[i] == '"') {
        const int64_t open_line = line;
        ++i;
        for (;;) {
          if (i >= text.size()) throw FileError(at(path, open_line) + "unterminated quoted field");
          const char c = text[i++];
          if (c == '"') {
            if (i < text.size() && text[i] == '"') {
              field += '"';
              ++i;
              continue;
            }
            break;
          }
          if (c == '\n') ++line;
          field += c;
        }
        if (i < text.size() && text[i] != ',' && text[i] != '\n' &&
            !(text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n'))
          throw FileError(at(path, line) + "unexpected character after a closing quote");
      } else {
        while (i < text.size() && text[i] != ',' && text[i] != '\n' &&
               !(text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n')) {
          if (text[i] == '"') throw FileError(at(path, line) + "quote inside an unquoted field");
          field += text[i++];
        }
      }
      row.fields.push_back(std::move(field));
      if (i >= text.size()) {
        row_done = true;
      } else if (text[i] == ',') {
        ++i;
      } else {  // LF or CRLF
        i += text[i] == '\r' ? 2 : 1;
        ++line;
        row_done = true;
      }
    }
    if (row.fields.size() == 1 && row.fields[0].empty()) continue;  // a blank line
    rows.push_back(std::move(row));
  }
  return rows;
}

// A CSV file with a header row; column() finds a column by name, field() reads it from a row.
class CsvTable {
 public:
  explicit CsvTable(const std::string& path)
      : path_(path), rows_(parse_csv(read_utf8_file(path), path)) {
    if (rows_.empty()) throw FileError(path + ": empty file (expected a header row)");
  }

  size_t column(const std::string& name) const {
    if (const size_t c = find_column(name); c != npos) return c;
    throw FileError(at(path_, rows_[0].line) + "the header has no column \"" + name + "\"");
  }
  static constexpr size_t npos = size_t(-1);
  size_t find_column(const std::string& name) const {  // npos when absent
    const auto& header = rows_[0].fields;
    for (size_t c = 0; c < header.size(); ++c)
      if (trim(header[c]) == name) return c;
    return npos;
  }

  size_t n_rows() const { return rows_.size() - 1; }
  int64_t line(size_t row) const { return rows_[row + 1].line; }
  std::string where(size_t row) const { return at(path_, line(row)); }

  const std::string& field(size_t row, size_t col) const {
    const CsvRow& r = rows_[row + 1];
    if (col >= r.fields.size())
      throw FileError(where(row) + "expected at least " + std::to_string(col + 1) +
                      " fields, found " + std::to_string(r.fields.size()));
    return r.fields[col];
  }

 private:
  std::string path_;
  std::vector<CsvRow> rows_;
};

// Banking77 ("text,category") and HINT3 ("sentence,label"): a text and a label per row.
std::vector<Example> import_labelled_csv(const std::string& path, const char* text_column,
                                         const char* label_column) {
  const CsvTable table(path);
  const size_t text_col = table.column(text_column), label_col = table.column(label_column);
  std::vector<Example> out;
  for (size_t r = 0; r < table.n_rows(); ++r)
    out.push_back(
        make_example(table.field(r, text_col), table.field(r, label_col), table.where(r)));
  return out;
}

}  // namespace

std::vector<Example> read_labelled_csv(const std::string& path) {
  const CsvTable table(path);
  const size_t text_col = table.column("text"), intent_col = table.column("intent");
  const size_t slots_col = table.find_column("slots"), lang_col = table.find_column("lang");
  std::vector<Example> out;
  for (size_t r = 0; r < table.n_rows(); ++r) {
    const std::string where = table.where(r);
    Example ex = make_example(table.field(r, text_col), table.field(r, intent_col), where);
    ex.lang = lang_col == CsvTable::npos ? "" : std::string(trim(table.field(r, lang_col)));
    const std::string_view slots =
        slots_col == CsvTable::npos ? std::string_view() : trim(table.field(r, slots_col));
    if (!slots.empty()) {
      const nlohmann::json j = nlohmann::json::parse(slots, nullptr, false);
      if (!j.is_object())
        throw FileError(where +
                        "\"slots\" must be a JSON object of strings, e.g. "
                        "{\"\"order_id\"\": \"\"A12\"\"} (quotes doubled inside a CSV field)");
      for (const auto& [name, value] : j.items()) {
        if (!value.is_string())
          throw FileError(where + "slot \"" + name + "\" must have a string value");
        const std::string v(trim(value.get<std::string>()));
        if (v.empty()) continue;
        if (ex.text.find(v) == std::string::npos)
          throw FileError(where + "slot \"" + name + "\" value \"" + v +
                          "\" does not occur in the text");
        ex.slots[name] = v;
      }
    }
    out.push_back(std::move(ex));
  }
  if (out.empty()) throw FileError(path + ": no rows after the header");
  return out;
}

namespace {

int64_t parse_offset(const std::string& s, const std::string& where, const char* what) {
  const std::string_view v = trim(s);
  int64_t x = -1;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() || x < 0)
    throw FileError(where + what + " \"" + s + "\" is not a non-negative integer");
  return x;
}

// Bitext: the utterance is "instruction"; one optional entity, given by its code-point span
// (entity_value is a normalised, sometimes wrong, copy and is not used). Spans are read as Python
// slices, which is how upstream made them: an end past the text is clamped (some order-id and
// amount spans overshoot by two), and the ", " an overshooting span takes in inside the text is
// trimmed with the whitespace (no entity type here ends in , ; : ! or ?).
std::vector<Example> import_bitext(const std::string& path) {
  const CsvTable table(path);
  const size_t text_col = table.column("instruction"), intent_col = table.column("intent"),
               type_col = table.column("entity_type"), start_col = table.column("start_offset"),
               end_col = table.column("end_offset");
  std::vector<Example> out;
  for (size_t r = 0; r < table.n_rows(); ++r) {
    const std::string where = table.where(r);
    const std::string& text = table.field(r, text_col);
    Example ex = make_example(text, table.field(r, intent_col), where);
    const std::string type(trim(table.field(r, type_col)));
    if (!type.empty()) {
      const int64_t start = parse_offset(table.field(r, start_col), where, "start_offset");
      const int64_t end = parse_offset(table.field(r, end_col), where, "end_offset");
      const size_t b = code_point_offset(text, start);
      size_t e = code_point_offset(text, end);
      if (e == std::string_view::npos) e = text.size();
      if (start >= end || b == std::string_view::npos || b >= e)
        throw FileError(where + "entity span [" + std::to_string(start) + ", " +
                        std::to_string(end) + ") selects nothing of the instruction");
      std::string_view value = trim(std::string_view(text).substr(b, e - b));
      while (!value.empty() &&
             std::string_view(",;:!?").find(value.back()) != std::string_view::npos)
        value = trim(value.substr(0, value.size() - 1));
      add_slot(ex, type, value);
    }
    out.push_back(std::move(ex));
  }
  return out;
}

// ---- JSON ----------------------------------------------------------------------------------

Json parse_json_file(const std::string& path, std::string& text) {
  text = read_file(path);
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw FileError(at(path, line_at(text, e.byte > 0 ? e.byte - 1 : 0)) + "invalid JSON (" +
                    e.what() + ")");
  } catch (const nlohmann::json::exception& e) {
    // Not a syntax error but still unreadable: a number too large for a double (out_of_range),
    // found by fuzz/task_data. nlohmann gives no position for these.
    throw FileError(path + ": invalid JSON (" + e.what() + ")");
  }
}

// The line on which each element of the arrays at nesting depth `depth` begins, in document
// order (depth 1: the items of a top-level array; 2: the items of arrays inside the top-level
// object or array). nlohmann keeps no positions, so errors about an item find its line here.
std::vector<int64_t> array_item_lines(std::string_view text, size_t depth) {
  std::vector<int64_t> lines;
  std::vector<char> stack;
  bool in_string = false, escaped = false, expect_item = false;
  int64_t line = 1;
  for (const char c : text) {
    if (c == '\n') ++line;
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (is_space(c)) continue;
    if (expect_item && c != ']') lines.push_back(line);
    expect_item = false;
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      stack.push_back(c);
      expect_item = c == '[' && stack.size() == depth;
    } else if (c == '}' || c == ']') {
      if (!stack.empty()) stack.pop_back();
    } else if (c == ',') {
      expect_item = !stack.empty() && stack.back() == '[' && stack.size() == depth;
    }
  }
  return lines;
}

std::string item_at(const std::string& path, const std::vector<int64_t>& lines, size_t k) {
  return k < lines.size() ? at(path, lines[k]) : path + ": item " + std::to_string(k) + ": ";
}

const std::string& string_field(const Json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end()) throw FileError(where + "missing \"" + key + "\"");
  if (!it->is_string()) throw FileError(where + "\"" + key + "\" must be a string");
  return it->get_ref<const std::string&>();
}

std::vector<Example> import_clinc150(const std::string& path, std::string_view split) {
  std::vector<std::string> keys;
  if (split == "train")
    keys = {"train", "oos_train"};
  else if (split == "val" || split == "dev")
    keys = {"val", "oos_val"};
  else if (split != "all")
    throw std::invalid_argument(
        "clinc150 files hold several splits: choose train, val (or dev) or all (--split)" +
        (split.empty() ? std::string() : ", not \"" + std::string(split) + "\""));
  std::string text;
  const Json j = parse_json_file(path, text);
  if (!j.is_object()) throw FileError(path + ": expected a JSON object of splits");
  if (split == "all")
    for (const auto& [key, value] : j.items()) keys.push_back(key);
  const std::vector<int64_t> lines = array_item_lines(text, 2);
  // Item k of the whole file (for its line) counts the items of every array before it.
  std::map<std::string, size_t> first_item;
  size_t count = 0;
  for (const auto& [key, value] : j.items()) {
    if (!value.is_array()) throw FileError(path + ": \"" + key + "\" must be a list");
    first_item[key] = count;
    count += value.size();
  }
  std::vector<Example> out;
  for (const std::string& key : keys) {
    const auto it = j.find(key);
    if (it == j.end())
      throw FileError(path + ": no \"" + key + "\" list (split " + std::string(split) + ")");
    for (size_t k = 0; k < it->size(); ++k) {
      const Json& item = (*it)[k];
      const std::string where = item_at(path, lines, first_item[key] + k);
      if (!item.is_array() || item.size() != 2 || !item[0].is_string() || !item[1].is_string())
        throw FileError(where + "expected a [text, intent] pair of strings");
      out.push_back(
          make_example(item[0].get_ref<const std::string&>(), item[1].get<std::string>(), where));
    }
  }
  return out;
}

void import_snips_file(const std::string& path, std::vector<Example>& out) {
  std::string text;
  const Json j = parse_json_file(path, text);
  if (!j.is_object()) throw FileError(path + ": expected a JSON object {\"<Intent>\": [...]}");
  const std::vector<int64_t> lines = array_item_lines(text, 2);
  size_t k = 0;
  for (const auto& [intent, utterances] : j.items()) {
    if (!utterances.is_array()) throw FileError(path + ": \"" + intent + "\" must be a list");
    for (const Json& u : utterances) {
      const std::string where = item_at(path, lines, k++);
      const auto data = u.is_object() ? u.find("data") : u.end();
      if (!u.is_object() || data == u.end() || !data->is_array())
        throw FileError(where + "expected an object with a \"data\" list");
      std::string utterance;
      std::vector<std::pair<std::string, std::string>> entities;
      for (const Json& piece : *data) {
        if (!piece.is_object()) throw FileError(where + "each \"data\" piece must be an object");
        const std::string& piece_text = string_field(piece, "text", where);
        utterance += piece_text;
        if (piece.contains("entity"))
          entities.emplace_back(string_field(piece, "entity", where), piece_text);
      }
      Example ex = make_example(utterance, intent, where);
      for (const auto& [name, value] : entities) {
        if (name.empty()) throw FileError(where + "empty entity name");
        add_slot(ex, name, value);
      }
      out.push_back(std::move(ex));
    }
  }
}

void import_nlupp_file(const std::string& path, std::vector<Example>& out) {
  std::string text;
  const Json j = parse_json_file(path, text);
  if (!j.is_array()) throw FileError(path + ": expected a JSON list of examples");
  const std::vector<int64_t> lines = array_item_lines(text, 1);
  for (size_t k = 0; k < j.size(); ++k) {
    const Json& item = j[k];
    const std::string where = item_at(path, lines, k);
    if (!item.is_object()) throw FileError(where + "expected an object");
    const std::string& utterance = string_field(item, "text", where);
    std::vector<std::string> labels;
    if (const auto it = item.find("intents"); it != item.end() && !it->is_null()) {
      if (!it->is_array()) throw FileError(where + "\"intents\" must be a list of strings");
      for (const Json& label : *it) {
        if (!label.is_string() || trim(label.get_ref<const std::string&>()).empty())
          throw FileError(where + "\"intents\" must be a list of non-empty strings");
        labels.emplace_back(trim(label.get_ref<const std::string&>()));
      }
    }
    std::sort(labels.begin(), labels.end());
    labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
    std::string intent;
    for (const std::string& label : labels) intent += (intent.empty() ? "" : "+") + label;
    Example ex = make_example(utterance, labels.empty() ? "none" : intent, where);
    if (const auto it = item.find("slots"); it != item.end() && !it->is_null()) {
      if (!it->is_object()) throw FileError(where + "\"slots\" must be an object");
      for (const auto& [name, slot] : it->items()) {
        const std::string slot_where = where + "slot \"" + name + "\": ";
        if (!slot.is_object()) throw FileError(slot_where + "expected an object");
        const std::string& value = string_field(slot, "text", slot_where);
        if (const auto span = slot.find("span"); span != slot.end()) {
          const bool pair = span->is_array() && span->size() == 2 &&
                            (*span)[0].is_number_integer() && (*span)[1].is_number_integer();
          const int64_t s = pair ? (*span)[0].get<int64_t>() : -1;
          const int64_t e = pair ? (*span)[1].get<int64_t>() : -1;
          const size_t b = code_point_offset(utterance, s), end = code_point_offset(utterance, e);
          if (!pair || s < 0 || s > e || end == std::string_view::npos ||
              std::string_view(utterance).substr(b, end - b) != value)
            throw FileError(slot_where + "\"span\" does not select \"" + value + "\" in the text");
        } else if (utterance.find(value) == std::string::npos) {
          throw FileError(slot_where + "\"" + value + "\" is not in the text");
        }
        add_slot(ex, name, value);
      }
    }
    out.push_back(std::move(ex));
  }
}

// ---- xSID CoNLL ----------------------------------------------------------------------------

// "zh" from ".../zh.valid.conll" (xSID names files <lang>.<split>.conll); "" when the name does
// not start with a language code.
std::string xsid_language(const std::string& path) {
  const std::string name = std::filesystem::path(path).filename().string();
  const std::string code = name.substr(0, name.find('.'));
  const size_t letters = code.find_first_not_of("abcdefghijklmnopqrstuvwxyz");
  const size_t n_letters = letters == std::string::npos ? code.size() : letters;
  const bool ok = (n_letters == 2 || n_letters == 3) &&
                  (letters == std::string::npos ||
                   (code[letters] == '-' && letters + 1 < code.size() &&
                    code.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789", letters + 1) ==
                        std::string::npos));
  return ok && name.find('.') != std::string::npos ? code : "";
}

struct XsidToken {
  int64_t line;
  std::string token, intent, tag;
};

struct XsidBlock {
  int64_t first_line = 0;
  int64_t text_line = 0;
  std::string text, intent;
  std::vector<XsidToken> tokens;
};

Example xsid_example(const XsidBlock& block, const std::string& path, const std::string& lang) {
  const std::string where = at(path, block.first_line);
  if (block.text_line == 0) throw FileError(where + "utterance without a \"# text = \" line");
  if (block.tokens.empty()) throw FileError(where + "utterance without token lines");
  const std::string intent = block.intent.empty() ? block.tokens[0].intent : block.intent;
  Example ex = make_example(block.text, intent, where);
  ex.lang = lang;
  // Each token continues the text after optional whitespace; a slot's value is the text from its
  // first token's start to its last token's end (so Chinese values have no inserted spaces).
  const std::string& text = block.text;
  size_t pos = 0;
  std::string open_type;
  size_t open_begin = 0, open_end = 0;
  auto close = [&] {
    if (!open_type.empty())
      add_slot(ex, open_type, std::string_view(text).substr(open_begin, open_end - open_begin));
    open_type.clear();
  };
  for (const XsidToken& t : block.tokens) {
    const std::string tw = at(path, t.line);
    if (t.intent != intent)
      throw FileError(tw + "token intent \"" + t.intent + "\" differs from the utterance's \"" +
                      intent + "\"");
    while (pos < text.size() && is_space(text[pos])) ++pos;
    // (An empty token, which zh.valid has once, takes up no text.)
    if (text.compare(pos, t.token.size(), t.token) != 0)
      throw FileError(tw + "token \"" + t.token + "\" does not continue the \"# text\" line");
    const size_t begin = pos, end = pos + t.token.size();
    pos = end;
    if (t.tag == "O") {
      close();
    } else if ((t.tag.starts_with("B-") || t.tag.starts_with("I-")) && t.tag.size() > 2) {
      const std::string type = t.tag.substr(2);
      // An I- tag continues the open slot of its type; one that follows O or another type
      // starts a slot, as in IOB1.
      if (t.tag[0] == 'I' && type == open_type) {
        open_end = end;
      } else {
        close();
        open_type = type, open_begin = begin, open_end = end;
      }
    } else {
      throw FileError(tw + "unknown slot tag \"" + t.tag + "\" (expected O, B-type or I-type)");
    }
  }
  close();
  return ex;
}

std::vector<Example> import_xsid(const std::string& path) {
  const std::string content = read_utf8_file(path);
  const std::string lang = xsid_language(path);
  std::vector<Example> out;
  XsidBlock block;
  auto finish = [&] {
    if (block.first_line != 0) out.push_back(xsid_example(block, path, lang));
    block = XsidBlock();
  };
  std::istringstream in(content);
  std::string line;
  for (int64_t line_no = 1; std::getline(in, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (trim(line).empty()) {
      finish();
      continue;
    }
    if (block.first_line == 0) block.first_line = line_no;
    if (line[0] == '#') {
      // "# key = value"; other comments (# slots: ..., # text-en = ...) carry nothing needed.
      const std::string_view body(line.data() + 1, line.size() - 1);
      const size_t eq = body.find('=');
      if (eq == std::string_view::npos) continue;
      const std::string_view key = trim(body.substr(0, eq)), value = trim(body.substr(eq + 1));
      if (key == "text") {
        if (block.text_line != 0)
          throw FileError(at(path, line_no) +
                          "a second \"# text\" line (is a blank line missing between utterances?)");
        block.text = std::string(value), block.text_line = line_no;
      } else if (key == "intent") {
        block.intent = std::string(value);
      }
      continue;
    }
    std::vector<std::string> cols;
    for (size_t start = 0;;) {
      const size_t tab = line.find('\t', start);
      cols.push_back(line.substr(start, tab == std::string::npos ? tab : tab - start));
      if (tab == std::string::npos) break;
      start = tab + 1;
    }
    if (cols.size() < 4)
      throw FileError(at(path, line_no) + "expected 4 tab-separated columns (index, token, " +
                      "intent, slot tag), found " + std::to_string(cols.size()));
    block.tokens.push_back(
        {line_no, cols[1], std::string(trim(cols[2])), std::string(trim(cols[3]))});
  }
  finish();
  return out;
}

}  // namespace

DatasetFormat parse_dataset_format(std::string_view name) {
  static const std::pair<std::string_view, DatasetFormat> kNames[] = {
      {"banking77", DatasetFormat::Banking77},
      {"clinc150", DatasetFormat::Clinc150},
      {"snips", DatasetFormat::Snips},
      {"nlupp", DatasetFormat::Nlupp},
      {"hint3", DatasetFormat::Hint3},
      {"bitext", DatasetFormat::Bitext},
      {"xsid", DatasetFormat::Xsid}};
  for (const auto& [n, f] : kNames)
    if (n == name) return f;
  throw std::invalid_argument("unknown dataset format \"" + std::string(name) +
                              "\" (expected banking77, clinc150, snips, nlupp, hint3, bitext or "
                              "xsid)");
}

const char* dataset_format_name(DatasetFormat format) {
  switch (format) {
    case DatasetFormat::Banking77:
      return "banking77";
    case DatasetFormat::Clinc150:
      return "clinc150";
    case DatasetFormat::Snips:
      return "snips";
    case DatasetFormat::Nlupp:
      return "nlupp";
    case DatasetFormat::Hint3:
      return "hint3";
    case DatasetFormat::Bitext:
      return "bitext";
    case DatasetFormat::Xsid:
      return "xsid";
  }
  return "?";
}

std::vector<Example> import_dataset(DatasetFormat format, const std::string& path,
                                    std::string_view split) {
  if (format == DatasetFormat::Clinc150) return import_clinc150(path, split);
  if (!split.empty())
    throw std::invalid_argument(std::string(dataset_format_name(format)) +
                                " files hold one split each; pass no split (got \"" +
                                std::string(split) + "\")");
  std::vector<Example> out;
  switch (format) {
    case DatasetFormat::Banking77:
      return import_labelled_csv(path, "text", "category");
    case DatasetFormat::Hint3:
      return import_labelled_csv(path, "sentence", "label");
    case DatasetFormat::Bitext:
      return import_bitext(path);
    case DatasetFormat::Xsid:
      return import_xsid(path);
    case DatasetFormat::Snips:
      for (const std::string& file : json_files(path)) import_snips_file(file, out);
      return out;
    case DatasetFormat::Nlupp:
      for (const std::string& file : json_files(path)) import_nlupp_file(file, out);
      return out;
    case DatasetFormat::Clinc150:
      break;
  }
  return out;
}

}  // namespace shrike::data
