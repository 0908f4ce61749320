// The Jinja subset (serve/jinja.h): the template split into text and tags (with Hugging Face's
// trim_blocks and lstrip_blocks), a recursive-descent parser for tags and expressions, and a
// tree walker over JSON values.
#include "serve/jinja.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <stdexcept>
#include <vector>

namespace nexus::serve::jinja {
namespace {

struct JinjaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

Value undefined() { return Value(Value::value_t::discarded); }
bool is_undefined(const Value& v) { return v.is_discarded(); }

bool truthy(const Value& v) {
  if (is_undefined(v) || v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer()) return v.get<int64_t>() != 0;
  if (v.is_number()) return v.get<double>() != 0.0;
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();
  return !v.empty();
}

std::string py_repr(const Value& v, bool quote);

std::string to_text(const Value& v) { return py_repr(v, false); }

std::string py_repr(const Value& v, bool quote) {
  if (is_undefined(v)) return "";
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_string()) return quote ? "'" + v.get<std::string>() + "'" : v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) {
    const double d = v.get<double>();
    if (d == std::floor(d) && std::fabs(d) < 1e15) return std::to_string(static_cast<int64_t>(d)) + ".0";
    std::string s = Value(d).dump();
    return s;
  }
  std::string out;
  if (v.is_array()) {
    out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + py_repr(v[i], true);
    return out + "]";
  }
  out = "{";
  bool first = true;
  for (auto it = v.begin(); it != v.end(); ++it) {
    out += (first ? "" : ", ") + std::string("'") + it.key() + "': " + py_repr(it.value(), true);
    first = false;
  }
  return out + "}";
}

// ---- Expression tokens -------------------------------------------------------------------

enum class Tok { kName, kString, kInt, kFloat, kOp, kEnd };
struct Token {
  Tok kind;
  std::string text;
};

std::vector<Token> lex(std::string_view s) {
  std::vector<Token> out;
  size_t i = 0;
  static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "(", ")", "[", "]", "{",
                                     "}", ",", ":", ".", "|", "+", "-", "*", "/", "%", "~", "<",
                                     ">", "="};
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Tok::kName, std::string(s.substr(i, j - i))});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool dot = false;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) ||
                              (s[j] == '.' && !dot && j + 1 < s.size() &&
                               std::isdigit(static_cast<unsigned char>(s[j + 1]))))) {
        dot |= s[j] == '.';
        ++j;
      }
      out.push_back({dot ? Tok::kFloat : Tok::kInt, std::string(s.substr(i, j - i))});
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string str;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] == '\\' && j + 1 < s.size()) {
          const char e = s[++j];
          str += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
        } else {
          str += s[j];
        }
      }
      if (j >= s.size()) throw JinjaError("unterminated string");
      out.push_back({Tok::kString, str});
      i = j + 1;
    } else {
      bool found = false;
      for (const char* op : kOps) {
        const size_t n = std::char_traits<char>::length(op);
        if (s.substr(i, n) == op) {
          out.push_back({Tok::kOp, op});
          i += n;
          found = true;
          break;
        }
      }
      if (!found) throw JinjaError(std::string("unexpected character '") + c + "'");
    }
  }
  out.push_back({Tok::kEnd, ""});
  return out;
}

// ---- Expressions -------------------------------------------------------------------------

struct Scope;
struct Expr {
  virtual ~Expr() = default;
  virtual Value eval(Scope& s) const = 0;
};
using ExprP = std::unique_ptr<Expr>;

// Variables: a stack of frames; a for-loop body gets its own frame per iteration. Macros defined
// so far, by name: each renders its body with its parameters bound and returns the text.
struct Scope;
using MacroFn = std::function<Value(Scope&, std::vector<Value>,
                                    std::vector<std::pair<std::string, Value>>)>;
struct Scope {
  std::vector<Value> frames;
  std::map<std::string, MacroFn> macros;
  Value* find(const std::string& name) {
    for (auto it = frames.rbegin(); it != frames.rend(); ++it)
      if (auto f = it->find(name); f != it->end()) return &*f;
    return nullptr;
  }
};

struct Literal : Expr {
  Value v;
  explicit Literal(Value x) : v(std::move(x)) {}
  Value eval(Scope&) const override { return v; }
};

struct Var : Expr {
  std::string name;
  explicit Var(std::string n) : name(std::move(n)) {}
  Value eval(Scope& s) const override {
    const Value* v = s.find(name);
    return v ? *v : undefined();
  }
};

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_object()) {
    auto it = obj.find(name);
    return it == obj.end() ? undefined() : *it;
  }
  return undefined();
}

