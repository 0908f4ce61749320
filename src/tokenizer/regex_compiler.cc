// Regex compiler: a recursive-descent parser builds a small AST, which is emitted as a program
// for the backtracking matcher in regex.cc (lookahead bodies become sub-programs).
#include <algorithm>
#include <cctype>
#include <iterator>

#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace nexus::tok {

namespace {

constexpr size_t kMaxProgram = 1 << 16;
constexpr int kMaxNesting = 100;  // patterns come from files; bound the parser's recursion

struct Node {
  enum Kind { kClass, kConcat, kAlt, kRepeat, kLook, kBol, kEol, kWordB, kNotWordB };
  Kind kind = kConcat;
  int cls = -1;
  std::vector<Node> kids;
  int min = 0, max = 0;
  bool greedy = true;
  bool negative = false;
};

bool nullable(const Node& n) {
  switch (n.kind) {
    case Node::kClass:
      return false;
    case Node::kConcat:
      return std::all_of(n.kids.begin(), n.kids.end(), [](const Node& k) { return nullable(k); });
    case Node::kAlt:
      return std::any_of(n.kids.begin(), n.kids.end(), [](const Node& k) { return nullable(k); });
    case Node::kRepeat:
      return n.min == 0 || nullable(n.kids[0]);
    default:
      return true;
  }
}

// Category mask for a \p{..} name, 0 when unknown.
uint32_t property_mask(std::string_view name) {
  static const struct {
    const char* name;
    uint32_t mask;
  } kProps[] = {
      {"L", kGcLetter}, {"Letter", kGcLetter}, {"M", kGcMark},      {"Mark", kGcMark},
      {"N", kGcNumber}, {"Number", kGcNumber}, {"P", kGcPunct},     {"Punctuation", kGcPunct},
      {"S", kGcSymbol}, {"Symbol", kGcSymbol}, {"Z", kGcSeparator}, {"Separator", kGcSeparator},
      {"C", kGcOther},  {"Other", kGcOther},
  };
  for (const auto& p : kProps)
    if (name == p.name) return p.mask;
  static const char* kTwo[] = {"Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd",
                               "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm",
                               "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"};
  for (size_t i = 0; i < std::size(kTwo); ++i)
    if (name == kTwo[i]) return 1u << i;
  return 0;
}

}  // namespace

class RegexCompiler {
 public:
  explicit RegexCompiler(std::string_view pattern) : pattern_(pattern) {
    size_t pos = 0;
    while (pos < pattern.size()) p_.push_back(decode_utf8(pattern, &pos));
  }

  Result<Regex> compile() {
    Node root = parse_alt(false);
    if (!error_.empty()) return fail_status();
    if (i_ < p_.size()) return fail_status("unbalanced ')'");
    Regex re;
    re.pattern_ = std::string(pattern_);
    re_ = &re;
    emit(root);
    re.prog_.push_back({Regex::Op::kMatch});
    // Lookahead bodies go after the main program, each ending in its own kMatch.
    for (size_t k = 0; k < looks_.size(); ++k) {
      re.prog_[looks_[k].first].x = static_cast<int32_t>(re.prog_.size());
      emit(*looks_[k].second);
      re.prog_.push_back({Regex::Op::kMatch});
    }
    if (!error_.empty()) return fail_status();
    if (re.prog_.size() > kMaxProgram) return fail_status("pattern expands to too many steps");
    re.classes_ = std::move(classes_);
    for (auto& c : re.classes_) c.finalize();
    re_ = nullptr;
    return re;
  }

 private:
  Status fail_status(std::string msg = {}) const {
    return Status::error("[regex] " + (msg.empty() ? error_ : msg) + " in pattern '" +
                         std::string(pattern_) + "'");
  }
  void fail(std::string msg) {
    if (error_.empty()) error_ = msg + " at position " + std::to_string(i_);
  }
  bool at_end() const { return i_ >= p_.size() || !error_.empty(); }
  char32_t peek(size_t k = 0) const { return i_ + k < p_.size() ? p_[i_ + k] : 0; }

