#include "tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>

#include "gguf/gguf.h"
#include "tokenizer/pretokenize.h"

namespace shrike::tokenizer {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581
constexpr int64_t kMaxTokens = int64_t(1) << 22;           // as ModelConfig::validate

// ---- the pre-tokenizer families, as their tokenizer.json files write them ----

// Case-insensitive contractions: Hugging Face writes (?i:...); llama.cpp (and some re-exported
// files) spell the same thing out. Both compare equal after normalise_regex.
constexpr std::string_view kContractionsSpelled =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
constexpr std::string_view kContractionsI = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
// A pre-tokenizer step in one comparable form: "bytelevel" (use_regex false), "bytelevel+regex",
// "punctuation", or "split:REGEX" (Digits become the \p{N} / \p{N}+ splits they are).
std::string split_step(std::string_view regex) {
  std::string r(regex);
  for (size_t p; (p = r.find(kContractionsSpelled)) != std::string::npos;)
    r.replace(p, kContractionsSpelled.size(), kContractionsI);
  return "split:" + r;
}

struct Family {
  const char* pre;  // tokenizer.ggml.pre
  std::vector<std::string> steps;
};

// A family whose tokenizer.json is a Sequence of Splits (one per llama.cpp regex) and ByteLevel.
// DeepSeek's files write the line-break class with raw CR/LF characters where llama.cpp escapes
// them.
Family split_family(const char* pre, PreType type) {
  Family f{pre, {}};
  for (std::string_view r : pretokenizer_regexes(type))
    f.steps.push_back(split_step(r == "[\\r\\n]" ? "[\r\n]" : r));
  f.steps.push_back("bytelevel");
  return f;
}

const std::vector<Family>& families() {
  static const std::vector<Family> f = {
      {"gpt-2", {"bytelevel+regex"}},
      split_family("gpt-2", PreType::Gpt2),
      split_family("llama-bpe", PreType::Llama3),
      split_family("qwen2", PreType::Qwen2),
      {"starcoder", {split_step("\\p{N}"), "bytelevel+regex"}},
      {"falcon",
       {"punctuation", "bytelevel+regex", split_step("\\p{N}+"), split_step("[0-9][0-9][0-9]")}},
      split_family("deepseek-coder", PreType::DeepseekCoder),
      split_family("deepseek-llm", PreType::DeepseekLlm),
  };
  return f;
}

// ---- JSON access with errors naming the file ----

class Json {
 public:
  explicit Json(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  [[noreturn]] void fail(const std::string& what) const { throw FileError(path_ + ": " + what); }

  json parse(std::string_view text) const {
    try {
      return json::parse(text.begin(), text.end());
    } catch (const json::exception& e) {
      std::string msg = e.what();
      for (char& c : msg)
        if (c == '\n' || c == '\r') c = ' ';
      fail("not valid JSON: " + msg);
    }
  }
  const json& object(const json& parent, const char* key, const std::string& where) const {
    const json& v = field(parent, key, where);
    if (!v.is_object()) fail(where + key + " is " + v.type_name() + ", expected an object");
    return v;
  }
  const json& array(const json& parent, const char* key, const std::string& where) const {
    const json& v = field(parent, key, where);
    if (!v.is_array()) fail(where + key + " is " + v.type_name() + ", expected an array");
    return v;
  }
  std::string string(const json& parent, const char* key, const std::string& where) const {
    const json& v = field(parent, key, where);
    if (!v.is_string()) fail(where + key + " is " + v.type_name() + ", expected a string");
    return v.get<std::string>();
  }
  int64_t id(const json& v, const std::string& what) const {
    if (!v.is_number_integer()) fail(what + " is " + v.type_name() + ", expected an integer");
    if (!v.is_number_unsigned() || v.get<uint64_t>() >= uint64_t(kMaxTokens))
      fail(what + " is " + v.dump() + ", outside 0.." + std::to_string(kMaxTokens - 1));
    return int64_t(v.get<uint64_t>());
  }
  bool boolean_or(const json& parent, const char* key, bool def, const std::string& where) const {
    if (!parent.contains(key) || parent[key].is_null()) return def;
    if (!parent[key].is_boolean())
      fail(where + key + " is " + parent[key].type_name() + ", expected true or false");
    return parent[key].get<bool>();
  }
  std::string string_or(const json& parent, const char* key, const std::string& def,
                        const std::string& where) const {
    if (!parent.contains(key) || parent[key].is_null()) return def;
    return string(parent, key, where);
  }

 private:
  const json& field(const json& parent, const char* key, const std::string& where) const {
    if (!parent.is_object() || !parent.contains(key)) fail(where + key + " is missing");
    return parent[key];
  }
  std::string path_;
};

json read_json_file(const Json& j) {
  const MappedFile f = MappedFile::open(j.path());
  return j.parse(std::string_view(reinterpret_cast<const char*>(f.data()), f.size()));
}

bool is_byte_piece(const std::string& p) {
  auto hex = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f');
  };
  return p.size() == 6 && p.compare(0, 3, "<0x") == 0 && hex(p[3]) && hex(p[4]) && p[5] == '>';
}

// llama.cpp's does_token_look_special: added tokens some models forget to mark special.
bool looks_special(const std::string& t) {
  auto wrapped = [&](std::string_view open, std::string_view close) {
    return t.size() >= open.size() + close.size() && t.compare(0, open.size(), open) == 0 &&
           t.compare(t.size() - close.size(), close.size(), close) == 0;
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") || wrapped("<unused", ">");
}

// The steps of a pre_tokenizer (null, one step or a Sequence) in the form split_step describes;
// Metaspace, whitespace and BERT splitting are reported by name for the callers that accept them.
void pre_steps(const Json& j, const json& p, const std::string& where,
               std::vector<std::string>& out) {
  if (p.is_null()) return;
  if (!p.is_object()) j.fail(where + " is " + p.type_name() + ", expected an object");
  const std::string type = j.string(p, "type", where + ".");
  if (type == "Sequence") {
    const json& list = j.array(p, "pretokenizers", where + ".");
    for (size_t i = 0; i < list.size(); ++i)
      pre_steps(j, list[i], where + ".pretokenizers[" + std::to_string(i) + "]", out);
  } else if (type == "ByteLevel") {
    if (j.boolean_or(p, "add_prefix_space", true, where + "."))
      j.fail(where + ": ByteLevel with add_prefix_space is not supported");
    out.push_back(j.boolean_or(p, "use_regex", true, where + ".") ? "bytelevel+regex"
                                                                  : "bytelevel");
  } else if (type == "Split") {
    const json& pattern = j.object(p, "pattern", where + ".");
    if (!pattern.contains("Regex"))
      j.fail(where + ": Split with a plain string pattern is not supported");
    const std::string behavior = j.string_or(p, "behavior", "Isolated", where + ".");
    if (behavior != "Isolated" || j.boolean_or(p, "invert", false, where + "."))
      j.fail(where + ": Split with behavior '" + behavior + "' or invert is not supported");
    out.push_back(split_step(j.string(pattern, "Regex", where + ".pattern.")));
  } else if (type == "Digits") {
    out.push_back(split_step(j.boolean_or(p, "individual_digits", false, where + ".") ? "\\p{N}"
                                                                                      : "\\p{N}+"));
  } else if (type == "Punctuation") {
    out.push_back("punctuation");
  } else if (type == "Metaspace" || type == "BertPreTokenizer" || type == "Whitespace" ||
             type == "WhitespaceSplit") {
    out.push_back(type);
  } else {
    j.fail(where + ": pre-tokenizer type '" + type + "' is not supported");
  }
}

// What a normalizer (null, one step or a Sequence) does, for the kinds that matter here.
struct Normalizer {
  bool prepend_marker = false;     // Prepend "▁" (SentencePiece's dummy prefix)
  bool spaces_to_marker = false;   // Replace " " -> "▁"
  std::vector<std::string> other;  // every other step's type
};

void normalizer_steps(const Json& j, const json& n, const std::string& where, Normalizer& out) {
  if (n.is_null()) return;
  if (!n.is_object()) j.fail(where + " is " + n.type_name() + ", expected an object");
  const std::string type = j.string(n, "type", where + ".");
  if (type == "Sequence") {
    const json& list = j.array(n, "normalizers", where + ".");
    for (size_t i = 0; i < list.size(); ++i)
      normalizer_steps(j, list[i], where + ".normalizers[" + std::to_string(i) + "]", out);
  } else if (type == "Prepend" && n.contains("prepend") && n["prepend"] == kSpaceMarker) {
    out.prepend_marker = true;
  } else if (type == "Replace" && n.contains("content") && n["content"] == kSpaceMarker) {
    out.spaces_to_marker = true;
  } else if (type == "BertNormalizer" && !j.boolean_or(n, "lowercase", true, where + ".")) {
    j.fail(where + ": cased WordPiece (BertNormalizer without lowercase) is not supported");
  } else {
    out.other.push_back(type);
  }
}

// A special token named in tokenizer_config.json: a string, {"content": ...} or null.
std::optional<std::string> config_token(const Json& j, const json& cfg, const char* key) {
  if (!cfg.is_object() || !cfg.contains(key) || cfg[key].is_null()) return std::nullopt;
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) return j.string(v, "content", std::string(key) + ".");
  j.fail(std::string(key) + " is " + v.type_name() + ", expected a string or an object");
}

// Whether the post_processor's single-sequence template starts with bos / ends with eos;
// nullopt when it says nothing (ByteLevel, absent).
void template_specials(const Json& j, const json& pp, const std::string& where,
                       std::optional<std::string>& first, std::optional<std::string>& last,
                       bool& bert_style) {
  if (pp.is_null() || !pp.is_object()) return;
  const std::string type = j.string(pp, "type", where + ".");
  if (type == "Sequence") {
    const json& list = j.array(pp, "processors", where + ".");
    for (size_t i = 0; i < list.size(); ++i)
      template_specials(j, list[i], where + ".processors[" + std::to_string(i) + "]", first, last,
                        bert_style);
  } else if (type == "TemplateProcessing") {
    const json& single = j.array(pp, "single", where + ".");
    auto special_id = [&](const json& item) -> std::optional<std::string> {
      if (item.is_object() && item.contains("SpecialToken"))
        return j.string(item["SpecialToken"], "id", where + ".single[].SpecialToken.");
      return std::nullopt;
    };
    first = single.empty() ? std::nullopt : special_id(single.front());
    last = single.size() < 2 ? std::nullopt : special_id(single.back());
    if (!first) first = std::string();  // a template without a leading special: add nothing
    if (!last) last = std::string();
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    bert_style = true;
  }
}

std::string read_text_file(const std::string& path) {
  const MappedFile f = MappedFile::open(path);
  return std::string(reinterpret_cast<const char*>(f.data()), f.size());
}

// chat_template: a string, or a list of {"name", "template"} (the "default" one, else the first).
std::string chat_template_of(const Json& j, const json& cfg, const std::string& dir) {
  if (cfg.is_object() && cfg.contains("chat_template") && !cfg["chat_template"].is_null()) {
    const json& t = cfg["chat_template"];
    if (t.is_string()) return t.get<std::string>();
    if (!t.is_array())
      j.fail("chat_template is " + std::string(t.type_name()) + ", expected a string or a list");
    std::string chosen;
    for (size_t i = 0; i < t.size(); ++i) {
      const std::string where = "chat_template[" + std::to_string(i) + "].";
      const std::string name = j.string(t[i], "name", where);
      const std::string text = j.string(t[i], "template", where);
      if (i == 0 || name == "default") chosen = text;
      if (name == "default") break;
    }
    return chosen;
  }
  const fs::path jinja = fs::path(dir) / "chat_template.jinja";
  std::error_code ec;
  return fs::is_regular_file(jinja, ec) ? read_text_file(jinja.string()) : std::string();
}

// The folder's JSON files, each with the Json that names it in errors: tokenizer.json (required),
// tokenizer_config.json and config.json (empty objects when absent).
struct HfFiles {
  Json j, jc, jm;
  json root, cfg, model_cfg;
};

HfFiles read_hf_files(const std::string& dir) {
  HfFiles f{Json((fs::path(dir) / "tokenizer.json").string()),
            Json((fs::path(dir) / "tokenizer_config.json").string()),
            Json((fs::path(dir) / "config.json").string()),
            {},
            {},
            {}};
  f.root = read_json_file(f.j);
  if (!f.root.is_object()) f.j.fail("not a JSON object");
  std::error_code ec;
  f.cfg = fs::is_regular_file(f.jc.path(), ec) ? read_json_file(f.jc) : json::object();
  if (!f.cfg.is_object()) f.jc.fail("not a JSON object");
  f.model_cfg = fs::is_regular_file(f.jm.path(), ec) ? read_json_file(f.jm) : json::object();
  return f;
}

// What model.type and the normalizer / pre-tokenizer steps make of the vocabulary.
VocabKind vocab_kind(const Json& j, const json& model, const std::string& type,
                     const Normalizer& norm, const std::vector<std::string>& steps) {
  const bool byte_level = std::any_of(steps.begin(), steps.end(), [](const std::string& s) {
    return s.compare(0, 9, "bytelevel") == 0;
  });
  const bool metaspace = std::find(steps.begin(), steps.end(), "Metaspace") != steps.end();
  if (type == "BPE") {
    if (byte_level) return VocabKind::Bpe;
    if (j.boolean_or(model, "byte_fallback", false, "model.") || metaspace || norm.spaces_to_marker)
      return VocabKind::Spm;
    j.fail(
        "BPE model with neither a ByteLevel pre-tokenizer nor SentencePiece-style byte "
        "fallback / Metaspace is not supported");
  }
  if (type == "WordPiece") return VocabKind::Wpm;
  j.fail("model.type '" + type + "' is not supported (BPE, WordPiece)");
}

struct AddedToken {
  int64_t id;
  std::string content;
  bool special;
};

// Pieces by id: model.vocab, then added_tokens (which may repeat a vocab entry under its id),
// padded to the model's vocabulary size with unused "[PADn]" pieces.
struct PieceTable {
  std::vector<std::string> pieces;
  std::vector<bool> used;
  std::vector<AddedToken> added;
  std::unordered_map<std::string, int32_t> id_of;  // used pieces only