int64_t norm_index(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

Value get_index(const Value& obj, const Value& idx) {
  if (obj.is_object() && idx.is_string()) return get_attr(obj, idx.get<std::string>());
  if ((obj.is_array() || obj.is_string()) && idx.is_number_integer()) {
    const int64_t n = obj.is_array() ? static_cast<int64_t>(obj.size())
                                     : static_cast<int64_t>(obj.get_ref<const std::string&>().size());
    const int64_t i = norm_index(idx.get<int64_t>(), n);
    if (i < 0 || i >= n) return undefined();
    if (obj.is_array()) return obj[static_cast<size_t>(i)];
    return std::string(1, obj.get_ref<const std::string&>()[static_cast<size_t>(i)]);
  }
  return undefined();
}

struct Attr : Expr {
  ExprP obj;
  std::string name;
  Attr(ExprP o, std::string n) : obj(std::move(o)), name(std::move(n)) {}
  Value eval(Scope& s) const override { return get_attr(obj->eval(s), name); }
};

struct Index : Expr {
  ExprP obj, idx;
  Index(ExprP o, ExprP i) : obj(std::move(o)), idx(std::move(i)) {}
  Value eval(Scope& s) const override { return get_index(obj->eval(s), idx->eval(s)); }
};

struct Slice : Expr {
  ExprP obj, a, b, step;
  Value eval(Scope& s) const override {
    const Value o = obj->eval(s);
    const bool str = o.is_string();
    if (!str && !o.is_array()) throw JinjaError("slice of a value that is not a list or string");
    const int64_t n = str ? static_cast<int64_t>(o.get_ref<const std::string&>().size())
                          : static_cast<int64_t>(o.size());
    const int64_t st = step ? step->eval(s).get<int64_t>() : 1;
    if (st == 0) throw JinjaError("slice step 0");
    auto bound = [&](const ExprP& e, int64_t def) {
      if (!e) return def;
      int64_t v = norm_index(e->eval(s).get<int64_t>(), n);
      return st > 0 ? std::clamp<int64_t>(v, 0, n) : std::clamp<int64_t>(v, -1, n - 1);
    };
    const int64_t lo = bound(a, st > 0 ? 0 : n - 1), hi = bound(b, st > 0 ? n : -1);
    Value out = str ? Value(std::string()) : Value::array();
    for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) {
      if (str)
        out.get_ref<std::string&>() += o.get_ref<const std::string&>()[static_cast<size_t>(i)];
      else
        out.push_back(o[static_cast<size_t>(i)]);
    }
    return out;
  }
};

struct ListLit : Expr {
  std::vector<ExprP> items;
  Value eval(Scope& s) const override {
    Value out = Value::array();
    for (const ExprP& e : items) out.push_back(e->eval(s));
    return out;
  }
};

struct DictLit : Expr {
  std::vector<std::pair<ExprP, ExprP>> items;
  Value eval(Scope& s) const override {
    Value out = Value::object();
    for (const auto& [k, v] : items) out[to_text(k->eval(s))] = v->eval(s);
    return out;
  }
};

struct Unary : Expr {
  std::string op;
  ExprP e;
  Value eval(Scope& s) const override {
    const Value v = e->eval(s);
    if (op == "not") return !truthy(v);
    if (v.is_number_integer()) return -v.get<int64_t>();
    if (v.is_number()) return -v.get<double>();
    throw JinjaError("unary minus of a value that is not a number");
  }
};

double num(const Value& v) {
  if (!v.is_number()) throw JinjaError("arithmetic on " + py_repr(v, true));
  return v.get<double>();
}

struct Binary : Expr {
  std::string op;
  ExprP l, r;
  Value eval(Scope& s) const override {
    if (op == "and") {
      Value a = l->eval(s);
      return truthy(a) ? r->eval(s) : a;
    }
    if (op == "or") {
      Value a = l->eval(s);
      return truthy(a) ? a : r->eval(s);
    }
    const Value a = l->eval(s), b = r->eval(s);
    if (op == "~") return to_text(a) + to_text(b);
    if (op == "==") return a == b;
    if (op == "!=") return a != b;
    if (op == "in" || op == "not in") {
      bool in = false;
      if (b.is_string() && a.is_string())
        in = b.get_ref<const std::string&>().find(a.get_ref<const std::string&>()) != std::string::npos;
      else if (b.is_array())
        in = std::find(b.begin(), b.end(), a) != b.end();
      else if (b.is_object() && a.is_string())
        in = b.contains(a.get<std::string>());
      return op == "in" ? in : !in;
    }
    if (op == "+") {
      if (a.is_string() && b.is_string()) return a.get<std::string>() + b.get<std::string>();
      if (a.is_array() && b.is_array()) {
        Value out = a;
        for (const Value& x : b) out.push_back(x);
        return out;
      }
      if (a.is_number_integer() && b.is_number_integer()) return a.get<int64_t>() + b.get<int64_t>();
      return num(a) + num(b);
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      bool lt, eq;
      if (a.is_string() && b.is_string()) {
        lt = a.get<std::string>() < b.get<std::string>();
        eq = a == b;
      } else {
        lt = num(a) < num(b);
        eq = num(a) == num(b);
      }
      return op == "<" ? lt : op == ">" ? (!lt && !eq) : op == "<=" ? (lt || eq) : !lt;
    }
    const bool ints = a.is_number_integer() && b.is_number_integer();
    if (op == "-") return ints ? Value(a.get<int64_t>() - b.get<int64_t>()) : Value(num(a) - num(b));
    if (op == "*") {
      if (a.is_string() && b.is_number_integer()) {
        std::string out;
        for (int64_t i = 0; i < b.get<int64_t>(); ++i) out += a.get<std::string>();
        return out;
      }
      return ints ? Value(a.get<int64_t>() * b.get<int64_t>()) : Value(num(a) * num(b));
    }
    if (op == "/") {
      if (num(b) == 0) throw JinjaError("division by zero");
      return num(a) / num(b);
    }
    if (op == "//" || op == "%") {
      if (num(b) == 0) throw JinjaError("division by zero");
      if (ints) {
        const int64_t x = a.get<int64_t>(), y = b.get<int64_t>();
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          --q;
          m += y;
        }
        return op == "//" ? Value(q) : Value(m);
      }
      return op == "//" ? Value(std::floor(num(a) / num(b))) : Value(std::fmod(num(a), num(b)));
    }
    throw JinjaError("unknown operator " + op);
  }
};

