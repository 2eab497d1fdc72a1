// The generator's machinery: expanding the catalog's patterns into core phrases, splitting the
// opener x core x suffix combinations between train/dev/test, drawing balanced examples, and the
// noise pass. The words themselves live in generator_catalog.cc.
#include "data/generator.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>

namespace shrike::data {

using gen_detail::Lang;
using gen_detail::Rng;

namespace {

// ---- core phrases -------------------------------------------------------------------------

struct Segment {
  std::string text;  // literal text, or the slot name when is_slot
  std::string flavour;
  bool is_slot = false;
};

struct Core {
  std::string pattern;  // with {slot} placeholders, flavours stripped: part of the template id
  std::vector<Segment> segments;
};

// "[a|b] c[|d]" -> {"a c", "a cd", "b c", "b cd"}.
std::vector<std::string> expand_alternatives(std::string_view pattern) {
  std::vector<std::string> out{""};
  size_t i = 0;
  while (i < pattern.size()) {
    if (pattern[i] != '[') {
      const size_t end = std::min(pattern.find('[', i), pattern.size());
      for (std::string& s : out) s += pattern.substr(i, end - i);
      i = end;
      continue;
    }
    const size_t close = pattern.find(']', i);
    if (close == std::string_view::npos)
      throw std::logic_error("generator catalog: unclosed '[' in \"" + std::string(pattern) + "\"");
    std::vector<std::string_view> alternatives;
    for (size_t start = i + 1;;) {
      const size_t bar = std::min(pattern.find('|', start), close);
      alternatives.push_back(pattern.substr(start, bar - start));
      if (bar == close) break;
      start = bar + 1;
    }
    std::vector<std::string> next;
    for (const std::string& s : out)
      for (std::string_view a : alternatives) next.push_back(s + std::string(a));
    out = std::move(next);
    i = close + 1;
  }
  return out;
}

// Collapses runs of spaces, drops spaces before punctuation and at the ends: alternatives leave
// "please  refund" or " my account" behind.
std::string tidy_spaces(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    if ((c == ',' || c == '?' || c == '!' || c == '.') && !out.empty() && out.back() == ' ')
      out.pop_back();
    out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

Core parse_core(const std::string& text, const gen_detail::IntentPatterns& intent) {
  Core core;
  std::set<std::string> seen;
  size_t i = 0;
  while (i < text.size()) {
    const size_t open = text.find('{', i);
    if (open != i) {
      const size_t end = std::min(open, text.size());
      core.segments.push_back({text.substr(i, end - i), "", false});
      core.pattern += text.substr(i, end - i);
      i = end;
      continue;
    }
    const size_t close = text.find('}', open);
    if (close == std::string::npos)
      throw std::logic_error("generator catalog: unclosed '{' in \"" + text + "\"");
    std::string name = text.substr(open + 1, close - open - 1), flavour;
    if (const size_t colon = name.find(':'); colon != std::string::npos) {
      flavour = name.substr(colon + 1);
      name.resize(colon);
    }
    const bool known = std::any_of(intent.slots.begin(), intent.slots.end(),
                                   [&](const char* s) { return name == s; });
    if (!known || !seen.insert(name).second)
      throw std::logic_error("generator catalog: intent " + std::string(intent.name) + ": slot '" +
                             name + "' not listed or used twice in \"" + text + "\"");
    core.segments.push_back({name, flavour, true});
    core.pattern += "{" + name + "}";
    i = close + 1;
  }
  return core;
}

// Every intent's core phrases per language, expanded once and checked.
struct Catalog {
  std::vector<std::array<std::vector<Core>, 2>> cores;  // [intent][lang]
};

const Catalog& catalog() {
  static const Catalog cat = [] {
    Catalog c;
    const auto& slots = gen_detail::slot_types();
    for (const auto& intent : gen_detail::intent_patterns()) {
      for (const char* s : intent.slots)
        if (std::find_if(slots.begin(), slots.end(),
                         [&](const char* t) { return std::string_view(s) == t; }) == slots.end())
          throw std::logic_error("generator catalog: unknown slot type " + std::string(s));
      std::array<std::vector<Core>, 2> per_lang;
      for (int l = 0; l < 2; ++l) {
        std::set<std::string> seen;
        for (const char* pattern : l == 0 ? intent.en : intent.zh)
          for (const std::string& variant : expand_alternatives(pattern)) {
            Core core = parse_core(tidy_spaces(variant), intent);
            if (seen.insert(core.pattern).second) per_lang[l].push_back(std::move(core));
          }
      }
      c.cores.push_back(std::move(per_lang));
    }
    return c;
  }();
  return cat;
}

// ---- the template split -------------------------------------------------------------------

enum Split { kTrain = 0, kDev = 1, kTest = 2 };

uint64_t mix(uint64_t a, uint64_t b) {
  return Rng(a ^ (b * 0x9e3779b97f4a7c15ULL)).next();
}

uint64_t fnv1a(uint64_t h, std::string_view s) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// For each intent, language and core: the opener/suffix combinations (opener * n_suffixes +
// suffix) that belong to each split.
struct Plan {
  std::vector<Lang> langs;
  // [intent][lang][core][split]
  std::vector<std::array<std::vector<std::array<std::vector<uint32_t>, 3>>, 2>> combos;
};

Plan make_plan(const std::vector<Lang>& langs, uint64_t seed) {
  const Catalog& cat = catalog();
  Plan plan;
  plan.langs = langs;
  plan.combos.resize(cat.cores.size());
  const uint64_t base = mix(seed, 0x7e3a11a7e5ULL);
  for (size_t intent = 0; intent < cat.cores.size(); ++intent)
    for (Lang lang : langs) {
      const int l = static_cast<int>(lang);
      const auto& open = gen_detail::openers(lang);
      const auto& suffix = gen_detail::suffixes(lang);
      const gen_detail::Frame frame = gen_detail::intent_patterns()[intent].frame;
      const size_t n_open =
          frame == gen_detail::Frame::plain ? gen_detail::kPlainOpeners : open.size();
      const size_t n_suffix =
          frame == gen_detail::Frame::full ? suffix.size() : gen_detail::kPlainSuffixes;
      for (const Core& core : cat.cores[intent][l]) {
        std::array<std::vector<uint32_t>, 3> split;
        for (size_t o = 0; o < n_open; ++o)
          for (size_t s = 0; s < n_suffix; ++s) {
            // The hash of the surface pattern decides, so equal patterns share a split.
            const uint64_t h = fnv1a(fnv1a(fnv1a(base, open[o]), core.pattern), suffix[s]);
            const uint64_t bucket = mix(h, 1) % 100;
            const Split which = bucket < 80 ? kTrain : bucket < 90 ? kDev : kTest;
            split[which].push_back(static_cast<uint32_t>(o * suffix.size() + s));
          }
        // Every core phrase must be learnable: if the hash left it nothing in train, move one
        // of its evaluation combinations there (it then leaves dev/test, which stay disjoint).
        if (split[kTrain].empty())
          for (int sp : {kDev, kTest})
            if (!split[sp].empty()) {
              split[kTrain].push_back(split[sp].front());
              split[sp].erase(split[sp].begin());
              break;
            }
        plan.combos[intent][l].push_back(std::move(split));
      }
    }
  return plan;
}

// ---- drawing examples ---------------------------------------------------------------------

struct Piece {
  std::string text;
  bool is_slot = false;
};

struct Drawn {
  Example example;
  ExampleOrigin origin;
  std::vector<Piece> pieces;
  Lang lang = Lang::en;
};

template <typename T>
void shuffle(std::vector<T>& v, Rng& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

void finish(Drawn& d) {
  d.example.text.clear();
  for (const Piece& p : d.pieces) d.example.text += p.text;
}

Drawn render(size_t intent, Lang lang, const Core& core, uint32_t combo, Rng& rng) {
  const auto& open = gen_detail::openers(lang);
  const auto& suffix = gen_detail::suffixes(lang);
  const char* opener = open[combo / suffix.size()];
  const char* tail = suffix[combo % suffix.size()];
  Drawn d;
  d.lang = lang;
  d.example.intent = gen_detail::intent_patterns()[intent].name;
  d.example.lang = lang == Lang::en ? "en" : "zh";
  d.origin.template_id = std::string(opener) + core.pattern + tail;
  d.origin.core = core.pattern;
  if (*opener) d.pieces.push_back({opener, false});
  for (const Segment& seg : core.segments) {
    if (!seg.is_slot) {
      d.pieces.push_back({seg.text, false});
      continue;
    }
    std::string value = gen_detail::slot_value(seg.text, seg.flavour, lang, rng);
    d.example.slots[seg.text] = value;
    d.pieces.push_back({std::move(value), true});
  }
  if (*tail) d.pieces.push_back({tail, false});
  // Most people start a sentence with a capital; some do not.
  std::string& first = d.pieces.front().text;
  if (lang == Lang::en && !d.pieces.front().is_slot && !first.empty() && first[0] >= 'a' &&
      first[0] <= 'z' && rng.chance(0.7))
    first[0] = static_cast<char>(first[0] - 'a' + 'A');
  finish(d);
  return d;
}

// n examples from one split: languages alternate, intents go round in a fresh random order each
// round, and each intent cycles through its core phrases, so every intent appears in a split of
// at least intents x languages examples and every core phrase once there are enough examples.
std::vector<Drawn> draw(const Plan& plan, Split split, int64_t n, Rng& rng) {
  const Catalog& cat = catalog();
  const size_t n_intents = cat.cores.size();
  const size_t n_langs = plan.langs.size();
  std::vector<std::vector<size_t>> intent_order(n_langs);
  // [intent][lang]: the cores that have combinations in this split, in a shuffled cycle.
  std::vector<std::array<std::vector<size_t>, 2>> core_cycle(n_intents);
  std::vector<std::array<size_t, 2>> core_cursor(n_intents, {0, 0});
  for (size_t intent = 0; intent < n_intents; ++intent)
    for (Lang lang : plan.langs) {
      const int l = static_cast<int>(lang);
      for (size_t c = 0; c < plan.combos[intent][l].size(); ++c)
        if (!plan.combos[intent][l][c][split].empty()) core_cycle[intent][l].push_back(c);
      if (core_cycle[intent][l].empty())
        throw std::logic_error("generator: intent " +
                               std::string(gen_detail::intent_patterns()[intent].name) +
                               " has no template in a split");
      shuffle(core_cycle[intent][l], rng);
    }
  std::vector<Drawn> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const size_t li = static_cast<size_t>(i) % n_langs;
    const size_t round_pos = (static_cast<size_t>(i) / n_langs) % n_intents;
    auto& order = intent_order[li];
    if (round_pos == 0) {
      order.resize(n_intents);
      for (size_t k = 0; k < n_intents; ++k) order[k] = k;
      shuffle(order, rng);
    }
    const size_t intent = order[round_pos];
    const Lang lang = plan.langs[li];
    const int l = static_cast<int>(lang);
    const auto& cycle = core_cycle[intent][l];
    const size_t c = cycle[core_cursor[intent][l]++ % cycle.size()];
    const auto& combos = plan.combos[intent][l][c][split];
    out.push_back(render(intent, lang, cat.cores[intent][l][c], rng.pick(combos), rng));
  }
  shuffle(out, rng);
  return out;
}

// ---- noise --------------------------------------------------------------------------------
// Every operation edits literal pieces only (slot values stay verbatim) and says whether it
// changed anything.

using Pieces = std::vector<Piece>;

bool is_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_word_char(char c) {
  return is_letter(c) || (c >= '0' && c <= '9') || c == '\'';
}

// Byte offsets of the UTF-8 characters of s (plus s.size()).
std::vector<size_t> char_starts(const std::string& s) {
  std::vector<size_t> out;
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) out.push_back(i);
  out.push_back(s.size());
  return out;
}

// A CJK ideograph: three UTF-8 bytes in U+4E00..U+9FFF.
bool is_han(const std::string& s, size_t at) {
  if (at + 3 > s.size()) return false;
  const auto b0 = static_cast<unsigned char>(s[at]), b1 = static_cast<unsigned char>(s[at + 1]);
  const uint32_t cp =
      ((b0 & 0x0Fu) << 12) | ((b1 & 0x3Fu) << 6) | (static_cast<unsigned char>(s[at + 2]) & 0x3Fu);
  return (b0 & 0xF0) == 0xE0 && cp >= 0x4E00 && cp <= 0x9FFF;
}

struct Spot {
  size_t piece, pos, len;
};

const char* const kKeyboardNeighbours[26] = {
    "qwsz",   "vghn",  "xdfv", "serfcx", "wsdr", "drtgvc", "ftyhbv", "gyujnb", "ujko",
    "huikmn", "jiolm", "kop",  "njk",    "bhjm", "iklp",   "ol",     "wa",     "edft",
    "awedxz", "rfgy",  "yhji", "cfgb",   "qase", "zsdc",   "tghu",   "asx"};

bool typo(Pieces& pieces, Rng& rng) {
  std::vector<Spot> words;
  for (size_t p = 0; p < pieces.size(); ++p) {
    if (pieces[p].is_slot) continue;
    const std::string& t = pieces[p].text;
    for (size_t i = 0; i < t.size();) {
      size_t j = i;
      while (j < t.size() && is_letter(t[j])) ++j;
      if (j - i >= 3) words.push_back({p, i, j - i});
      i = j + 1;
    }
  }
  if (words.empty()) return false;
  const Spot w = rng.pick(words);
  std::string& t = pieces[w.piece].text;
  const size_t at = w.pos + rng.below(w.len - 1);  // a letter with a letter after it
  switch (rng.below(4)) {
    case 0:
      if (t[at] == t[at + 1]) return false;
      std::swap(t[at], t[at + 1]);
      return true;
    case 1:
      t.erase(at, 1);
      return true;
    case 2:
      t.insert(at, 1, t[at]);
      return true;
    default: {
      const char lower = static_cast<char>(t[at] | 0x20);
      const char* near = kKeyboardNeighbours[lower - 'a'];
      char c = near[rng.below(std::char_traits<char>::length(near))];
      if (t[at] != lower) c = static_cast<char>(c - 'a' + 'A');
      t[at] = c;
      return true;
    }
  }
}

bool change_case(Pieces& pieces, Rng& rng) {
  const bool upper = rng.below(6) == 0;  // shouting is rarer than not bothering with capitals
  bool changed = false;
  for (Piece& p : pieces) {
    if (p.is_slot) continue;
    for (char& c : p.text) {
      const char before = c;
      if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      changed |= c != before;
    }
  }
  return changed;
}

bool drop_punctuation(Pieces& pieces, Rng&) {
  static const std::vector<std::string> marks = {",",  ".",  "?",  "!",  ":",  "'", "，",
                                                 "。", "？", "！", "：", "～", "~"};
  bool changed = false;
  for (Piece& p : pieces) {
    if (p.is_slot) continue;
    for (const std::string& m : marks)
      for (size_t at; (at = p.text.find(m)) != std::string::npos; changed = true)
        p.text.erase(at, m.size());
  }
  return changed;
}

// Whole-word replacements as people text; matched case-insensitively.
const std::vector<std::pair<std::string, std::vector<std::string>>>& txt_speak() {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> table = {
      {"please", {"pls", "plz"}},
      {"you", {"u"}},
      {"your", {"ur"}},
      {"you're", {"ur", "youre"}},
      {"thanks", {"thx", "thnx"}},
      {"thank you", {"ty", "thx"}},
      {"as soon as possible", {"asap"}},
      {"are", {"r"}},
      {"okay", {"ok", "k"}},
      {"because", {"cuz", "bc"}},
      {"don't", {"dont"}},
      {"can't", {"cant"}},
      {"I'm", {"im"}},
      {"what's", {"whats"}},
      {"where's", {"wheres"}},
      {"haven't", {"havent"}},
      {"it's", {"its"}},
      {"really", {"rly"}},
      {"tomorrow", {"tmrw"}},
      {"with", {"w/"}},
      {"I", {"i"}}};
  return table;
}

bool txt(Pieces& pieces, Rng& rng) {
  struct Candidate {
    size_t piece, pos, len;
    const std::vector<std::string>* replacements;
  };
  std::vector<Candidate> found;
  for (size_t p = 0; p < pieces.size(); ++p) {
    if (pieces[p].is_slot) continue;
    std::string lower = pieces[p].text;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const auto& [word, repl] : txt_speak()) {
      std::string key = word;
      for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      for (size_t at = lower.find(key); at != std::string::npos; at = lower.find(key, at + 1)) {
        const size_t end = at + key.size();
        if ((at > 0 && is_word_char(lower[at - 1])) ||
            (end < lower.size() && is_word_char(lower[end])))
          continue;
        if (word == "I" && pieces[p].text[at] != 'I') continue;  // "i" is already lower case
        found.push_back({p, at, key.size(), &repl});
      }
    }
  }
  if (found.empty()) return false;
  const Candidate c = rng.pick(found);
  pieces[c.piece].text.replace(c.pos, c.len, rng.pick(*c.replacements));
  return true;
}

bool extra_space(Pieces& pieces, Rng& rng) {
  std::vector<Spot> spots;
  for (size_t p = 0; p < pieces.size(); ++p) {
    if (pieces[p].is_slot) continue;
    const std::vector<size_t> starts = char_starts(pieces[p].text);
    // Not at the very start or end of the text (those would be trimmed by any reader).
    for (size_t k = 0; k + 1 < starts.size(); ++k)
      if (!(p == 0 && k == 0)) spots.push_back({p, starts[k], 0});
  }
  if (spots.empty()) return false;
  const Spot s = rng.pick(spots);
  pieces[s.piece].text.insert(s.pos, " ");
  return true;
}

bool filler_particle(Pieces& pieces, Rng& rng) {
  static const std::vector<std::string> particles = {"啊", "呢", "哈", "吧", "嘛", "呀"};
  static const std::vector<std::string> marks = {"，", "？", "！", "。", "～"};
  std::vector<Spot> spots;
  for (size_t p = 0; p < pieces.size(); ++p) {
    if (pieces[p].is_slot) continue;
    for (const std::string& m : marks)
      for (size_t at = pieces[p].text.find(m); at != std::string::npos;
           at = pieces[p].text.find(m, at + 1))
        if (at > 0) spots.push_back({p, at, 0});
  }
  if (!pieces.back().is_slot) spots.push_back({pieces.size() - 1, pieces.back().text.size(), 0});
  const std::string& particle = rng.pick(particles);
  if (spots.empty()) {
    pieces.push_back({particle, false});
    return true;
  }
  const Spot s = rng.pick(spots);
  pieces[s.piece].text.insert(s.pos, particle);
  return true;
}

bool drop_or_repeat_han(Pieces& pieces, Rng& rng) {
  std::vector<Spot> spots;
  for (size_t p = 0; p < pieces.size(); ++p) {
    if (pieces[p].is_slot) continue;
    const std::vector<size_t> starts = char_starts(pieces[p].text);
    for (size_t k = 0; k + 1 < starts.size(); ++k)
      if (is_han(pieces[p].text, starts[k])) spots.push_back({p, starts[k], 3});
  }
  if (spots.size() < 2) return false;  // keep at least one character of a tiny utterance
  const Spot s = rng.pick(spots);
  std::string& t = pieces[s.piece].text;
  if (rng.chance(0.5))
    t.erase(s.pos, s.len);
  else
    t.insert(s.pos, t.substr(s.pos, s.len));
  return true;
}

bool homophone(Pieces& pieces, Rng& rng) {
  // Common slips of pinyin input: same sound, wrong character.
  static const std::vector<std::pair<std::string, std::string>> table = {
      {"在", "再"},     {"再", "在"},         {"的", "得"},     {"得", "的"},     {"已经", "以经"},
      {"账号", "帐号"}, {"订单", "定单"},     {"登录", "登陆"}, {"登陆", "登录"}, {"哪", "那"},
      {"吗", "嘛"},     {"其他", "其它"},     {"什么", "神马"}, {"收到", "受到"}, {"快递", "快第"},
      {"地址", "地止"}, {"验证码", "验证吗"}, {"怎么", "怎莫"}, {"取消", "取销"}, {"发票", "发漂"}};
  std::vector<std::pair<Spot, const std::string*>> found;
  for (size_t p = 0; p < pieces.size(); ++p) {
    if (pieces[p].is_slot) continue;
    for (const auto& [from, to] : table)
      for (size_t at = pieces[p].text.find(from); at != std::string::npos;
           at = pieces[p].text.find(from, at + 1))
        found.push_back({{p, at, from.size()}, &to});
  }
  if (found.empty()) return false;
  const auto& [s, to] = rng.pick(found);
  pieces[s.piece].text.replace(s.pos, s.len, *to);
  return true;
}

// Full-width <-> half-width punctuation and digits, all at once, as an input method switch does.
bool swap_width(Pieces& pieces, Rng& rng) {
  static const std::vector<std::pair<std::string, std::string>> pairs = [] {
    std::vector<std::pair<std::string, std::string>> v = {{"，", ","}, {"。", "."}, {"？", "?"},
                                                          {"！", "!"}, {"：", ":"}, {"～", "~"}};
    for (int d = 0; d < 10; ++d)
      v.push_back({std::string("\xEF\xBC") + static_cast<char>(0x90 + d),
                   std::string(1, static_cast<char>('0' + d))});
    return v;
  }();
  const bool to_half = rng.chance(0.6);
  bool changed = false;
  for (Piece& p : pieces) {
    if (p.is_slot) continue;
    for (const auto& [full, half] : pairs) {
      const std::string& from = to_half ? full : half;
      const std::string& to = to_half ? half : full;
      for (size_t at = p.text.find(from); at != std::string::npos;
           at = p.text.find(from, at + to.size())) {
        p.text.replace(at, from.size(), to);
        changed = true;
      }
    }
  }
  return changed;
}

using NoiseOp = bool (*)(Pieces&, Rng&);

void add_noise(Drawn& d, Rng& rng) {
  struct Weighted {
    NoiseOp op;
    int weight;
  };
  static const std::vector<Weighted> en = {
      {typo, 6}, {change_case, 3}, {drop_punctuation, 2}, {txt, 5}, {extra_space, 1}};
  static const std::vector<Weighted> zh = {{filler_particle, 4},  {drop_or_repeat_han, 4},
                                           {homophone, 4},        {swap_width, 3},
                                           {drop_punctuation, 2}, {extra_space, 1}};
  const auto& ops = d.lang == Lang::en ? en : zh;
  int total = 0;
  for (const Weighted& w : ops) total += w.weight;
  const int wanted = 1 + static_cast<int>(rng.chance(0.4)) + static_cast<int>(rng.chance(0.15));
  int done = 0;
  for (int attempt = 0; attempt < 24 && done < wanted; ++attempt) {
    int r = static_cast<int>(rng.below(static_cast<uint64_t>(total)));
    size_t k = 0;
    while (r >= ops[k].weight) r -= ops[k++].weight;
    done += ops[k].op(d.pieces, rng) ? 1 : 0;
  }
  const std::string before = d.example.text;
  finish(d);
  d.origin.noisy = d.example.text != before;
}

// ---- options ------------------------------------------------------------------------------

constexpr int64_t kMaxTrain = 5'000'000;

std::vector<Lang> parse_langs(const std::vector<std::string>& names) {
  if (names.empty()) throw std::invalid_argument("data gen: no language given (expected zh, en)");
  std::vector<Lang> langs;
  for (const std::string& name : names) {
    Lang lang;
    if (name == "en")
      lang = Lang::en;
    else if (name == "zh")
      lang = Lang::zh;
    else
      throw std::invalid_argument("data gen: unknown language '" + name + "' (expected zh, en)");
    if (std::find(langs.begin(), langs.end(), lang) != langs.end())
      throw std::invalid_argument("data gen: language '" + name + "' listed twice");
    langs.push_back(lang);
  }
  return langs;
}

void unpack(const std::vector<Drawn>& drawn, std::vector<Example>& examples,
            std::vector<ExampleOrigin>& origins) {
  examples.reserve(drawn.size());
  origins.reserve(drawn.size());
  for (const Drawn& d : drawn) {
    examples.push_back(d.example);
    origins.push_back(d.origin);
  }
}

}  // namespace

