#include "constrain/regex.h"

#include <cctype>
#include <string>

#include "constrain/error.h"
#include "constrain/utf8.h"

namespace shrike::constrain {
namespace {

constexpr size_t kMaxPattern = 16 * 1024;
constexpr int kMaxDepth = 256;
constexpr int kMaxCount = 1000;

struct Node {
  enum Kind { Empty, Class, Concat, Alt, Repeat };
  Node() = default;
  explicit Node(Kind k) : kind(k) {}
  Kind kind = Empty;
  CodeSet set;             // Class
  std::vector<Node> kids;  // Concat, Alt, Repeat (one)
  int min = 0, max = -1;   // Repeat; max -1: unbounded
};

CodeSet ascii_class(char c) {
  CodeSet s;
  switch (c) {
    case 'd':
      s.add('0', '9');
      break;
    case 'w':
      s.add('0', '9'), s.add('A', 'Z'), s.add('a', 'z'), s.add('_', '_');
      break;
    case 's':
      s.add(' ', ' '), s.add('\t', '\r');  // \t \n \v \f \r
      break;
  }
  return s;
}

class Parser {
 public:
  Parser(std::string_view p, const RegexOptions& o) : p_(p), opts_(o) {}

  Node parse() {
    if (p_.size() > kMaxPattern)
      fail("pattern of " + std::to_string(p_.size()) + " bytes exceeds the limit of " +
           std::to_string(kMaxPattern));
    if (!p_.empty() && p_[0] == '^') ++i_;
    Node n = alternation(0);
    if (i_ < p_.size()) fail(p_[i_] == ')' ? "unbalanced ')'" : "unexpected character");
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw ConstraintError("regex: " + what + " at offset " + std::to_string(i_) + " in \"" +
                          std::string(p_.substr(0, 200)) + "\"");
  }
  [[noreturn]] void unsupported(const std::string& what) const {
    fail(what + " are not supported");
  }
  bool at_end() const { return i_ >= p_.size(); }
  char peek() const { return p_[i_]; }

  Node alternation(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth));
    Node alt(Node::Alt);
    alt.kids.push_back(concatenation(depth));
    while (!at_end() && peek() == '|') {
      ++i_;
      alt.kids.push_back(concatenation(depth));
    }
    return alt.kids.size() == 1 ? std::move(alt.kids[0]) : alt;
  }