  size_t size() const { return pieces.size(); }
  int32_t id(const std::string& piece, const std::string& what, const Json& file) const {
    auto it = id_of.find(piece);
    if (it == id_of.end()) file.fail(what + " '" + piece + "' is not in the vocabulary");
    return it->second;
  }
};

PieceTable read_pieces(const Json& j, const json& root, const json& vocab_json,
                       int64_t vocab_size) {
  PieceTable t;
  std::vector<std::string>& pieces = t.pieces;
  std::vector<bool>& used = t.used;
  auto place = [&](int64_t id, const std::string& piece, const std::string& what) {
    if (size_t(id) >= pieces.size()) {
      pieces.resize(size_t(id) + 1);
      used.resize(size_t(id) + 1, false);
    }
    if (used[size_t(id)] && pieces[size_t(id)] != piece)
      j.fail(what + ": id " + std::to_string(id) + " is already '" + pieces[size_t(id)] + "'");
    pieces[size_t(id)] = piece;
    used[size_t(id)] = true;
  };
  for (const auto& [piece, id] : vocab_json.items())
    place(j.id(id, "model.vocab['" + piece + "']"), piece, "model.vocab['" + piece + "']");
  if (root.contains("added_tokens") && !root["added_tokens"].is_null()) {
    const json& list = j.array(root, "added_tokens", "");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string where = "added_tokens[" + std::to_string(i) + "]";
      if (!list[i].is_object()) j.fail(where + " is not an object");
      if (!list[i].contains("id")) j.fail(where + ".id is missing");
      AddedToken a{j.id(list[i]["id"], where + ".id"), j.string(list[i], "content", where + "."),
                   j.boolean_or(list[i], "special", false, where + ".")};
      if (a.content.empty()) j.fail(where + ".content is empty");
      place(a.id, a.content, where);
      t.added.push_back(std::move(a));
    }
  }
  if (pieces.empty()) j.fail("model.vocab is empty");
  if (vocab_size > 0 && int64_t(pieces.size()) > vocab_size)
    j.fail("has " + std::to_string(pieces.size()) + " tokens but the model's vocabulary has " +
           std::to_string(vocab_size));
  const size_t n = std::max(pieces.size(), size_t(std::max<int64_t>(vocab_size, 0)));
  pieces.resize(n);
  used.resize(n, false);
  for (size_t id = 0; id < n; ++id)
    if (!used[id]) pieces[id] = "[PAD" + std::to_string(id) + "]";
  t.id_of.reserve(n);
  for (size_t id = 0; id < n; ++id)
    if (used[id]) t.id_of.emplace(pieces[id], int32_t(id));
  return t;
}

