#include "tokenizer/regex.h"

#include <stdexcept>
#include <string>

#include "tokenizer/unicode.h"

namespace shrike::tokenizer {

bool Regex::Class::matches(uint32_t cp, uint8_t c) const {
  bool m = (c & cls_any) != 0;
  for (size_t i = 0; !m && i < ranges.size(); ++i)
    m = cp >= ranges[i].first && cp <= ranges[i].second;
  return m != negated;
}

// Recursive descent straight to instructions. A node is emitted as a code fragment; quantifiers
// copy the fragment of their operand (patterns are tiny, so copying is simpler than patching).
struct Regex::Parser {
  std::vector<uint32_t> p;
  size_t i = 0;
  std::vector<Class>& classes;
  std::string src;

  [[noreturn]] void fail(const std::string& why) const {
    throw std::invalid_argument("regex '" + src + "': " + why + " at " + std::to_string(i));
  }
  bool at(uint32_t c) const { return i < p.size() && p[i] == c; }

  using Code = std::vector<Inst>;

  // Appends b to a, shifting b's jump targets (relative to b's start) by a's size.
  static void append(Code& a, const Code& b) {
    const auto base = int32_t(a.size());
    for (Inst in : b) {
      if (in.op == kSplit || in.op == kJmp || in.op == kNegLook) in.x += base;
      if (in.op == kSplit) in.y += base;
      a.push_back(in);
    }
  }

  Code alternation() {
    std::vector<Code> alts{sequence()};
    while (at('|')) {
      ++i;
      alts.push_back(sequence());
    }
    if (alts.size() == 1) return alts[0];
    // split L1, next; L1: alt0; jmp END; next: split L2, next2; ... last alt
    Code out;
    std::vector<size_t> jumps;
    for (size_t k = 0; k < alts.size(); ++k) {
      if (k + 1 < alts.size()) {
        const size_t s = out.size();
        out.push_back({kSplit, 0, 0});
        Code body = alts[k];
        out[s].x = int32_t(s + 1);
        append(out, body);
        jumps.push_back(out.size());
        out.push_back({kJmp, 0, 0});
        out[s].y = int32_t(out.size());
      } else {
        append(out, alts[k]);
      }
    }
    for (size_t j : jumps) out[j].x = int32_t(out.size());
    return out;
  }

  Code sequence() {
    Code out;
    while (i < p.size() && !at('|') && !at(')')) append(out, quantified());
    return out;
  }

  static Code optional(const Code& a, bool greedy = true) {
    Code out{{kSplit, 1, int32_t(a.size() + 1)}};
    if (!greedy) std::swap(out[0].x, out[0].y);
    append(out, a);
    return out;
  }
  static Code star(const Code& a) {  // L: split body, END; body; jmp L
    Code out{{kSplit, 1, int32_t(a.size() + 2)}};
    append(out, a);
    out.push_back({kJmp, 0, 0});
    return out;
  }

  Code quantified() {
    Code a = atom();
    for (;;) {
      if (at('?')) {
        ++i, a = optional(a);
      } else if (at('*')) {
        ++i, a = star(a);
      } else if (at('+')) {
        ++i;
        Code out = a;
        append(out, star(a));
        a = out;
      } else if (at('{')) {
        ++i;
        auto number = [&] {
          if (i >= p.size() || p[i] < '0' || p[i] > '9') fail("expected a number");
          int v = 0;
          while (i < p.size() && p[i] >= '0' && p[i] <= '9') v = v * 10 + int(p[i++] - '0');
          return v;
        };
        const int lo = number();
        int hi = lo;
        if (at(',')) ++i, hi = number();
        if (!at('}') || hi < lo) fail("bad {m,n}");
        ++i;
        Code out;
        for (int k = 0; k < lo; ++k) append(out, a);
        Code tail;  // nested optionals: (a(a(a)?)?)?
        for (int k = lo; k < hi; ++k) {
          Code t = a;
          append(t, tail);
          tail = optional(t);
        }
        append(out, tail);
        a = out;
      } else {
        return a;
      }
    }
  }

  // One escape inside or outside a class: adds to cls, returns false when it is a literal char.
  bool escape_into(Class& c, uint32_t& literal) {
    if (i >= p.size()) fail("trailing backslash");
    const uint32_t e = p[i++];
    switch (e) {
      case 's':
        c.cls_any |= unicode::kSpace;
        return true;
      case 'r':
        literal = '\r';
        return false;
      case 'n':
        literal = '\n';
        return false;
      case 't':
        literal = '\t';
        return false;
      case 'p': {
        if (!at('{') || i + 2 >= p.size() || p[i + 2] != '}') fail("expected \\p{X}");
        const uint32_t k = p[i + 1];
        i += 3;
        c.cls_any |= k == 'L'   ? unicode::kLetter
                     : k == 'N' ? unicode::kNumber
                     : k == 'P' ? unicode::kPunct
                                : (fail("unsupported \\p class"), 0);
        return true;
      }
      default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
          fail("unsupported escape");
        literal = e;
        return false;
    }
  }