  int add_class(CharClass c) {
    classes_.push_back(std::move(c));
    return static_cast<int>(classes_.size() - 1);
  }
  static void add_cp(CharClass* c, char32_t lo, char32_t hi, bool icase) {
    c->ranges.push_back({lo, hi});
    if (!icase) return;
    for (char32_t ch = std::max<char32_t>(lo, 'A'); ch <= std::min<char32_t>(hi, 'z'); ++ch) {
      if (ch >= 'A' && ch <= 'Z') c->ranges.push_back({ch + 32, ch + 32});
      if (ch >= 'a' && ch <= 'z') c->ranges.push_back({ch - 32, ch - 32});
      // Unicode simple case folding maps these two to ASCII letters.
      if (ch == 's' || ch == 'S') c->ranges.push_back({0x17F, 0x17F});
      if (ch == 'k' || ch == 'K') c->ranges.push_back({0x212A, 0x212A});
    }
    if (lo == hi && lo >= 128) {
      const char32_t low = to_lower(lo);
      if (low != lo) c->ranges.push_back({low, low});
    }
  }

  Node class_node(CharClass c) {
    Node n;
    n.kind = Node::kClass;
    n.cls = add_class(std::move(c));
    return n;
  }

  Node parse_alt(bool icase) {
    Node alt;
    alt.kind = Node::kAlt;
    if (++depth_ > kMaxNesting) {
      fail("groups nested too deeply");
      return alt;
    }
    alt.kids.push_back(parse_concat(icase));
    while (!at_end() && peek() == '|') {
      ++i_;
      alt.kids.push_back(parse_concat(icase));
    }
    --depth_;
    if (alt.kids.size() == 1) return std::move(alt.kids[0]);
    return alt;
  }

  Node parse_concat(bool icase) {
    Node seq;
    seq.kind = Node::kConcat;
    while (!at_end() && peek() != '|' && peek() != ')') {
      Node atom = parse_atom(icase);
      parse_quantifiers(&atom);
      seq.kids.push_back(std::move(atom));
    }
    return seq;
  }

  void parse_quantifiers(Node* atom) {
    while (!at_end()) {
      int min = 0, max = 0;
      const char32_t c = peek();
      if (c == '*') {
        min = 0;
        max = -1;
        ++i_;
      } else if (c == '+') {
        min = 1;
        max = -1;
        ++i_;
      } else if (c == '?') {
        min = 0;
        max = 1;
        ++i_;
      } else if (c == '{' && parse_braces(&min, &max)) {
      } else
        return;
      Node rep;
      rep.kind = Node::kRepeat;
      rep.min = min;
      rep.max = max;
      if (peek() == '?') {
        rep.greedy = false;
        ++i_;
      } else if (peek() == '+') {
        fail("possessive quantifiers are not supported");
        return;
      }
      rep.kids.push_back(std::move(*atom));
      *atom = std::move(rep);
    }
  }

  // {n}, {n,} or {n,m}; anything else leaves '{' to be read as a literal.
  bool parse_braces(int* min, int* max) {
    size_t j = i_ + 1;
    auto number = [&](int* v) {
      const size_t start = j;
      *v = 0;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9' && *v < 100000)
        *v = *v * 10 + (p_[j++] - '0');
      return j > start;
    };
    if (!number(min)) return false;
    *max = *min;
    if (j < p_.size() && p_[j] == ',') {
      ++j;
      if (!number(max)) *max = -1;
    }
    if (j >= p_.size() || p_[j] != '}' || (*max >= 0 && *max < *min)) return false;
    i_ = j + 1;
    return true;
  }