// Token types (and unk_id): unused padding, SentencePiece byte pieces, added tokens as control
// or user-defined, the unknown token.
void assign_types(const Json& j, const json& model, PieceTable& t, Vocab& v) {
  const size_t n = t.size();
  v.types.assign(n, TokenType::Normal);
  for (size_t id = 0; id < n; ++id)
    if (!t.used[id]) v.types[id] = TokenType::Unused;
  std::string unk = j.string_or(model, "unk_token", "", "model.");
  if (!unk.empty()) v.unk_id = t.id(unk, "model.unk_token", j);
  if (v.kind == VocabKind::Spm)
    for (size_t id = 0; id < n; ++id)
      if (t.used[id] && is_byte_piece(t.pieces[id])) v.types[id] = TokenType::Byte;
  for (const AddedToken& a : t.added) {
    const bool control = a.special || looks_special(a.content);
    v.types[size_t(a.id)] = control ? TokenType::Control : TokenType::UserDefined;
    if (!control && v.kind == VocabKind::Spm) {
      // As llama.cpp's converter: user-defined tokens match raw text, so "▁" means a space.
      std::string& p = t.pieces[size_t(a.id)];
      for (size_t pos; (pos = p.find(kSpaceMarker)) != std::string::npos;) p.replace(pos, 3, " ");
    }
  }
  if (v.kind == VocabKind::Spm && v.unk_id >= 0) v.types[size_t(v.unk_id)] = TokenType::Unknown;
}