struct Cond : Expr {
  ExprP then, cond, otherwise;
  Value eval(Scope& s) const override {
    if (truthy(cond->eval(s))) return then->eval(s);
    return otherwise ? otherwise->eval(s) : undefined();
  }
};

std::string strip(const std::string& s, const std::string& chars, bool left, bool right) {
  const std::string set = chars.empty() ? std::string(" \t\r\n\f\v") : chars;
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && set.find(s[b]) != std::string::npos) ++b;
  if (right)
    while (e > b && set.find(s[e - 1]) != std::string::npos) --e;
  return s.substr(b, e - b);
}

Value method(const Value& obj, const std::string& name, const std::vector<Value>& args) {
  auto arg = [&](size_t i) -> std::string {
    return i < args.size() && args[i].is_string() ? args[i].get<std::string>() : std::string();
  };
  if (obj.is_string()) {
    const std::string& s = obj.get_ref<const std::string&>();
    if (name == "strip") return strip(s, arg(0), true, true);
    if (name == "lstrip") return strip(s, arg(0), true, false);
    if (name == "rstrip") return strip(s, arg(0), false, true);
    if (name == "upper" || name == "lower") {
      std::string out = s;
      for (char& c : out) c = static_cast<char>(name == "upper" ? std::toupper(c) : std::tolower(c));
      return out;
    }
    if (name == "startswith") return s.rfind(arg(0), 0) == 0;
    if (name == "endswith")
      return s.size() >= arg(0).size() && s.compare(s.size() - arg(0).size(), arg(0).size(), arg(0)) == 0;
    if (name == "replace") {
      std::string out;
      const std::string from = arg(0), to = arg(1);
      if (from.empty()) return s;
      size_t pos = 0, at;
      while ((at = s.find(from, pos)) != std::string::npos) {
        out += s.substr(pos, at - pos) + to;
        pos = at + from.size();
      }
      return out + s.substr(pos);
    }
    if (name == "split") {
      Value out = Value::array();
      const std::string sep = arg(0);
      if (sep.empty()) {
        size_t i = 0;
        while (i < s.size()) {
          while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
          size_t j = i;
          while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
          if (j > i) out.push_back(s.substr(i, j - i));
          i = j;
        }
        return out;
      }
      size_t pos = 0, at;
      while ((at = s.find(sep, pos)) != std::string::npos) {
        out.push_back(s.substr(pos, at - pos));
        pos = at + sep.size();
      }
      out.push_back(s.substr(pos));
      return out;
    }
  }
  if (obj.is_object()) {
    if (name == "items") {
      Value out = Value::array();
      for (auto it = obj.begin(); it != obj.end(); ++it) out.push_back(Value::array({it.key(), it.value()}));
      return out;
    }
    if (name == "keys" || name == "values") {
      Value out = Value::array();
      for (auto it = obj.begin(); it != obj.end(); ++it)
        out.push_back(name == "keys" ? Value(it.key()) : it.value());
      return out;
    }
    if (name == "get") {
      const Value v = args.empty() ? undefined() : get_attr(obj, to_text(args[0]));
      return is_undefined(v) ? (args.size() > 1 ? args[1] : Value()) : v;
    }
  }
  throw JinjaError("no method " + name + " on " + py_repr(obj, true).substr(0, 40));
}

