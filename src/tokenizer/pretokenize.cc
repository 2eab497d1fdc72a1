#include "tokenizer/pretokenize.h"

#include "tokenizer/unicode.h"

namespace shrike::tokenizer {
namespace {

// The regexes, as llama.cpp's llama-vocab.cpp lists them per pre-tokeniser type. Oniguruma (which
// Hugging Face tokenizers uses) and these agree on the subset Regex implements.
constexpr const char* kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
constexpr const char* kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Falcon and the default put punctuation runs and 3-digit groups around the GPT-2 regex (without
// its final \s+, which changes nothing once the pieces between matches are kept).
constexpr const char* kPunctRuns = "[\\p{P}\\$\\+<=>\\^~\\|`]+";
constexpr const char* kGpt2NoTail =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr const char* kDigits3 = "[0-9][0-9][0-9]";
// CJK, as DeepSeek's tokenizer.json writes it: U+4E00-9FA5, U+0800-4E00, U+AC00-D7FF.
constexpr const char* kDeepseekCjk = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+";
// DeepSeek-LLM's letters: cased letters of many scripts, listed explicitly in its tokenizer.json.
constexpr const char* kDeepseekLlmLetters =
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-"
    "\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1"
    "\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-"
    "\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15"
    "\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-"
    "\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec"
    "\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128"
    "\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b"
    "\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787"
    "\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-"
    "\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-"
    "\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+";
constexpr const char* kDeepseekLlmPunct =
    "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+";

}  // namespace

std::vector<const char*> pretokenizer_regexes(PreType t) {
  switch (t) {
    case PreType::Gpt2:
      return {kGpt2};
    case PreType::Llama3:
      return {kLlama3};
    case PreType::Qwen2:
      return {kQwen2};
    case PreType::DeepseekLlm:
      return {"[\\r\\n]", kDeepseekLlmLetters, kDeepseekLlmPunct, "\\s+$", kDeepseekCjk, "\\p{N}+"};
    case PreType::DeepseekCoder:
      return {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kDeepseekCjk, "\\p{N}"};
    case PreType::Starcoder:
      return {"\\p{N}", kGpt2NoTail};
    case PreType::Falcon:
    case PreType::Default:
      return {kPunctRuns, kGpt2NoTail, kDigits3};
  }
  return {};
}

bool pre_type_from_name(std::string_view n, PreType& out) {
  if (n.empty() || n == "default") {
    out = PreType::Default;
  } else if (n == "gpt-2" || n == "mpt" || n == "olmo" || n == "jais" || n == "phi-2") {
    out = PreType::Gpt2;
  } else if (n == "llama-bpe" || n == "llama3" || n == "llama-v3" || n == "falcon3") {
    out = PreType::Llama3;
  } else if (n == "qwen2" || n == "deepseek-r1-qwen") {
    out = PreType::Qwen2;
  } else if (n == "deepseek-llm") {
    out = PreType::DeepseekLlm;
  } else if (n == "deepseek-coder") {
    out = PreType::DeepseekCoder;
  } else if (n == "falcon") {
    out = PreType::Falcon;
  } else if (n == "starcoder" || n == "refact") {
    out = PreType::Starcoder;
  } else {
    return false;
  }
  return true;
}

PreTokenizer::PreTokenizer(PreType type) {
  for (const char* p : pretokenizer_regexes(type)) stages_.emplace_back(p);
}

void PreTokenizer::split(std::string_view text,
                         std::vector<std::pair<uint32_t, uint32_t>>& words) const {
  thread_local std::vector<uint32_t> cps, offs;
  thread_local std::vector<uint8_t> cls;
  thread_local std::vector<std::pair<uint32_t, uint32_t>> cur, next;  // code point ranges
  unicode::decode_utf8(text, cps, offs);
  cls.resize(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) cls[i] = unicode::classes(cps[i]);

  cur.assign(1, {0, uint32_t(cps.size())});
  if (cps.empty()) cur.clear();
  for (const Regex& re : stages_) {
    next.clear();
    for (const auto& [a, b] : cur) {
      uint32_t pos = a;
      for (uint32_t s = a; s < b;) {
        const int64_t len = re.match_at(cps.data(), cls.data(), s, b);
        if (len <= 0) {
          ++s;
          continue;
        }
        if (pos < s) next.push_back({pos, s});
        next.push_back({s, uint32_t(s + len)});
        s = pos = uint32_t(s + len);
      }
      if (pos < b) next.push_back({pos, b});
    }
    cur.swap(next);
  }
  words.clear();
  for (const auto& [a, b] : cur) words.push_back({offs[a], offs[b]});
}

}  // namespace shrike::tokenizer