  Node parse_atom(bool icase) {
    const char32_t c = p_[i_++];
    Node n;
    switch (c) {
      case '(': {
        bool inner_icase = icase;
        if (peek() == '?') {
          const char32_t k = peek(1);
          if (k == ':') {
            i_ += 2;
          } else if (k == '=' || k == '!') {
            i_ += 2;
            n.kind = Node::kLook;
            n.negative = k == '!';
            n.kids.push_back(parse_alt(icase));
            expect_close();
            return n;
          } else if (k == 'i' && peek(2) == ':') {
            i_ += 3;
            inner_icase = true;
          } else {
            fail("unsupported group syntax '(?'");
            return n;
          }
        }
        n = parse_alt(inner_icase);
        expect_close();
        return n;
      }
      case '[':
        return class_node(parse_class(icase));
      case '.': {
        CharClass cc;
        cc.ranges.push_back({'\n', '\n'});
        cc.negated = true;
        return class_node(std::move(cc));
      }
      case '^':
        n.kind = Node::kBol;
        return n;
      case '$':
        n.kind = Node::kEol;
        return n;
      case '*':
      case '+':
      case '?':
        fail("nothing to repeat");
        return n;
      case '\\': {
        if (peek() == 'b' || peek() == 'B') {
          n.kind = peek() == 'b' ? Node::kWordB : Node::kNotWordB;
          ++i_;
          return n;
        }
        CharClass cc;
        char32_t lit = 0;
        if (parse_escape(&cc, &lit)) return class_node(std::move(cc));
        add_cp(&cc, lit, lit, icase);
        return class_node(std::move(cc));
      }
      default: {
        CharClass cc;
        add_cp(&cc, c, c, icase);
        return class_node(std::move(cc));
      }
    }
  }

  void expect_close() {
    if (error_.empty() && peek() != ')')
      fail("missing ')'");
    else
      ++i_;
  }