struct Call : Expr {
  ExprP callee;  // a Var (function) or an Attr (method)
  std::vector<ExprP> args;
  std::vector<std::pair<std::string, ExprP>> kwargs;
  Value eval(Scope& s) const override {
    std::vector<Value> a;
    for (const ExprP& e : args) a.push_back(e->eval(s));
    if (const auto* m = dynamic_cast<const Attr*>(callee.get())) return method(m->obj->eval(s), m->name, a);
    const auto* f = dynamic_cast<const Var*>(callee.get());
    if (!f) throw JinjaError("call of something that is not a function");
    if (auto m = s.macros.find(f->name); m != s.macros.end()) {
      std::vector<std::pair<std::string, Value>> kw;
      for (const auto& [k, v] : kwargs) kw.emplace_back(k, v->eval(s));
      return m->second(s, std::move(a), std::move(kw));
    }
    if (f->name == "raise_exception")
      throw JinjaError(a.empty() ? std::string("raise_exception") : to_text(a[0]));
    if (f->name == "namespace") {
      Value ns = Value::object();
      for (const auto& [k, v] : kwargs) ns[k] = v->eval(s);
      return ns;
    }
    if (f->name == "range") {
      int64_t lo = 0, hi = 0;
      if (a.size() == 1) hi = a[0].get<int64_t>();
      if (a.size() >= 2) lo = a[0].get<int64_t>(), hi = a[1].get<int64_t>();
      Value out = Value::array();
      for (int64_t i = lo; i < hi; ++i) out.push_back(i);
      return out;
    }
    throw JinjaError("unknown function " + f->name + "()");
  }
};

struct Filter : Expr {
  ExprP e;
  std::string name;
  std::vector<ExprP> args;
  Value eval(Scope& s) const override {
    const Value v = e->eval(s);
    std::vector<Value> a;
    for (const ExprP& x : args) a.push_back(x->eval(s));
    if (name == "trim") return strip(to_text(v), "", true, true);
    if (name == "length" || name == "count") {
      if (v.is_string()) return static_cast<int64_t>(v.get_ref<const std::string&>().size());
      return static_cast<int64_t>(is_undefined(v) ? 0 : v.size());
    }
    if (name == "upper" || name == "lower") return method(Value(to_text(v)), name, {});
    if (name == "tojson") return v.dump(a.empty() ? -1 : static_cast<int>(a[0].get<int64_t>()));
    if (name == "string") return to_text(v);
    if (name == "int") return v.is_number() ? Value(static_cast<int64_t>(v.get<double>())) : Value(0);
    if (name == "default" || name == "d") return is_undefined(v) ? (a.empty() ? Value("") : a[0]) : v;
    if (name == "first" || name == "last") {
      if (!v.is_array() || v.empty()) return undefined();
      return name == "first" ? v.front() : v.back();
    }
    if (name == "list") return v.is_array() ? v : Value::array();
    if (name == "join") {
      std::string out;
      const std::string sep = a.empty() ? "" : to_text(a[0]);
      for (size_t i = 0; v.is_array() && i < v.size(); ++i) out += (i ? sep : "") + to_text(v[i]);
      return out;
    }
    if (name == "items") return method(v, "items", {});
    throw JinjaError("unknown filter " + name);
  }
};

struct Test : Expr {
  ExprP e;
  std::string name;
  bool negate = false;
  Value eval(Scope& s) const override {
    const Value v = e->eval(s);
    bool r;
    if (name == "defined") r = !is_undefined(v);
    else if (name == "undefined") r = is_undefined(v);
    else if (name == "none") r = v.is_null();
    else if (name == "string") r = v.is_string();
    else if (name == "number") r = v.is_number();
    else if (name == "mapping") r = v.is_object();
    else if (name == "iterable" || name == "sequence") r = v.is_array() || v.is_string() || v.is_object();
    else if (name == "boolean") r = v.is_boolean();
    else if (name == "true") r = v.is_boolean() && v.get<bool>();
    else if (name == "false") r = v.is_boolean() && !v.get<bool>();
    else if (name == "even" || name == "odd") r = v.is_number_integer() && (v.get<int64_t>() % 2 == 0) == (name == "even");
    else throw JinjaError("unknown test " + name);
    return negate ? !r : r;
  }
};

class ExprParser {
 public:
  explicit ExprParser(std::vector<Token> t) : t_(std::move(t)) {}
  ExprP parse() { return ternary(); }
  // An expression without the conditional form (a for-loop's iterable, before its `if`).
  ExprP ternary_no_if() { return or_expr(); }
  const Token& peek() const { return t_[i_]; }
  bool at_op(const char* op) const { return t_[i_].kind == Tok::kOp && t_[i_].text == op; }
  bool at_name(const char* n) const { return t_[i_].kind == Tok::kName && t_[i_].text == n; }
  Token next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  void expect_op(const char* op) {
    if (!at_op(op)) throw JinjaError(std::string("expected '") + op + "', got '" + peek().text + "'");
    ++i_;
  }
  std::string expect_name() {
    if (peek().kind != Tok::kName) throw JinjaError("expected a name, got '" + peek().text + "'");
    return next().text;
  }
  bool done() const { return t_[i_].kind == Tok::kEnd; }