// Merges: "a b" strings (older files) or ["a", "b"] pairs; every part and result must be a
// piece, as Hugging Face's BPE insists when it loads them. Byte-level BPE keeps them as merges;
// SentencePiece gets scores from the rank of the first merge making each piece.
void read_merges(const Json& j, const json& model, const PieceTable& t, Vocab& v) {
  const size_t n = t.size();
  v.scores.assign(n, 0.0f);
  if (v.kind == VocabKind::Wpm) return;
  const json& merges = j.array(model, "merges", "model.");
  std::vector<int32_t> first_rank(n, -1);
  std::string left, right;
  for (size_t r = 0; r < merges.size(); ++r) {
    const std::string where = "model.merges[" + std::to_string(r) + "]";
    const json& m = merges[r];
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 == s.size() ||
          s.find(' ', sp + 1) != std::string::npos)
        j.fail(where + " '" + s + "' is not two tokens separated by one space");
      left = s.substr(0, sp);
      right = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      j.fail(where + " is " + m.dump() + ", expected \"a b\" or [\"a\", \"b\"]");
    }
    for (const std::string* part : {&left, &right})
      if (!t.id_of.count(*part)) j.fail(where + " names '" + *part + "', which is not a token");
    const std::string joined = left + right;
    auto it = t.id_of.find(joined);
    if (it == t.id_of.end()) j.fail(where + " makes '" + joined + "', which is not a token");
    if (first_rank[size_t(it->second)] < 0) first_rank[size_t(it->second)] = int32_t(r);
    if (v.kind == VocabKind::Bpe) v.merges.push_back(left + " " + right);
  }
  if (v.kind == VocabKind::Spm) {
    // Earlier merges first: score -rank. Pieces no merge makes (characters, bytes, specials)
    // are never a pair's result unless no merge lists them; those go last.
    const float last = -float(merges.size());
    for (size_t id = 0; id < n; ++id)
      v.scores[id] = first_rank[id] >= 0 ? -float(first_rank[id]) : last;
  }
}

