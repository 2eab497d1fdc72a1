#include "tokenizer/bpe_trainer.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "gguf/gguf.h"
#include "tokenizer/bpe_merger.h"
#include "tokenizer/hf_tokenizer.h"

namespace shrike::tokenizer {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581
constexpr int32_t kSpaceMarkerCp = 0x2581;

// One UTF-8 character at s[i]: its length as SpmModel splits text (1 for a byte that does not
// start a well-formed sequence) and its code point, or -1 when the bytes are not valid UTF-8
// (also overlong forms, surrogates, > U+10FFFF). Invalid characters never become pieces: GGUF
// readers expect UTF-8, and the byte fallback covers them.
struct Char {
  size_t len;
  int32_t cp;
};

Char char_at(std::string_view s, size_t i) {
  const auto c = uint8_t(s[i]);
  const size_t n = c < 0x80           ? 1
                   : (c >> 5) == 0x6  ? 2
                   : (c >> 4) == 0xE  ? 3
                   : (c >> 3) == 0x1E ? 4
                                      : 0;
  if (n == 0 || i + n > s.size()) return {1, -1};
  uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1Fu : n == 3 ? c & 0x0Fu : c & 0x07u;
  for (size_t k = 1; k < n; ++k) {
    const auto b = uint8_t(s[i + k]);
    if ((b & 0xC0) != 0x80) return {1, -1};
    cp = (cp << 6) | (b & 0x3Fu);
  }
  static constexpr uint32_t kMinCp[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMinCp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {n, -1};
  return {n, int32_t(cp)};
}

// Character classes merges may not cross (see the header). kMarker ("▁") joins what follows.
enum class Script { Marker, Digit, Cjk, Punct, Other };

Script script_of(int32_t cp) {
  if (cp == kSpaceMarkerCp) return Script::Marker;
  if (cp >= '0' && cp <= '9') return Script::Digit;
  if (cp < 0x80)
    return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ? Script::Other : Script::Punct;
  const bool cjk = (cp >= 0x1100 && cp <= 0x11FF) ||  // Hangul Jamo
                   (cp >= 0x2E80 && cp <= 0x2FDF) ||  // CJK radicals, Kangxi radicals
                   (cp >= 0x3000 && cp <= 0x9FFF) ||  // CJK punctuation, kana, ..., Han
                   (cp >= 0xA960 && cp <= 0xA97F) ||  // Hangul Jamo extended
                   (cp >= 0xAC00 && cp <= 0xD7FF) ||  // Hangul syllables
                   (cp >= 0xF900 && cp <= 0xFAFF) ||  // CJK compatibility ideographs
                   (cp >= 0xFE30 && cp <= 0xFE4F) ||  // CJK compatibility forms
                   (cp >= 0xFF00 && cp <= 0xFFEF) ||  // full-width and half-width forms
                   (cp >= 0x20000 && cp <= 0x3FFFF);  // Han extensions
  return cjk ? Script::Cjk : Script::Other;
}

// The text between user-defined tokens, found leftmost-longest as Tokenizer::encode finds them.
std::vector<std::string_view> fragments(std::string_view text,
                                        const std::vector<std::string>& longest_first) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i < text.size() && !longest_first.empty();) {
    size_t hit = 0;
    for (const std::string& t : longest_first)
      if (text.compare(i, t.size(), t) == 0) {
        hit = t.size();
        break;
      }
    if (hit == 0) {
      ++i;
      continue;
    }
    if (i > start) out.push_back(text.substr(start, i - start));
    i += hit;
    start = i;
  }
  if (start < text.size()) out.push_back(text.substr(start));
  return out;
}

// SpmModel::encode's normalisation and word split: dummy prefix, ' ' -> "▁", a cut before each
// "▁" that follows another character.
void count_words(std::string_view text, std::unordered_map<std::string, int64_t>& words) {
  std::string s(kSpaceMarker);
  for (char c : text) {
    if (c == ' ')
      s.append(kSpaceMarker);
    else
      s.push_back(c);
  }
  const std::string_view sv(s);
  size_t start = 0;
  for (size_t i = 3; i + 3 <= sv.size(); ++i) {
    if (sv.substr(i, 3) == kSpaceMarker && sv.substr(i - 3, 3) != kSpaceMarker && i > start) {
      ++words[std::string(sv.substr(start, i - start))];
      start = i;
    }
  }
  ++words[std::string(sv.substr(start))];
}

std::string byte_piece(int b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", b);
  return buf;
}

}  // namespace