  ExprP ternary() {
    ExprP e = or_expr();
    if (at_name("if")) {
      ++i_;
      auto c = std::make_unique<Cond>();
      c->then = std::move(e);
      c->cond = or_expr();
      if (at_name("else")) {
        ++i_;
        c->otherwise = ternary();
      }
      return c;
    }
    return e;
  }

 private:
  ExprP binary(std::string op, ExprP l, ExprP r) {
    auto b = std::make_unique<Binary>();
    b->op = std::move(op);
    b->l = std::move(l);
    b->r = std::move(r);
    return b;
  }
  ExprP or_expr() {
    ExprP e = and_expr();
    while (at_name("or")) {
      ++i_;
      e = binary("or", std::move(e), and_expr());
    }
    return e;
  }
  ExprP and_expr() {
    ExprP e = not_expr();
    while (at_name("and")) {
      ++i_;
      e = binary("and", std::move(e), not_expr());
    }
    return e;
  }
  ExprP not_expr() {
    if (at_name("not")) {
      ++i_;
      auto u = std::make_unique<Unary>();
      u->op = "not";
      u->e = not_expr();
      return u;
    }
    return compare();
  }
  ExprP compare() {
    ExprP e = concat();
    for (;;) {
      if (at_op("==") || at_op("!=") || at_op("<") || at_op(">") || at_op("<=") || at_op(">=")) {
        std::string op = next().text;
        e = binary(op, std::move(e), concat());
      } else if (at_name("in")) {
        ++i_;
        e = binary("in", std::move(e), concat());
      } else if (at_name("not") && t_[i_ + 1].kind == Tok::kName && t_[i_ + 1].text == "in") {
        i_ += 2;
        e = binary("not in", std::move(e), concat());
      } else if (at_name("is")) {
        ++i_;
        auto t = std::make_unique<Test>();
        if (at_name("not")) {
          ++i_;
          t->negate = true;
        }
        t->name = expect_name();
        t->e = std::move(e);
        e = std::move(t);
      } else {
        return e;
      }
    }
  }
  ExprP concat() {
    ExprP e = additive();
    while (at_op("~")) {
      ++i_;
      e = binary("~", std::move(e), additive());
    }
    return e;
  }
  ExprP additive() {
    ExprP e = term();
    while (at_op("+") || at_op("-")) {
      std::string op = next().text;
      e = binary(op, std::move(e), term());
    }
    return e;
  }
  ExprP term() {
    ExprP e = unary();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      std::string op = next().text;
      e = binary(op, std::move(e), unary());
    }
    return e;
  }
  ExprP unary() {
    if (at_op("-")) {
      ++i_;
      auto u = std::make_unique<Unary>();
      u->op = "-";
      u->e = unary();
      return u;
    }
    return filtered();
  }
  ExprP filtered() {
    ExprP e = postfix(primary());
    while (at_op("|")) {
      ++i_;
      auto f = std::make_unique<Filter>();
      f->name = expect_name();
      f->e = std::move(e);
      if (at_op("(")) {
        ++i_;
        while (!at_op(")")) {
          f->args.push_back(ternary());
          if (!at_op(")")) expect_op(",");
        }
        ++i_;
      }
      e = std::move(f);
    }
    return e;
  }
  ExprP postfix(ExprP e) {
    for (;;) {
      if (at_op(".")) {
        ++i_;
        e = std::make_unique<Attr>(std::move(e), expect_name());
      } else if (at_op("[")) {
        ++i_;
        ExprP a, b, st;
        bool slice = false;
        if (!at_op(":")) a = ternary();
        if (at_op(":")) {
          slice = true;
          ++i_;
          if (!at_op("]") && !at_op(":")) b = ternary();
          if (at_op(":")) {
            ++i_;
            if (!at_op("]")) st = ternary();
          }
        }
        expect_op("]");
        if (slice) {
          auto sl = std::make_unique<Slice>();
          sl->obj = std::move(e);
          sl->a = std::move(a);
          sl->b = std::move(b);
          sl->step = std::move(st);
          e = std::move(sl);
        } else {
          e = std::make_unique<Index>(std::move(e), std::move(a));
        }
      } else if (at_op("(")) {
        ++i_;
        auto c = std::make_unique<Call>();
        c->callee = std::move(e);
        while (!at_op(")")) {
          if (peek().kind == Tok::kName && t_[i_ + 1].kind == Tok::kOp && t_[i_ + 1].text == "=") {
            std::string k = next().text;
            ++i_;
            c->kwargs.emplace_back(k, ternary());
          } else {
            c->args.push_back(ternary());
          }
          if (!at_op(")")) expect_op(",");
        }
        ++i_;
        e = std::move(c);
      } else {
        return e;
      }
    }
  }
  ExprP primary() {
    const Token t = next();
    switch (t.kind) {
      case Tok::kString: {
        std::string s = t.text;
        while (peek().kind == Tok::kString) s += next().text;  // adjacent literals join
        return std::make_unique<Literal>(s);
      }
      case Tok::kInt:
        return std::make_unique<Literal>(std::stoll(t.text));
      case Tok::kFloat:
        return std::make_unique<Literal>(std::stod(t.text));
      case Tok::kName:
        if (t.text == "true" || t.text == "True") return std::make_unique<Literal>(true);
        if (t.text == "false" || t.text == "False") return std::make_unique<Literal>(false);
        if (t.text == "none" || t.text == "None") return std::make_unique<Literal>(nullptr);
        return std::make_unique<Var>(t.text);
      case Tok::kOp:
        if (t.text == "(") {
          ExprP e = ternary();
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          auto l = std::make_unique<ListLit>();
          while (!at_op("]")) {
            l->items.push_back(ternary());
            if (!at_op("]")) expect_op(",");
          }
          ++i_;
          return l;
        }
        if (t.text == "{") {
          auto d = std::make_unique<DictLit>();
          while (!at_op("}")) {
            ExprP k = ternary();
            expect_op(":");
            d->items.emplace_back(std::move(k), ternary());
            if (!at_op("}")) expect_op(",");
          }
          ++i_;
          return d;
        }
        break;
      default:
        break;
    }
    throw JinjaError("unexpected '" + t.text + "' in an expression");
  }

  std::vector<Token> t_;
  size_t i_ = 0;
};

}  // namespace