// Byte-level BPE: the pre-tokenizer family its steps name. WordPiece: llama.cpp's "phantom
// space" form, where word-initial pieces get "▁" and "##" continuations lose their prefix.
void pre_tokenizer_form(const Json& j, const json& model, const Normalizer& norm,
                        const std::vector<std::string>& steps, PieceTable& t, Vocab& v) {
  if (v.kind == VocabKind::Bpe) {
    if (!norm.other.empty() && !(norm.other.size() == 1 && norm.other[0] == "NFC"))
      j.fail("normalizer '" + norm.other[0] + "' is not supported with a ByteLevel pre-tokenizer");
    const Family* found = nullptr;
    for (const Family& f : families())
      if (f.steps == steps) found = &f;
    if (!found) {
      std::string desc;
      for (const auto& s : steps) desc += (desc.empty() ? "" : ", ") + s;
      j.fail("pre-tokenizer sequence [" + desc +
             "] is not one shrike knows (gpt-2, llama-bpe, qwen2, starcoder, falcon, "
             "deepseek-coder, deepseek-llm)");
    }
    v.pre = found->pre;
  } else if (v.kind == VocabKind::Wpm) {
    const std::string prefix = j.string_or(model, "continuing_subword_prefix", "##", "model.");
    for (size_t id = 0; id < t.size(); ++id) {
      std::string& p = t.pieces[id];
      if (!t.used[id] || v.types[id] != TokenType::Normal) continue;
      if (p.size() >= 2 && p.front() == '[' && p.back() == ']') continue;
      if (!prefix.empty() && p.compare(0, prefix.size(), prefix) == 0)
        p.erase(0, prefix.size());
      else
        p.insert(0, kSpaceMarker);
    }
  }
}