  // After a backslash: a class escape (\s \S \d \D \w \W \p{..} \P{..}) fills *cc and returns true;
  // a literal escape sets *lit and returns false.
  bool parse_escape(CharClass* cc, char32_t* lit) {
    if (i_ >= p_.size()) {
      fail("trailing backslash");
      return false;
    }
    const char32_t e = p_[i_++];
    switch (e) {
      case 's':
        cc->space = true;
        return true;
      case 'S':
        cc->not_space = true;
        return true;
      case 'd':
        cc->gc_mask |= gc_bit(Gc::kNd);
        return true;
      case 'D':
        cc->not_gc_masks.push_back(gc_bit(Gc::kNd));
        return true;
      case 'w':
        cc->gc_mask |= kGcWord;
        return true;
      case 'W':
        cc->not_gc_masks.push_back(kGcWord);
        return true;
      case 'p':
      case 'P': {
        std::string name;
        if (peek() == '{') {
          ++i_;
          while (i_ < p_.size() && p_[i_] != '}') name += static_cast<char>(p_[i_++]);
          ++i_;
        } else if (i_ < p_.size()) {
          name = static_cast<char>(p_[i_++]);
        }
        bool neg = e == 'P';
        if (!name.empty() && name[0] == '^') {
          neg = !neg;
          name.erase(0, 1);
        }
        const uint32_t mask = property_mask(name);
        if (mask == 0) fail("unsupported property \\p{" + name + "}");
        if (neg)
          cc->not_gc_masks.push_back(mask);
        else
          cc->gc_mask |= mask;
        return true;
      }
      case 'n':
        *lit = '\n';
        return false;
      case 'r':
        *lit = '\r';
        return false;
      case 't':
        *lit = '\t';
        return false;
      case 'f':
        *lit = '\f';
        return false;
      case 'v':
        *lit = '\v';
        return false;
      case 'a':
        *lit = 0x07;
        return false;
      case 'e':
        *lit = 0x1B;
        return false;
      case '0':
        *lit = 0;
        return false;
      case 'x':
      case 'u': {
        const bool braces = peek() == '{';
        if (braces) ++i_;
        char32_t v = 0;
        int digits = 0;
        const int max_digits = braces ? 8 : (e == 'x' ? 2 : 4);
        while (digits < max_digits && i_ < p_.size() && isxdigit(static_cast<int>(p_[i_]))) {
          const char32_t h = p_[i_++];
          v = v * 16 + (h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
          ++digits;
        }
        if (braces && peek() == '}') ++i_;
        if (digits == 0) fail("bad \\x escape");
        *lit = v;
        return false;
      }
      default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
          fail(std::string("unsupported escape \\") + static_cast<char>(e));
        *lit = e;
        return false;
    }
  }

  CharClass parse_class(bool icase) {
    CharClass cc;
    if (peek() == '^') {
      cc.negated = true;
      ++i_;
    }
    bool first = true;
    while (true) {
      if (i_ >= p_.size()) {
        fail("missing ']'");
        return cc;
      }
      char32_t c = p_[i_++];
      if (c == ']' && !first) break;
      first = false;
      if (c == '[') {
        fail("nested classes are not supported");
        return cc;
      }
      if (c == '\\') {
        char32_t lit = 0;
        if (parse_escape(&cc, &lit)) continue;
        c = lit;
      }
      char32_t hi = c;
      if (peek() == '-' && peek(1) != ']' && i_ + 1 < p_.size()) {
        i_ += 1;
        hi = p_[i_++];
        if (hi == '\\') {
          CharClass dummy;
          if (parse_escape(&dummy, &hi)) fail("class escape as range end");
        }
        if (hi < c) fail("reversed range in class");
      }
      add_cp(&cc, c, hi, icase);
    }
    return cc;
  }

  int32_t pc() const { return static_cast<int32_t>(re_->prog_.size()); }
  int32_t push(Regex::Inst inst) {
    re_->prog_.push_back(inst);
    return pc() - 1;
  }

  void emit(const Node& n) {
    if (re_->prog_.size() > kMaxProgram) return;  // reported by compile()
    using Op = Regex::Op;
    switch (n.kind) {
      case Node::kClass:
        push({Op::kClass, n.cls});
        break;
      case Node::kConcat:
        for (const Node& k : n.kids) emit(k);
        break;
      case Node::kAlt: {
        std::vector<int32_t> jumps;
        for (size_t b = 0; b < n.kids.size(); ++b) {
          const bool last = b + 1 == n.kids.size();
          const int32_t split = last ? -1 : push({Op::kSplit, 0, 0});
          if (!last) re_->prog_[split].x = pc();
          emit(n.kids[b]);
          if (!last) {
            jumps.push_back(push({Op::kJmp, 0}));
            re_->prog_[split].y = pc();
          }
        }
        for (int32_t j : jumps) re_->prog_[j].x = pc();
        break;
      }
      case Node::kRepeat:
        emit_repeat(n);
        break;
      case Node::kLook: {
        const int32_t at = push({Op::kLook, 0, n.negative ? 1 : 0});
        looks_.push_back({at, &n.kids[0]});
        break;
      }
      case Node::kBol:
        push({Op::kBol});
        break;
      case Node::kEol:
        push({Op::kEol});
        break;
      case Node::kWordB:
        push({Op::kWordB});
        break;
      case Node::kNotWordB:
        push({Op::kNotWordB});
        break;
    }
  }

  void emit_repeat(const Node& n) {
    using Op = Regex::Op;
    const Node& body = n.kids[0];
    if (body.kind == Node::kClass) {
      Regex::Inst inst{Op::kRepeat, body.cls, 0, n.min, n.max, n.greedy};
      push(inst);
      return;
    }
    for (int k = 0; k < n.min; ++k) emit(body);
    if (n.max < 0) {
      if (nullable(body)) {
        fail("unbounded repeat of a group that can match empty");
        return;
      }
      const int32_t loop = push({Op::kSplit, 0, 0});
      emit(body);
      push({Op::kJmp, loop});
      const int32_t after = pc();
      re_->prog_[loop].x = n.greedy ? loop + 1 : after;
      re_->prog_[loop].y = n.greedy ? after : loop + 1;
      return;
    }
    std::vector<int32_t> splits;
    for (int k = n.min; k < n.max; ++k) {
      splits.push_back(push({Op::kSplit, 0, 0}));
      emit(body);
    }
    const int32_t after = pc();
    for (int32_t s : splits) {
      re_->prog_[s].x = n.greedy ? s + 1 : after;
      re_->prog_[s].y = n.greedy ? after : s + 1;
    }
  }

  std::string_view pattern_;
  std::vector<char32_t> p_;
  size_t i_ = 0;
  int depth_ = 0;
  std::string error_;
  std::vector<CharClass> classes_;
  Regex* re_ = nullptr;
  std::vector<std::pair<int32_t, const Node*>> looks_;
};

Result<Regex> Regex::compile(std::string_view pattern) { return RegexCompiler(pattern).compile(); }

}  // namespace nexus::tok