// ---- Statements --------------------------------------------------------------------------

struct Template::Node {
  virtual ~Node() = default;
  virtual void render(Scope& s, std::string& out) const = 0;
};

namespace {

using NodeP = std::unique_ptr<Template::Node>;

struct Block : Template::Node {
  std::vector<NodeP> nodes;
  void render(Scope& s, std::string& out) const override {
    for (const NodeP& n : nodes) n->render(s, out);
  }
};

struct Text : Template::Node {
  std::string text;
  void render(Scope&, std::string& out) const override { out += text; }
};

struct Output : Template::Node {
  ExprP e;
  void render(Scope& s, std::string& out) const override { out += to_text(e->eval(s)); }
};

struct If : Template::Node {
  std::vector<std::pair<ExprP, std::unique_ptr<Block>>> branches;  // a null condition: else
  void render(Scope& s, std::string& out) const override {
    for (const auto& [cond, body] : branches)
      if (!cond || truthy(cond->eval(s))) return body->render(s, out);
  }
};

struct For : Template::Node {
  std::vector<std::string> vars;
  ExprP iterable, filter;
  std::unique_ptr<Block> body, otherwise;
  void render(Scope& s, std::string& out) const override {
    Value items = iterable->eval(s);
    if (items.is_object()) items = method(items, "items", {});
    if (items.is_string()) {
      Value chars = Value::array();
      for (char c : items.get<std::string>()) chars.push_back(std::string(1, c));
      items = chars;
    }
    if (is_undefined(items) || items.is_null()) items = Value::array();
    if (!items.is_array()) throw JinjaError("for over a value that is not a list");
    std::vector<Value> kept;
    for (const Value& it : items) {
      if (filter) {
        s.frames.push_back(Value::object());
        bind(s.frames.back(), it);
        const bool keep = truthy(filter->eval(s));
        s.frames.pop_back();
        if (!keep) continue;
      }
      kept.push_back(it);
    }
    if (kept.empty()) {
      if (otherwise) otherwise->render(s, out);
      return;
    }
    const auto n = static_cast<int64_t>(kept.size());
    for (int64_t i = 0; i < n; ++i) {
      s.frames.push_back(Value::object());
      bind(s.frames.back(), kept[i]);
      s.frames.back()["loop"] = {{"index", i + 1},         {"index0", i},
                                 {"revindex", n - i},      {"revindex0", n - i - 1},
                                 {"first", i == 0},        {"last", i == n - 1},
                                 {"length", n}};
      body->render(s, out);
      s.frames.pop_back();
    }
  }
  void bind(Value& frame, const Value& item) const {
    if (vars.size() == 1) {
      frame[vars[0]] = item;
      return;
    }
    for (size_t k = 0; k < vars.size(); ++k)
      frame[vars[k]] = item.is_array() && k < item.size() ? item[k] : undefined();
  }
};

struct Set : Template::Node {
  std::string name, attr;  // attr: `set ns.attr = ...`
  ExprP e;
  void render(Scope& s, std::string&) const override {
    Value v = e->eval(s);
    if (!attr.empty()) {
      Value* ns = s.find(name);
      if (!ns || !ns->is_object()) throw JinjaError("set " + name + "." + attr + ": not a namespace");
      (*ns)[attr] = std::move(v);
      return;
    }
    s.frames.back()[name] = std::move(v);
  }
};

// {% macro name(a, b=default) %}...{% endmacro %}: rendering the definition makes name() callable;
// a call binds the arguments (positional, then by name, then the defaults; the rest undefined) in
// a frame of their own and returns the body's text.
struct Macro : Template::Node {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprP> defaults;  // null where a parameter has none
  std::unique_ptr<Block> body;
  void render(Scope& s, std::string&) const override {
    s.macros[name] = [this](Scope& sc, std::vector<Value> args,
                            std::vector<std::pair<std::string, Value>> kwargs) -> Value {
      if (args.size() > params.size())
        throw JinjaError("macro " + name + "() takes " + std::to_string(params.size()) +
                         " arguments, got " + std::to_string(args.size()));
      Value frame = Value::object();
      for (size_t i = 0; i < params.size(); ++i) {
        if (i < args.size())
          frame[params[i]] = std::move(args[i]);
        else if (defaults[i])
          frame[params[i]] = defaults[i]->eval(sc);
      }
      for (auto& [k, v] : kwargs) {
        if (std::find(params.begin(), params.end(), k) == params.end())
          throw JinjaError("macro " + name + "() has no parameter " + k);
        frame[k] = std::move(v);
      }
      sc.frames.push_back(std::move(frame));
      std::string out;
      body->render(sc, out);
      sc.frames.pop_back();
      return out;
    };
  }
};

// The template as text and tags, with whitespace control applied to the text.
struct Piece {
  enum Kind { kText, kExpr, kStmt } kind;
  std::string text;
  int line;
};

std::vector<Piece> split(std::string_view src) {
  std::vector<Piece> out;
  size_t i = 0;
  int line = 1;
  bool trim_next = false;     // a '-' closed the last tag: strip the next text's leading whitespace
  bool newline_next = false;  // a block tag closed: drop one newline starting the next text
  while (i <= src.size()) {
    size_t open = src.find('{', i);
    while (open != std::string_view::npos && open + 1 < src.size() && src[open + 1] != '{' &&
           src[open + 1] != '%' && src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open + 1 >= src.size()) open = std::string_view::npos;
    std::string text(src.substr(i, open == std::string_view::npos ? std::string_view::npos : open - i));
    if (trim_next) text = strip(text, "", true, false);
    if (newline_next && !text.empty() && text[0] == '\n') text.erase(0, 1);
    else if (newline_next && text.rfind("\r\n", 0) == 0) text.erase(0, 2);
    if (open == std::string_view::npos) {
      if (!text.empty()) out.push_back({Piece::kText, text, line});
      break;
    }
    const char kind = src[open + 1];
    const bool left_trim = open + 2 < src.size() && src[open + 2] == '-';
    const char* close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    const size_t end = src.find(close, open + 2);
    if (end == std::string_view::npos)
      throw JinjaError("line " + std::to_string(line) + ": unclosed tag");
    const bool right_trim = end > open + 2 && src[end - 1] == '-';
    const bool block = kind != '{';
    if (left_trim) {
      text = strip(text, "", false, true);
    } else if (block) {  // lstrip_blocks: the line's indentation before a block tag goes
      const size_t nl = text.find_last_of('\n');
      const std::string tail = text.substr(nl == std::string::npos ? 0 : nl + 1);
      if (tail.find_first_not_of(" \t") == std::string::npos && (nl != std::string::npos || i == 0))
        text.erase(nl == std::string::npos ? 0 : nl + 1);
    }
    if (!text.empty()) out.push_back({Piece::kText, text, line});
    for (char c : src.substr(i, open - i)) line += c == '\n';
    const size_t body_begin = open + 2 + (left_trim ? 1 : 0);
    const size_t body_end = end - (right_trim ? 1 : 0);
    const std::string body(src.substr(body_begin, body_end > body_begin ? body_end - body_begin : 0));
    if (kind == '{') out.push_back({Piece::kExpr, body, line});
    if (kind == '%') out.push_back({Piece::kStmt, body, line});
    for (char c : src.substr(open, end + 2 - open)) line += c == '\n';
    trim_next = right_trim;
    newline_next = block;  // trim_blocks
    i = end + 2;
  }
  return out;
}

class Parser {
 public:
  explicit Parser(std::vector<Piece> p) : p_(std::move(p)) {}