Example noisy_copy(const Example& ex, Rng& rng) {
  Drawn d;
  d.example = ex;
  bool han = ex.lang == "zh";
  for (size_t i = 0; !han && i < ex.text.size(); ++i) han = is_han(ex.text, i);
  d.lang = han ? Lang::zh : Lang::en;
  // The text as literal pieces around its slot values (first occurrence of each, left to right;
  // a value inside another value's span is left to that one).
  std::vector<std::pair<size_t, size_t>> spans;
  for (const auto& [name, value] : ex.slots)
    if (const size_t at = ex.text.find(value); !value.empty() && at != std::string::npos)
      spans.emplace_back(at, at + value.size());
  std::sort(spans.begin(), spans.end());
  size_t pos = 0;
  for (const auto& [b, e] : spans) {
    if (b < pos) continue;  // overlaps the previous value
    if (b > pos) d.pieces.push_back({ex.text.substr(pos, b - pos), false});
    d.pieces.push_back({ex.text.substr(b, e - b), true});
    pos = e;
  }
  if (pos < ex.text.size()) d.pieces.push_back({ex.text.substr(pos), false});
  add_noise(d, rng);
  return d.example;
}

GeneratedData generate_dataset(const GeneratorOptions& options) {
  const std::vector<Lang> langs = parse_langs(options.langs);
  if (options.n_train < 1 || options.n_train > kMaxTrain)
    throw std::invalid_argument("data gen: n must be in [1, " + std::to_string(kMaxTrain) +
                                "], got " + std::to_string(options.n_train));
  if (!(options.noise >= 0.0 && options.noise <= 1.0)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", options.noise);
    throw std::invalid_argument(std::string("data gen: noise must be a fraction in [0, 1], got ") +
                                got);
  }
  const Plan plan = make_plan(langs, options.seed);
  const int64_t n_eval = std::max<int64_t>(200, options.n_train / 10);

  GeneratedData out;
  Rng train_rng(mix(options.seed, 1));
  std::vector<Drawn> train = draw(plan, kTrain, options.n_train, train_rng);
  for (Drawn& d : train)
    if (train_rng.chance(options.noise)) add_noise(d, train_rng);
  unpack(train, out.train, out.train_origin);

  Rng dev_rng(mix(options.seed, 2));
  std::vector<Drawn> dev = draw(plan, kDev, n_eval, dev_rng);
  for (Drawn& d : dev)
    if (dev_rng.chance(options.noise)) add_noise(d, dev_rng);
  unpack(dev, out.dev, out.dev_origin);

  Rng test_rng(mix(options.seed, 3));
  std::vector<Drawn> test = draw(plan, kTest, n_eval, test_rng);
  unpack(test, out.test, out.test_origin);
  Rng noisy_rng(mix(options.seed, 4));
  for (Drawn& d : test) add_noise(d, noisy_rng);
  unpack(test, out.test_noisy, out.test_noisy_origin);
  return out;
}

