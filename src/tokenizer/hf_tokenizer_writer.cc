// Vocab -> tokenizer.json and tokenizer_config.json, as Hugging Face's tokenizers and
// transformers converters write them (hf_tokenizer_writer.h).
#include "tokenizer/hf_tokenizer_writer.h"

#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <unordered_map>

#include "core/file_buffer.h"

namespace shrike::tokenizer {
namespace hf_json {

// Splits a UTF-8 string at code point boundaries (HF's Python works on code points).
std::vector<size_t> char_boundaries(const std::string& s) {
  std::vector<size_t> b;
  for (size_t i = 1; i < s.size(); ++i)
    if ((uint8_t(s[i]) & 0xC0) != 0x80) b.push_back(i);
  return b;
}

// transformers' SentencePieceExtractor: every split of a piece into two pieces is a merge,
// ordered by the merged piece's score (stable: pairs of one piece by their ids).
json spm_merges(const Vocab& v) {
  std::unordered_map<std::string, int32_t> id;
  for (int32_t i = 0; i < v.size(); ++i) id.emplace(v.pieces[i], i);
  struct M {
    int32_t l, r;
    float score;
  };
  std::vector<M> all;
  for (int32_t i = 0; i < v.size(); ++i) {
    if (v.types[i] != TokenType::Normal) continue;
    const std::string& p = v.pieces[i];
    std::vector<M> local;
    for (size_t k : char_boundaries(p)) {
      auto l = id.find(p.substr(0, k)), r = id.find(p.substr(k));
      if (l != id.end() && r != id.end()) local.push_back({l->second, r->second, v.scores[i]});
    }
    std::sort(local.begin(), local.end(),
              [](const M& a, const M& b) { return a.l != b.l ? a.l < b.l : a.r < b.r; });
    all.insert(all.end(), local.begin(), local.end());
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const M& a, const M& b) { return a.score > b.score; });
  json out = json::array();
  for (const M& m : all) out.push_back({v.pieces[m.l], v.pieces[m.r]});
  return out;
}

json added_token(int32_t id, const std::string& content, bool special) {
  return {{"id", id},        {"content", content},     {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", !special}, {"special", special}};
}

json template_processing(const std::vector<std::string>& before,
                         const std::vector<std::string>& after) {
  json single = json::array();
  for (const auto& s : before) single.push_back({{"SpecialToken", {{"id", s}, {"type_id", 0}}}});
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  for (const auto& s : after) single.push_back({{"SpecialToken", {{"id", s}, {"type_id", 0}}}});
  return {{"type", "TemplateProcessing"},
          {"single", single},
          {"pair", json::array()},
          {"special_tokens", json::object()}};
}

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", true},
          {"use_regex", use_regex}};
}

json split_regex(const std::string& re) {
  return {
      {"type", "Split"}, {"pattern", {{"Regex", re}}}, {"behavior", "Isolated"}, {"invert", false}};
}

// The pre_tokenizer of each byte-level family's tokenizer.json, keyed by tokenizer.ggml.pre.
json family_pre_tokenizer(const std::string& pre) {
  const std::string cjk = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+";
  auto seq = [](json list) { return json{{"type", "Sequence"}, {"pretokenizers", list}}; };
  if (pre == "gpt-2" || pre == "mpt") return byte_level(true);
  if (pre == "llama-bpe")
    return seq({split_regex("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
                            "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                            "\\s+(?!\\S)|\\s+"),
                byte_level(false)});
  if (pre == "qwen2")
    return seq({split_regex("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
                            " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
                byte_level(false)});
  if (pre == "starcoder" || pre == "refact")
    return seq({{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)});
  if (pre == "falcon")
    return seq({{{"type", "Punctuation"}, {"behavior", "Contiguous"}},
                byte_level(true),
                {{"type", "Digits"}, {"individual_digits", false}},
                split_regex("[0-9][0-9][0-9]")});
  if (pre == "deepseek-coder")
    return seq({split_regex("[\r\n]"),
                split_regex("\\s?\\p{L}+"),
                split_regex("\\s?\\p{P}+"),
                split_regex(cjk),
                {{"type", "Digits"}, {"individual_digits", true}},
                byte_level(false)});
  if (pre == "deepseek-llm")
    return seq(
        {split_regex("[\r\n]"),
         split_regex(
             "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293"
             "\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c"
             "\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5"
             "\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77"
             "\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57"
             "\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4"
             "\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc"
             "\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d"
             "\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b"
             "\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f"
             "\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a"
             "\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb"
             "\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df"
             "\U0001e900-\U0001e943]+"),
         split_regex("\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+"),
         split_regex("\\s+$"),
         split_regex(cjk),
         {{"type", "Digits"}, {"individual_digits", false}},
         byte_level(false)});
  throw std::invalid_argument(
      "no Hugging Face pre_tokenizer is known for the byte-level "
      "family '" +
      pre + "'");
}

// tokenizer.json for a vocabulary, as tokenizers' converters write it.
json hf_tokenizer_json(const Vocab& v) {
  const std::string marker = "\xE2\x96\x81";
  json vocab = json::object(), added = json::array();
  for (int32_t i = 0; i < v.size(); ++i) {
    const TokenType t = v.types[i];
    std::string p = v.pieces[i];
    if (t == TokenType::Control || t == TokenType::Unknown || t == TokenType::UserDefined)
      added.push_back(added_token(i, p, t != TokenType::UserDefined));
    if (t == TokenType::UserDefined) continue;                 // lives in added_tokens only
    if (v.kind == VocabKind::Wpm && t == TokenType::Normal) {  // undo the phantom space
      if (p.compare(0, marker.size(), marker) == 0)
        p.erase(0, marker.size());
      else
        p = "##" + p;
    }
    vocab[p] = i;
  }
  auto piece = [&](int32_t id) { return id >= 0 ? v.pieces[size_t(id)] : std::string(); };
  json j = {
      {"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added}};
  if (v.kind == VocabKind::Spm) {
    json norm = json::array();
    if (v.add_space_prefix) norm.push_back({{"type", "Prepend"}, {"prepend", marker}});
    norm.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", marker}});
    j["normalizer"] = {{"type", "Sequence"}, {"normalizers", norm}};
    j["pre_tokenizer"] = nullptr;
    j["post_processor"] = template_processing(
        v.add_bos ? std::vector<std::string>{piece(v.bos_id)} : std::vector<std::string>{}, {});
    j["model"] = {{"type", "BPE"},
                  {"dropout", nullptr},
                  {"unk_token", piece(v.unk_id)},
                  {"continuing_subword_prefix", nullptr},
                  {"end_of_word_suffix", nullptr},
                  {"fuse_unk", true},
                  {"byte_fallback", true},
                  {"ignore_merges", false},
                  {"vocab", vocab},
                  {"merges", spm_merges(v)}};
  } else if (v.kind == VocabKind::Bpe) {
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = family_pre_tokenizer(v.pre);
    j["post_processor"] =
        v.add_bos
            ? json{{"type", "Sequence"},
                   {"processors", {byte_level(true), template_processing({piece(v.bos_id)}, {})}}}
            : byte_level(true);
    j["model"] = {{"type", "BPE"},
                  {"dropout", nullptr},
                  {"unk_token", nullptr},
                  {"byte_fallback", false},
                  {"ignore_merges", v.pre == "llama-bpe"},
                  {"vocab", vocab},
                  {"merges", v.merges}};
  } else {
    j["normalizer"] = {{"type", "BertNormalizer"},
                       {"clean_text", true},
                       {"handle_chinese_chars", true},
                       {"strip_accents", nullptr},
                       {"lowercase", true}};
    j["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
    j["post_processor"] = template_processing({piece(v.bos_id)}, {piece(v.eos_id)});
    j["model"] = {{"type", "WordPiece"},
                  {"unk_token", piece(v.unk_id)},
                  {"continuing_subword_prefix", "##"},
                  {"max_input_chars_per_word", 100},
                  {"vocab", vocab}};
  }
  j["decoder"] = nullptr;
  return j;
}

json hf_tokenizer_config(const Vocab& v, const std::string& chat_template) {
  auto piece = [&](int32_t id) -> json { return id >= 0 ? json(v.pieces[size_t(id)]) : json(); };
  const bool wpm = v.kind == VocabKind::Wpm;
  json c = {{wpm ? "cls_token" : "bos_token", piece(v.bos_id)},
            {wpm ? "sep_token" : "eos_token", {{"content", piece(v.eos_id)}, {"special", true}}},
            {"add_bos_token", v.add_bos},
            {"add_eos_token", v.add_eos}};
  if (!chat_template.empty()) c["chat_template"] = chat_template;
  return c;
}

}  // namespace hf_json

void write_hf_tokenizer(const Vocab& v, const std::string& dir, const std::string& chat_template) {
  for (const auto& [name, j] :
       {std::pair{"tokenizer.json", hf_json::hf_tokenizer_json(v)},
        std::pair{"tokenizer_config.json", hf_json::hf_tokenizer_config(v, chat_template)}}) {
    const std::string path = dir + "/" + name;
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << j.dump(1);
    if (!f) throw FileError(path + ": cannot write");
  }
}

}  // namespace shrike::tokenizer