// SentencePiece's dummy prefix: the normalizer's Prepend("▁") or a Metaspace that prepends;
// tokenizer_config's add_prefix_space wins when present (as llama.cpp's converter lets it).
bool dummy_prefix(const HfFiles& f, const Normalizer& norm, const std::vector<std::string>& steps,
                  VocabKind kind) {
  if (kind != VocabKind::Spm) return false;
  bool prefix = norm.prepend_marker;
  if (std::find(steps.begin(), steps.end(), "Metaspace") != steps.end()) {
    const json* ms = nullptr;
    std::vector<const json*> todo = {&f.root["pre_tokenizer"]};
    while (!todo.empty() && !ms) {
      const json* p = todo.back();
      todo.pop_back();
      if (!p->is_object()) continue;
      if (p->value("type", "") == "Metaspace") ms = p;
      if (p->contains("pretokenizers") && (*p)["pretokenizers"].is_array())
        for (const json& q : (*p)["pretokenizers"]) todo.push_back(&q);
    }
    if (ms) {
      const std::string scheme = f.j.string_or(*ms, "prepend_scheme", "", "pre_tokenizer.");
      prefix = scheme.empty() ? f.j.boolean_or(*ms, "add_prefix_space", true, "pre_tokenizer.")
                              : scheme != "never";
    }
  }
  return f.jc.boolean_or(f.cfg, "add_prefix_space", prefix, "");
}

// BOS / EOS / PAD ids: tokenizer_config.json names them; config.json's ids are the fallback,
// then each kind's usual piece.
void special_ids(const HfFiles& f, const PieceTable& t, Vocab& v) {
  const size_t n = t.size();
  auto special = [&](const char* cfg_key, const char* model_key,
                     const std::string& default_piece) -> int32_t {
    if (auto piece = config_token(f.jc, f.cfg, cfg_key)) return t.id(*piece, cfg_key, f.jc);
    const json& mc = f.model_cfg;
    if (model_key && mc.is_object() && mc.contains(model_key) && !mc[model_key].is_null()) {
      const json& idj =
          mc[model_key].is_array() && !mc[model_key].empty() ? mc[model_key][0] : mc[model_key];
      const int64_t id = f.jm.id(idj, model_key);
      if (id >= int64_t(n))
        f.jm.fail(std::string(model_key) + " " + std::to_string(id) + " is outside the " +
                  std::to_string(n) + "-token vocabulary");
      return int32_t(id);
    }
    auto it = t.id_of.find(default_piece);
    return it == t.id_of.end() ? -1 : it->second;
  };
  const bool wpm = v.kind == VocabKind::Wpm, spm = v.kind == VocabKind::Spm;
  v.bos_id = special(wpm ? "cls_token" : "bos_token", wpm ? nullptr : "bos_token_id",
                     wpm   ? "[CLS]"
                     : spm ? "<s>"
                           : "");
  v.eos_id = special(wpm ? "sep_token" : "eos_token", wpm ? nullptr : "eos_token_id",
                     wpm   ? "[SEP]"
                     : spm ? "</s>"
                           : "");
  v.pad_id = special("pad_token", "pad_token_id", wpm ? "[PAD]" : "");
}