Vocab train_bpe(const std::vector<std::string>& texts, const BpeTrainOptions& opt) {
  if (opt.min_frequency < 1)
    throw std::invalid_argument("train_bpe: min_frequency must be at least 1, got " +
                                std::to_string(opt.min_frequency));
  if (opt.max_piece_chars < 1)
    throw std::invalid_argument("train_bpe: max_piece_chars must be at least 1, got " +
                                std::to_string(opt.max_piece_chars));

  // Special and byte pieces, and the user-defined tokens after them.
  std::vector<std::string> fixed = {"<unk>", "<s>", "</s>"};
  for (int b = 0; b < 256; ++b) fixed.push_back(byte_piece(b));
  std::unordered_set<std::string> reserved(fixed.begin(), fixed.end());
  for (const std::string& t : opt.user_defined) {
    if (t.empty()) throw std::invalid_argument("train_bpe: empty user-defined token");
    if (!reserved.insert(t).second)
      throw std::invalid_argument("train_bpe: user-defined token '" + t +
                                  "' is repeated or is a special or byte piece");
  }
  std::vector<std::string> longest_first = opt.user_defined;
  std::stable_sort(longest_first.begin(), longest_first.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });

  std::unordered_map<std::string, int64_t> word_freq;
  for (const std::string& text : texts)
    for (std::string_view frag : fragments(text, longest_first)) count_words(frag, word_freq);
  if (word_freq.empty()) throw std::invalid_argument("train_bpe: no text to train on");
  // Sorted, so that everything below (segment order included) is independent of hashing.
  std::vector<std::pair<std::string, int64_t>> words(word_freq.begin(), word_freq.end());
  std::sort(words.begin(), words.end());

  // Characters: valid UTF-8 seen at least min_frequency times, most frequent first.
  std::unordered_map<std::string, int64_t> char_freq;
  for (const auto& [w, f] : words)
    for (size_t i = 0; i < w.size();) {
      const Char ch = char_at(w, i);
      if (ch.cp >= 0) char_freq[w.substr(i, ch.len)] += f;
      i += ch.len;
    }
  std::vector<std::pair<std::string, int64_t>> kept;
  for (const auto& cf : char_freq)
    if (cf.second >= opt.min_frequency) kept.push_back(cf);
  std::sort(kept.begin(), kept.end(), [](const auto& x, const auto& y) {
    return x.second != y.second ? x.second > y.second : x.first < y.first;
  });
  const size_t n_fixed = fixed.size() + opt.user_defined.size();
  const size_t minimum = n_fixed + kept.size();
  if (opt.vocab_size < 0 || size_t(opt.vocab_size) < minimum)
    throw std::invalid_argument(
        "train_bpe: vocab_size " + std::to_string(opt.vocab_size) + " is too small: at least " +
        std::to_string(minimum) + " needed (3 special + 256 byte + " +
        std::to_string(opt.user_defined.size()) + " user-defined pieces + " +
        std::to_string(kept.size()) + " characters seen at least " +
        std::to_string(opt.min_frequency) + " times; raise min_frequency to keep fewer)");

  std::vector<std::string> chars;
  for (const auto& cf : kept) chars.push_back(cf.first);
  PairMerger merger(chars, opt.min_frequency, opt.max_piece_chars, reserved);

  // Segments: the runs of kept characters inside a word that merges may join.
  std::vector<int32_t> seg;
  Script seg_script = Script::Marker;  // Marker: no character fixed the run's script yet
  auto flush = [&](int64_t f) {
    if (seg.size() >= 2) merger.add_segment(seg, f);
    seg.clear();
    seg_script = Script::Marker;
  };
  for (const auto& [w, f] : words) {
    for (size_t i = 0; i < w.size();) {
      const Char ch = char_at(w, i);
      const int32_t id = ch.cp < 0 ? -1 : merger.id_of(w.substr(i, ch.len));
      i += ch.len;
      const Script s = ch.cp < 0 ? Script::Other : script_of(ch.cp);
      const bool alone = (s == Script::Digit && opt.split_digits) ||
                         (s == Script::Marker && opt.split_space) ||
                         (s == Script::Cjk && opt.split_cjk);
      if (id < 0 || alone) {
        flush(f);  // unmergeable: byte fallback, or a character that stays alone
        continue;
      }
      if (s == Script::Marker ? seg_script != Script::Marker
                              : seg_script != Script::Marker && seg_script != s)
        flush(f);
      seg.push_back(id);
      if (s != Script::Marker) seg_script = s;
    }
    flush(f);
  }

  size_t merges = size_t(opt.vocab_size) - minimum;
  if (opt.max_merges >= 0) merges = std::min(merges, size_t(opt.max_merges));
  const std::vector<std::string> merged = merger.run(merges);

  Vocab v;
  v.kind = VocabKind::Spm;
  auto add = [&](std::string piece, float score, TokenType type) {
    v.pieces.push_back(std::move(piece));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0, TokenType::Unknown);
  add("<s>", 0, TokenType::Control);
  add("</s>", 0, TokenType::Control);
  for (int b = 0; b < 256; ++b) add(byte_piece(b), 0, TokenType::Byte);
  for (const std::string& t : opt.user_defined) add(t, 0, TokenType::UserDefined);
  // Merged pieces score -(rank), so the encoder applies them in training order; characters
  // score below every merge (they are never the result of merging two symbols of valid text).
  const auto n_merged = float(merged.size());
  for (size_t i = 0; i < chars.size(); ++i)
    add(chars[i], -(n_merged + float(i)), TokenType::Normal);
  for (size_t r = 0; r < merged.size(); ++r) add(merged[r], -float(r), TokenType::Normal);
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.pad_id = -1;
  v.add_bos = true;
  v.add_eos = false;
  v.add_space_prefix = true;
  return v;
}

void write_tokenizer_gguf(const Vocab& v, const std::string& path) {
  gguf::GgufWriter w;
  w.set_string("general.name", "shrike BPE tokenizer, " + std::to_string(v.size()) + " tokens");
  add_vocab_to_gguf(v, "", w);
  w.write(path);
}

}  // namespace shrike::tokenizer