void write_dataset(const GeneratedData& data, const std::string& dir) {
  create_dataset_directory(dir);
  const std::filesystem::path root(dir);
  write_examples(data.train, (root / "train.jsonl").string());
  write_examples(data.dev, (root / "dev.jsonl").string());
  write_examples(data.test, (root / "test.jsonl").string());
  write_examples(data.test_noisy, (root / "test_noisy.jsonl").string());
}

std::vector<IntentInfo> generator_intents() {
  std::vector<IntentInfo> out;
  for (const auto& intent : gen_detail::intent_patterns())
    out.push_back(
        {intent.name, std::vector<std::string>(intent.slots.begin(), intent.slots.end())});
  return out;
}

std::vector<std::string> generator_slot_types() {
  const auto& names = gen_detail::slot_types();
  return std::vector<std::string>(names.begin(), names.end());
}

int64_t generator_core_count(std::string_view intent, std::string_view lang) {
  if (lang != "en" && lang != "zh") return 0;
  const auto& patterns = gen_detail::intent_patterns();
  for (size_t i = 0; i < patterns.size(); ++i)
    if (intent == patterns[i].name)
      return static_cast<int64_t>(catalog().cores[i][lang == "en" ? 0 : 1].size());
  return 0;
}

}  // namespace shrike::data
