#include "tokenizer/wordpiece.h"

#include "tokenizer/unicode.h"

namespace shrike::tokenizer {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581
constexpr size_t kMaxWordChars = 100;                      // HF WordPiece max_input_chars_per_word

bool is_ascii_punct(uint32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
         (c >= 0x7B && c <= 0x7E);
}

}  // namespace

WpmModel::WpmModel(const Vocab& v) : vocab_(v) {
  for (size_t i = 0; i < v.pieces.size(); ++i) {
    const std::string& p = v.pieces[i];
    if (v.types[i] != TokenType::Normal && v.types[i] != TokenType::Unused) continue;
    if (p.compare(0, kSpaceMarker.size(), kSpaceMarker) == 0)
      start_.emplace(p.substr(kSpaceMarker.size()), int32_t(i));
    else
      continuation_.emplace(p, int32_t(i));
  }
}

void WpmModel::encode(std::string_view text, std::vector<int32_t>& out) const {
  thread_local std::vector<uint32_t> cps, offs;
  unicode::decode_utf8(text, cps, offs);
  std::string word;
  auto flush = [&] {
    if (!word.empty()) encode_word(word, out);
    word.clear();
  };
  for (size_t i = 0; i < cps.size(); ++i) {
    const uint32_t c = cps[i];
    const uint8_t cls = unicode::classes(c);
    const bool ws = c == '\t' || c == '\n' || c == '\r' || (cls & unicode::kSpace);
    // clean_text: drop NUL, U+FFFD and "other" characters (controls, format, unassigned).
    if (c == 0 || c == 0xFFFD || ((cls & unicode::kOther) && !ws)) continue;
    if (ws) {
      flush();
    } else if (unicode::is_bert_cjk(c) || is_ascii_punct(c) || (cls & unicode::kPunct)) {
      flush();  // a word of its own (normalisation leaves these characters as they are)
      unicode::append_bert_normalized(c, word);
      flush();
    } else {
      // Normalising may yield punctuation (e.g. a compatibility form); BERT splits after
      // normalising, so re-check each produced character.
      std::string norm;
      unicode::append_bert_normalized(c, norm);
      std::vector<uint32_t> ncps, noffs;
      unicode::decode_utf8(norm, ncps, noffs);
      for (size_t k = 0; k < ncps.size(); ++k) {
        const uint32_t n = ncps[k];
        const uint8_t ncls = unicode::classes(n);
        const std::string_view piece =
            std::string_view(norm).substr(noffs[k], noffs[k + 1] - noffs[k]);
        if (is_ascii_punct(n) || (ncls & unicode::kPunct)) {
          flush();
          word.append(piece);
          flush();
        } else if (ncls & unicode::kSpace) {
          flush();
        } else {
          word.append(piece);
        }
      }
    }
  }
  flush();
}

void WpmModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  std::vector<uint32_t> cps, offs;
  unicode::decode_utf8(word, cps, offs);
  const size_t before = out.size();
  bool ok = cps.size() <= kMaxWordChars;
  std::string sub;
  for (size_t start = 0; ok && start < cps.size();) {
    const auto& table = start == 0 ? start_ : continuation_;
    int32_t id = -1;
    size_t end = cps.size();
    for (; end > start; --end) {
      sub.assign(word.substr(offs[start], offs[end] - offs[start]));
      if (const auto it = table.find(sub); it != table.end()) {
        id = it->second;
        break;
      }
    }
    if (id < 0)
      ok = false;
    else
      out.push_back(id), start = end;
  }
  if (!ok) {
    out.resize(before);
    if (vocab_.unk_id >= 0) out.push_back(vocab_.unk_id);
  }
}

}  // namespace shrike::tokenizer