  int32_t add_class(Class c) {
    classes.push_back(std::move(c));
    return int32_t(classes.size() - 1);
  }

  Code atom() {
    if (i >= p.size()) fail("unexpected end");
    const uint32_t c = p[i++];
    if (c == '(') {
      Code out;
      if (at('?') && i + 1 < p.size() && p[i + 1] == ':') {
        i += 2;
        out = alternation();
      } else if (at('?') && i + 1 < p.size() && p[i + 1] == '!') {
        i += 2;
        Code body = alternation();
        out.push_back({kNegLook, 0, 0});
        append(out, body);
        out.push_back({kMatch, 0, 0});
        out[0].x = int32_t(out.size());
      } else {
        fail("only (?:...) and (?!...) groups are supported");
      }
      if (!at(')')) fail("missing )");
      ++i;
      return out;
    }
    if (c == '$') return {{kEnd, 0, 0}};
    Class cls;
    if (c == '[') {
      if (at('^')) ++i, cls.negated = true;
      while (!at(']')) {
        if (i >= p.size()) fail("missing ]");
        uint32_t lo = p[i++];
        if (lo == '\\' && escape_into(cls, lo)) continue;
        uint32_t hi = lo;
        if (at('-') && i + 1 < p.size() && p[i + 1] != ']') {
          ++i;
          hi = p[i++];
          if (hi == '\\' && escape_into(cls, hi)) fail("class in a range");
        }
        cls.ranges.push_back({lo, hi});
      }
      ++i;
    } else if (c == '\\') {
      if (at('S')) {
        ++i, cls.cls_any = unicode::kSpace, cls.negated = true;
      } else {
        uint32_t lit;
        if (!escape_into(cls, lit)) cls.ranges.push_back({lit, lit});
      }
    } else if (c == ')' || c == '|' || c == '?' || c == '*' || c == '+' || c == '.') {
      fail("unsupported or misplaced metacharacter");
    } else {
      cls.ranges.push_back({c, c});
    }
    return {{kClass, add_class(std::move(cls)), 0}};
  }
};

Regex::Regex(std::string_view pattern) {
  std::vector<uint32_t> cps, offs;
  unicode::decode_utf8(pattern, cps, offs);
  Parser ps{cps, 0, classes_, std::string(pattern)};
  prog_ = ps.alternation();
  if (ps.i != cps.size()) ps.fail("unbalanced )");
  prog_.push_back({kMatch, 0, 0});
}

// Depth-first over alternatives with an explicit stack, preferred branch first, so the first
// kMatch reached is the leftmost-first (Perl) match. Patterns here have no nested unbounded loops,
// so backtracking stays polynomial.
bool Regex::run(int32_t pc, size_t sp, const uint32_t* cps, const uint8_t* cls, size_t end,
                size_t& match_end, Stack& stack) const {
  // Entries below `base` belong to an enclosing run (this one is a lookahead inside it).
  const size_t base = stack.size();
  for (;;) {
    const Inst& in = prog_[pc];
    bool ok = true;
    switch (in.op) {
      case kMatch:
        match_end = sp;
        stack.resize(base);
        return true;
      case kClass:
        ok = sp < end && classes_[in.x].matches(cps[sp], cls[sp]);
        ++sp, ++pc;
        break;
      case kSplit:
        stack.push_back({in.y, sp});
        pc = in.x;
        break;
      case kJmp:
        pc = in.x;
        break;
      case kEnd:
        ok = sp == end;
        ++pc;
        break;
      case kNegLook: {
        size_t unused;
        ok = !run(pc + 1, sp, cps, cls, end, unused, stack);
        pc = in.x;
        break;
      }
    }
    if (!ok) {
      if (stack.size() == base) return false;
      pc = stack.back().first;
      sp = stack.back().second;
      stack.pop_back();
    }
  }
}

int64_t Regex::match_at(const uint32_t* cps, const uint8_t* cls, size_t pos, size_t end) const {
  thread_local Stack stack;  // reused: this runs once per text position
  stack.clear();
  size_t e;
  return run(0, pos, cps, cls, end, e, stack) ? int64_t(e - pos) : -1;
}

}  // namespace shrike::tokenizer