  std::unique_ptr<Block> block(const std::vector<std::string>& ends, std::string* ended) {
    auto b = std::make_unique<Block>();
    while (i_ < p_.size()) {
      const Piece& piece = p_[i_];
      line_ = piece.line;
      if (piece.kind == Piece::kText) {
        auto t = std::make_unique<Text>();
        t->text = piece.text;
        b->nodes.push_back(std::move(t));
        ++i_;
        continue;
      }
      if (piece.kind == Piece::kExpr) {
        ExprParser ep(lex(piece.text));
        auto o = std::make_unique<Output>();
        o->e = ep.parse();
        if (!ep.done()) throw JinjaError("unexpected '" + ep.peek().text + "' after an expression");
        b->nodes.push_back(std::move(o));
        ++i_;
        continue;
      }
      ExprParser ep(lex(piece.text));
      const std::string kw = ep.expect_name();
      if (std::find(ends.begin(), ends.end(), kw) != ends.end()) {
        *ended = kw;
        return b;  // the caller reads the tag (elif's condition)
      }
      ++i_;
      if (kw == "if") {
        auto n = std::make_unique<If>();
        ExprP cond = ep.parse();
        for (;;) {
          std::string end;
          auto body = block({"elif", "else", "endif"}, &end);
          n->branches.emplace_back(std::move(cond), std::move(body));
          if (end.empty()) throw JinjaError("if without endif");
          ExprParser tag(lex(p_[i_].text));
          tag.expect_name();
          ++i_;
          if (end == "endif") break;
          cond = end == "elif" ? tag.parse() : nullptr;
          if (end == "else") {
            std::string fin;
            auto els = block({"endif"}, &fin);
            if (fin.empty()) throw JinjaError("else without endif");
            ++i_;
            n->branches.emplace_back(nullptr, std::move(els));
            break;
          }
        }
        b->nodes.push_back(std::move(n));
      } else if (kw == "for") {
        auto n = std::make_unique<For>();
        n->vars.push_back(ep.expect_name());
        while (ep.at_op(",")) {
          ep.next();
          n->vars.push_back(ep.expect_name());
        }
        if (ep.expect_name() != "in") throw JinjaError("for without in");
        n->iterable = ep.ternary_no_if();
        if (ep.at_name("if")) {
          ep.next();
          n->filter = ep.parse();
        }
        std::string end;
        n->body = block({"else", "endfor"}, &end);
        if (end.empty()) throw JinjaError("for without endfor");
        ++i_;
        if (end == "else") {
          n->otherwise = block({"endfor"}, &end);
          if (end != "endfor") throw JinjaError("for without endfor");
          ++i_;
        }
        b->nodes.push_back(std::move(n));
      } else if (kw == "set") {
        auto n = std::make_unique<Set>();
        n->name = ep.expect_name();
        if (ep.at_op(".")) {
          ep.next();
          n->attr = ep.expect_name();
        }
        ep.expect_op("=");
        n->e = ep.parse();
        b->nodes.push_back(std::move(n));
      } else if (kw == "macro") {
        auto n = std::make_unique<Macro>();
        n->name = ep.expect_name();
        ep.expect_op("(");
        while (!ep.at_op(")")) {
          n->params.push_back(ep.expect_name());
          ExprP def;
          if (ep.at_op("=")) {
            ep.next();
            def = ep.parse();
          }
          n->defaults.push_back(std::move(def));
          if (!ep.at_op(",")) break;
          ep.next();
        }
        ep.expect_op(")");
        std::string end;
        n->body = block({"endmacro"}, &end);
        if (end.empty()) throw JinjaError("macro without endmacro");
        ++i_;
        b->nodes.push_back(std::move(n));
      } else {
        throw JinjaError("unsupported tag '" + kw + "'");
      }
    }
    ended->clear();
    return b;
  }
  int line() const { return line_; }