// add_bos / add_eos: tokenizer_config.json, else the post_processor template, else per kind.
void bos_eos_policy(const HfFiles& f, Vocab& v) {
  std::optional<std::string> first, last;
  bool bert_style = false;
  template_specials(f.j, f.root.value("post_processor", json()), "post_processor", first, last,
                    bert_style);
  auto is_piece = [&](const std::optional<std::string>& p, int32_t id) {
    return p && id >= 0 && !p->empty() && *p == v.pieces[size_t(id)];
  };
  const bool wpm = v.kind == VocabKind::Wpm;
  bool add_bos = v.kind != VocabKind::Bpe, add_eos = wpm;
  if (bert_style) add_bos = add_eos = true;
  if (first) add_bos = is_piece(first, v.bos_id);
  if (last) add_eos = is_piece(last, v.eos_id);
  v.add_bos = f.jc.boolean_or(f.cfg, "add_bos_token", add_bos, "");
  v.add_eos = f.jc.boolean_or(f.cfg, "add_eos_token", add_eos, "");
  if (v.add_bos && v.bos_id < 0) v.add_bos = false;
}

}  // namespace

HfTokenizer load_hf_tokenizer(const std::string& dir, int64_t vocab_size) {
  const HfFiles f = read_hf_files(dir);
  const json& model = f.j.object(f.root, "model", "");
  const std::string type = f.j.string(model, "type", "model.");
  const json& vocab_json = f.j.object(model, "vocab", "model.");
  Normalizer norm;
  normalizer_steps(f.j, f.root.value("normalizer", json()), "normalizer", norm);
  std::vector<std::string> steps;
  pre_steps(f.j, f.root.value("pre_tokenizer", json()), "pre_tokenizer", steps);

  HfTokenizer out;
  Vocab& v = out.vocab;
  v.kind = vocab_kind(f.j, model, type, norm, steps);
  PieceTable pieces = read_pieces(f.j, f.root, vocab_json, vocab_size);
  assign_types(f.j, model, pieces, v);
  read_merges(f.j, model, pieces, v);
  pre_tokenizer_form(f.j, model, norm, steps, pieces, v);
  v.add_space_prefix = dummy_prefix(f, norm, steps, v.kind);
  special_ids(f, pieces, v);
  v.pieces = std::move(pieces.pieces);
  bos_eos_policy(f, v);
  out.chat_template = chat_template_of(f.jc, f.cfg, dir);
  return out;
}

void add_vocab_to_gguf(const Vocab& v, const std::string& chat_template, gguf::GgufWriter& w) {
  const bool spm = v.kind == VocabKind::Spm, bpe = v.kind == VocabKind::Bpe;
  const bool wpm = v.kind == VocabKind::Wpm;
  w.set_string("tokenizer.ggml.model", spm ? "llama" : bpe ? "gpt2" : "bert");
  w.set_string("tokenizer.ggml.pre", bpe ? v.pre : "default");
  w.set_string_array("tokenizer.ggml.tokens", v.pieces);
  if (spm) w.set_float32_array("tokenizer.ggml.scores", v.scores);
  std::vector<int32_t> types;
  types.reserve(v.types.size());
  for (TokenType t : v.types) types.push_back(int32_t(t));
  w.set_int32_array("tokenizer.ggml.token_type", types);
  if (bpe) w.set_string_array("tokenizer.ggml.merges", v.merges);
  auto id = [&](const char* key, int32_t value) {
    if (value >= 0) w.set_uint32(key, uint32_t(value));
  };
  id(wpm ? "tokenizer.ggml.cls_token_id" : "tokenizer.ggml.bos_token_id", v.bos_id);
  id(wpm ? "tokenizer.ggml.seperator_token_id" : "tokenizer.ggml.eos_token_id", v.eos_id);
  id("tokenizer.ggml.unknown_token_id", v.unk_id);
  id("tokenizer.ggml.padding_token_id", v.pad_id);
  w.set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  w.set_bool("tokenizer.ggml.add_eos_token", v.add_eos);
  if (spm) w.set_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  if (!chat_template.empty()) w.set_string("tokenizer.chat_template", chat_template);
}

}  // namespace shrike::tokenizer