  Node concatenation(int depth) {
    Node cat(Node::Concat);
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        if (i_ + 1 != p_.size()) fail("'$' anchors are only supported at the end of the pattern");
        ++i_;
        break;
      }
      if (peek() == '^') fail("'^' anchors are only supported at the start of the pattern");
      Node atom_node = atom(depth);
      cat.kids.push_back(quantified(std::move(atom_node)));
    }
    return cat.kids.size() == 1 ? std::move(cat.kids[0]) : cat;
  }

  int number() {
    if (at_end() || peek() < '0' || peek() > '9') fail("expected a number in {m,n}");
    long v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > kMaxCount) fail("repetition count above " + std::to_string(kMaxCount));
      ++i_;
    }
    return int(v);
  }

  Node quantified(Node a) {
    while (!at_end()) {
      int min, max;
      const char c = peek();
      if (c == '?') {
        min = 0, max = 1, ++i_;
      } else if (c == '*') {
        min = 0, max = -1, ++i_;
      } else if (c == '+') {
        min = 1, max = -1, ++i_;
      } else if (c == '{') {
        ++i_;
        min = number();
        max = min;
        if (!at_end() && peek() == ',') {
          ++i_;
          max = !at_end() && peek() == '}' ? -1 : number();
        }
        if (at_end() || peek() != '}') fail("unterminated {m,n}");
        ++i_;
        if (max >= 0 && max < min) fail("{m,n} with n < m");
      } else {
        break;
      }
      if (!at_end() && peek() == '?')
        ++i_;  // lazy: the same language
      else if (!at_end() && peek() == '+')
        unsupported("possessive quantifiers");
      Node r(Node::Repeat);
      r.min = min, r.max = max;
      r.kids.push_back(std::move(a));
      a = std::move(r);
    }
    return a;
  }

  Node cls(CodeSet s) {
    if (opts_.json_string) {
      CodeSet safe = CodeSet::of(0x20, kMaxCodePoint);
      CodeSet bad;
      bad.add('"', '"'), bad.add('\\', '\\');
      s = s.intersect(bad.complement()).intersect(safe);
    }
    Node n(Node::Class);
    n.set = std::move(s);
    return n;
  }

  uint32_t hex(size_t digits) {
    uint32_t v = 0;
    for (size_t k = 0; k < digits; ++k) {
      if (at_end() || !std::isxdigit(uint8_t(peek()))) fail("expected a hex digit");
      const char c = peek();
      v = v * 16 + uint32_t(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
      ++i_;
    }
    return v;
  }

  // After a backslash: a code point set (escaped character or class shorthand).
  CodeSet escape(bool in_class) {
    if (at_end()) fail("trailing backslash");
    const char c = peek();
    ++i_;
    switch (c) {
      case 'd':
      case 'w':
      case 's':
        return ascii_class(c);
      case 'D':
      case 'W':
      case 'S':
        return ascii_class(char(c | 0x20)).complement();
      case 'n':
        return CodeSet::of('\n', '\n');
      case 't':
        return CodeSet::of('\t', '\t');
      case 'r':
        return CodeSet::of('\r', '\r');
      case 'f':
        return CodeSet::of('\f', '\f');
      case 'v':
        return CodeSet::of('\v', '\v');
      case '0':
        return CodeSet::of(0, 0);
      case 'x': {
        uint32_t v;
        if (!at_end() && peek() == '{') {
          ++i_;
          v = 0;
          size_t n = 0;
          while (!at_end() && peek() != '}' && n < 7) v = v * 16 + hex(1), ++n;
          if (at_end() || peek() != '}' || n == 0) fail("malformed \\x{...}");
          ++i_;
        } else {
          v = hex(2);
        }
        if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) fail("invalid code point");
        return CodeSet::of(v, v);
      }
      case 'u': {
        const uint32_t v = hex(4);
        if (v >= 0xD800 && v <= 0xDFFF) fail("surrogate code point");
        return CodeSet::of(v, v);
      }
      case 'b':
        if (in_class) return CodeSet::of('\b', '\b');
        unsupported("word boundaries (\\b)");
      case 'B':
        unsupported("word boundaries (\\B)");
      case 'A':
      case 'z':
      case 'Z':
      case 'G':
        unsupported("anchors other than a leading ^ and a trailing $");
      case 'p':
      case 'P':
        unsupported("Unicode properties (\\p{...})");
      case 'k':
        unsupported("backreferences");
      default:
        if (c >= '1' && c <= '9') unsupported("backreferences");
        if (std::isalnum(uint8_t(c))) fail(std::string("unknown escape \\") + c);
        --i_;  // escaped punctuation (or any non-alphanumeric): the character itself
        const uint32_t cp = literal_cp();
        return CodeSet::of(cp, cp);
    }
  }

  // One UTF-8 character of the pattern, as a code point.
  uint32_t literal_cp() {
    uint32_t cp;
    if (!next_code_point(p_, i_, cp)) fail("invalid UTF-8");
    return cp;
  }

  CodeSet bracket() {
    // at '[' already consumed
    bool negate = false;
    if (!at_end() && peek() == '^') negate = true, ++i_;
    CodeSet s;
    bool first = true;
    while (true) {
      if (at_end()) fail("unterminated character class");
      if (peek() == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      if (p_.substr(i_, 2) == "[:") unsupported("POSIX classes ([:alpha:])");
      CodeSet item;
      uint32_t lo = 0;
      bool single = false;
      if (peek() == '\\') {
        ++i_;
        item = escape(true);
        single = item.ranges().size() == 1 && item.ranges()[0].first == item.ranges()[0].second;
        lo = single ? item.ranges()[0].first : 0;
      } else {
        lo = literal_cp();
        item = CodeSet::of(lo, lo);
        single = true;
      }
      if (single && p_.substr(i_, 1) == "-" && p_.substr(i_ + 1, 1) != "]" && i_ + 1 < p_.size()) {
        ++i_;
        uint32_t hi;
        if (peek() == '\\') {
          ++i_;
          CodeSet e = escape(true);
          if (e.ranges().size() != 1 || e.ranges()[0].first != e.ranges()[0].second)
            fail("a class shorthand cannot end a range");
          hi = e.ranges()[0].first;
        } else {
          hi = literal_cp();
        }
        if (hi < lo) fail("range out of order in character class");
        item = CodeSet::of(lo, hi);
      }
      s.add(item);
    }
    return negate ? s.complement() : s;
  }

  Node atom(int depth) {
    const char c = peek();
    if (c == '(') {
      ++i_;
      if (!at_end() && peek() == '?') {
        ++i_;
        const std::string_view rest = p_.substr(i_);
        if (rest.starts_with(":")) {
          ++i_;
        } else if (rest.starts_with("=") || rest.starts_with("!") || rest.starts_with("<=") ||
                   rest.starts_with("<!")) {
          unsupported("lookaround assertions");
        } else if (rest.starts_with("P<") || rest.starts_with("<")) {
          i_ = p_.find('>', i_);
          if (i_ == std::string_view::npos) {
            i_ = p_.size();
            fail("unterminated group name");
          }
          ++i_;
        } else if (rest.starts_with("P=")) {
          unsupported("backreferences");
        } else {
          unsupported("inline flags and other (?...) groups");
        }
      }
      Node inner = alternation(depth + 1);
      if (at_end() || peek() != ')') fail("missing ')'");
      ++i_;
      return inner;
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') fail("quantifier with nothing to repeat");
    if (c == '[') {
      ++i_;
      return cls(bracket());
    }
    if (c == '.') {
      ++i_;
      CodeSet nl = CodeSet::of('\n', '\n');
      return cls(nl.complement());
    }
    if (c == '\\') {
      ++i_;
      return cls(escape(false));
    }
    const uint32_t cp = literal_cp();
    return cls(CodeSet::of(cp, cp));
  }

  std::string_view p_;
  RegexOptions opts_;
  size_t i_ = 0;
};

Frag emit(Nfa& nfa, const Node& n) {
  switch (n.kind) {
    case Node::Empty:
      return nfa.empty();
    case Node::Class:
      return nfa.seqs(utf8_sequences(n.set));
    case Node::Concat: {
      Frag f = nfa.empty();
      for (const Node& k : n.kids) f = nfa.concat(f, emit(nfa, k));
      return f;
    }
    case Node::Alt: {
      std::vector<Frag> alts;
      for (const Node& k : n.kids) alts.push_back(emit(nfa, k));
      return nfa.alt(alts);
    }
    case Node::Repeat: {
      Frag f = nfa.empty();
      for (int k = 0; k < n.min; ++k) f = nfa.concat(f, emit(nfa, n.kids[0]));
      if (n.max < 0) return nfa.concat(f, nfa.star(emit(nfa, n.kids[0])));
      if (n.max > n.min)
        f = nfa.concat(f, nfa.up_to(n.max - n.min, [&] { return emit(nfa, n.kids[0]); }));
      return f;
    }
  }
  return nfa.empty();
}

}  // namespace

Frag compile_regex(Nfa& nfa, std::string_view pattern, const RegexOptions& options) {
  const Node root = Parser(pattern, options).parse();
  return emit(nfa, root);
}

Automaton regex_automaton(std::string_view pattern) {
  Nfa nfa;
  const Frag f = compile_regex(nfa, pattern);
  return Automaton::determinize(nfa, f);
}

}  // namespace shrike::constrain