 private:
  std::vector<Piece> p_;
  size_t i_ = 0;
  int line_ = 1;
};

}  // namespace

Template::Template() = default;
Template::~Template() = default;

Result<std::shared_ptr<const Template>> Template::parse(std::string_view source) {
  std::shared_ptr<Template> t(new Template());
  std::unique_ptr<Parser> p;
  try {
    p = std::make_unique<Parser>(split(source));
    std::string end;
    t->root_ = p->block({}, &end);
    if (!end.empty()) throw JinjaError("'" + end + "' without its opening tag");
  } catch (const JinjaError& e) {
    return Status::error(std::string("chat template: ") + e.what() + " (near line " +
                         std::to_string(p ? p->line() : 1) + ")");
  }
  return std::shared_ptr<const Template>(std::move(t));
}

Result<std::string> Template::render(const Value& context) const {
  Scope s;
  s.frames.push_back(context.is_object() ? context : Value::object());
  s.frames.push_back(Value::object());
  std::string out;
  try {
    root_->render(s, out);
  } catch (const JinjaError& e) {
    return Status::error(std::string("chat template: ") + e.what());
  } catch (const Value::exception& e) {
    return Status::error(std::string("chat template: ") + e.what());
  }
  return out;
}

}  // namespace nexus::serve::jinja
