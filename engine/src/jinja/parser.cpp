// Tokens to the program tree, with jinja2's grammar and operator precedence:
//   condexpr: or ('if' or ('else' condexpr)?)*    or: and ('or' and)*    and: not ('and' not)*
//   not: 'not' not | compare    compare: math1 ((== != < <= > >= in 'not in') math1)*
//   math1: concat ((+ -) concat)*    concat: math2 ('~' math2)*    math2: pow ((* / // %) pow)*
//   pow: unary ('**' unary)*    unary: ('-' | '+') unary | primary postfix* (filter | test | call)*
// Constructs outside the supported subset fail here, naming the line and the construct.
#include <algorithm>

#include "jinja/ast.h"

namespace ragd::engine::jinja {

namespace {

struct ParseError {
  int line;
  std::string message;
};

constexpr std::string_view kUnsupportedTags[] = {"block", "extends", "include", "import", "from", "call",
                                                 "autoescape", "do", "trans", "pluralize", "endtrans"};
constexpr std::string_view kUnsupportedGlobals[] = {"cycler", "joiner", "lipsum", "caller", "self"};

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : toks_(std::move(toks)) {}

  Body parse_template() {
    Body body = subparse({});
    return body;
  }

 private:
  // ---- token stream ----
  const Token& cur() const { return toks_[i_]; }
  const Token& peek() const { return toks_[std::min(i_ + 1, toks_.size() - 1)]; }
  void next() {
    if (i_ + 1 < toks_.size()) ++i_;
  }
  bool is_op(std::string_view op) const { return cur().type == Tok::kOp && cur().text == op; }
  bool is_name(std::string_view n) const { return cur().type == Tok::kName && cur().text == n; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }

  [[noreturn]] void error(int line, std::string msg) { throw ParseError{line, std::move(msg)}; }
  [[noreturn]] void unsupported(int line, const std::string& what) {
    error(line, "unsupported construct " + what);
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::kData: return "template data";
      case Tok::kVarBegin: return "begin of print statement";
      case Tok::kVarEnd: return "end of print statement";
      case Tok::kBlockBegin: return "begin of statement block";
      case Tok::kBlockEnd: return "end of statement block";
      case Tok::kName: return t.text;
      case Tok::kString: return "string";
      case Tok::kInt: return "integer";
      case Tok::kFloat: return "float";
      case Tok::kOp: return t.text;
      case Tok::kEof: return "end of template";
    }
    return "token";
  }

  void expect(Tok type, const char* what) {
    if (cur().type != type) error(cur().line, std::string("expected '") + what + "', got '" + describe(cur()) + "'");
    next();
  }
  void expect_op(std::string_view op) {
    if (!is_op(op)) error(cur().line, "expected '" + std::string(op) + "', got '" + describe(cur()) + "'");
    next();
  }
  void expect_name(std::string_view n) {
    if (!is_name(n)) error(cur().line, "expected '" + std::string(n) + "', got '" + describe(cur()) + "'");
    next();
  }
  std::string take_name() {
    if (cur().type != Tok::kName) error(cur().line, "expected a name, got '" + describe(cur()) + "'");
    std::string n = cur().text;
    next();
    return n;
  }

  // Nesting guard: deeply nested expressions or blocks are refused rather than overflowing the
  // stack (here, and when the tree is evaluated).
  static constexpr int kMaxDepth = 256;
  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxDepth) p.error(p.cur().line, "nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    ~Nest() { --p.depth_; }
  };

  template <typename T>
  std::unique_ptr<T> node(int line) {
    auto n = std::make_unique<T>();
    n->line = line;
    return n;
  }

  // ---- statements ----

  // Parses until a block tag whose name is in `ends` (the stream is left on that name) or the end.
  Body subparse(std::vector<std::string_view> ends, std::string_view opener = {}, int opener_line = 0) {
    Nest nest(*this);
    Body body;
    open_.push_back({ends, opener, opener_line});
    struct Pop {
      std::vector<OpenBlock>& v;
      ~Pop() { v.pop_back(); }
    } pop{open_};
    while (cur().type != Tok::kEof) {
      const Token& t = cur();
      if (t.type == Tok::kData) {
        auto s = node<TextStmt>(t.line);
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == Tok::kVarBegin) {
        next();
        auto s = node<PrintStmt>(cur().line);
        s->expr = parse_tuple(false, true, {}, false);
        expect(Tok::kVarEnd, "}}");
        body.push_back(std::move(s));
      } else if (t.type == Tok::kBlockBegin) {
        next();
        if (cur().type == Tok::kName && std::find(ends.begin(), ends.end(), cur().text) != ends.end()) return body;
        body.push_back(parse_statement());
        expect(Tok::kBlockEnd, "%}");
      } else {
        error(t.line, "unexpected '" + describe(t) + "'");
      }
    }
    if (!ends.empty()) error(cur().line, "unexpected end of template: " + looking_for());
    return body;
  }

  struct OpenBlock {
    std::vector<std::string_view> ends;
    std::string_view opener;
    int line;
  };

  // "looking for 'endfor' or 'else' to close 'for' (line 3)" for the innermost open block.
  std::string looking_for() const {
    const OpenBlock& b = open_.back();
    std::string want;
    for (std::string_view e : b.ends) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
    return "looking for " + want + " to close '" + std::string(b.opener) + "' (line " + std::to_string(b.line) + ")";
  }

  // Body of a block statement: optional ':', '%}', the statements, left on one of `ends`.
  Body block_body(std::vector<std::string_view> ends, std::string_view opener, int line) {
    skip_op(":");
    expect(Tok::kBlockEnd, "%}");
    return subparse(std::move(ends), opener, line);
  }

  // The end tag of a block: its name then '%}' is left to the caller (subparse expects it).
  void end_tag(std::string_view name) { expect_name(name); }

  std::unique_ptr<Stmt> parse_statement() {
    const Token t = cur();
    if (t.type != Tok::kName) error(t.line, "tag name expected");
    const std::string& n = t.text;
    if (n == "if") return parse_if();
    if (n == "for") return parse_for();
    if (n == "set") return parse_set();
    if (n == "macro") return parse_macro();
    if (n == "with") return parse_with();
    if (n == "filter") return parse_filter_block();
    if (n == "print") return parse_print();
    if (n == "generation") {
      next();
      // HF renders it through a call block: a scope of its own, a function body for loop controls.
      auto s = node<WithStmt>(t.line);
      const int saved_loops = loop_depth_;
      loop_depth_ = 0;
      s->body = block_body({"endgeneration"}, "generation", t.line);
      loop_depth_ = saved_loops;
      end_tag("endgeneration");
      return s;
    }
    if (n == "break" || n == "continue") {
      next();
      if (loop_depth_ == 0) error(t.line, "'" + n + "' outside loop");
      auto s = node<LoopControlStmt>(t.line);
      s->is_break = n == "break";
      return s;
    }
    if (std::find(std::begin(kUnsupportedTags), std::end(kUnsupportedTags), n) != std::end(kUnsupportedTags))
      unsupported(t.line, "'{% " + n + " %}'");
    if (!open_.empty() && !open_.back().ends.empty()) error(t.line, "unknown tag '" + n + "', " + looking_for());
    error(t.line, "unknown tag '" + n + "'");
  }

  std::unique_ptr<Stmt> parse_if() {
    auto s = node<IfStmt>(cur().line);
    const int line = cur().line;
    next();
    while (true) {
      ExprPtr cond = parse_tuple(false, false, {}, false);
      Body body = block_body({"elif", "else", "endif"}, "if", line);
      s->branches.emplace_back(std::move(cond), std::move(body));
      if (skip_name("elif")) continue;
      if (skip_name("else")) {
        s->otherwise = block_body({"endif"}, "if", line);
        end_tag("endif");
      } else {
        end_tag("endif");
      }
      return s;
    }
  }

  Target parse_target(std::vector<std::string_view> extra_end, bool with_namespace) {
    const int line = cur().line;
    Target t;
    if (with_namespace && cur().type == Tok::kName && peek().type == Tok::kOp && peek().text == ".") {
      t.names.push_back(take_name());
      next();  // '.'
      t.ns_attr = take_name();
      return t;
    }
    ExprPtr e = parse_tuple(true, false, std::move(extra_end), false);
    auto add_name = [&](const Expr* x) {
      const auto* n = dynamic_cast<const NameExpr*>(x);
      if (n == nullptr) unsupported(line, "assignment target (only names, tuples of names and namespace attributes)");
      t.names.push_back(n->name);
    };
    if (const auto* seq = dynamic_cast<const SeqExpr*>(e.get()); seq != nullptr && seq->tuple) {
      t.unpack = true;
      for (const auto& item : seq->items) add_name(item.get());
    } else {
      add_name(e.get());
    }
    return t;
  }

  std::unique_ptr<Stmt> parse_for() {
    const int line = cur().line;
    next();
    auto s = node<ForStmt>(line);
    s->target = parse_target({"in"}, false);
    expect_name("in");
    s->iter = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) s->filter = parse_expression(true);
    if (is_name("recursive")) unsupported(cur().line, "'recursive' loop");
    ++loop_depth_;
    s->body = block_body({"endfor", "else"}, "for", line);
    --loop_depth_;
    if (skip_name("else")) {
      s->otherwise = block_body({"endfor"}, "for", line);
    }
    end_tag("endfor");
    return s;
  }

  std::unique_ptr<Stmt> parse_set() {
    const int line = cur().line;
    next();
    Target target = parse_target({}, true);
    if (skip_op("=")) {
      auto s = node<SetStmt>(line);
      s->target = std::move(target);
      s->value = parse_tuple(false, true, {}, false);
      return s;
    }
    auto s = node<SetBlockStmt>(line);
    if (target.unpack) error(line, "a block set assigns one name");
    s->target = std::move(target);
    while (skip_op("|")) s->filters.push_back(parse_filter_call(nullptr));
    s->body = block_body({"endset"}, "set", line);
    end_tag("endset");
    return s;
  }

  std::unique_ptr<Stmt> parse_macro() {
    const int line = cur().line;
    next();
    auto s = node<MacroStmt>(line);
    s->name = take_name();
    expect_op("(");
    while (!is_op(")")) {
      if (!s->params.empty()) expect_op(",");
      if (is_op(")")) break;
      s->params.push_back(take_name());
      if (skip_op("=")) s->defaults.push_back(parse_expression(true));
      else if (!s->defaults.empty()) error(cur().line, "non-default argument follows default argument");
    }
    expect_op(")");
    macros_.push_back(s.get());
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    s->body = block_body({"endmacro"}, "macro", line);
    loop_depth_ = saved_loops;
    macros_.pop_back();
    end_tag("endmacro");
    return s;
  }

  std::unique_ptr<Stmt> parse_with() {
    const int line = cur().line;
    next();
    auto s = node<WithStmt>(line);
    while (cur().type != Tok::kBlockEnd) {
      if (!s->assigns.empty()) expect_op(",");
      std::string name = take_name();
      expect_op("=");
      s->assigns.emplace_back(std::move(name), parse_expression(true));
    }
    s->body = block_body({"endwith"}, "with", line);
    end_tag("endwith");
    return s;
  }

  std::unique_ptr<Stmt> parse_filter_block() {
    const int line = cur().line;
    next();
    auto s = node<FilterBlockStmt>(line);
    s->filters.push_back(parse_filter_call(nullptr));
    while (skip_op("|")) s->filters.push_back(parse_filter_call(nullptr));
    s->body = block_body({"endfilter"}, "filter", line);
    end_tag("endfilter");
    return s;
  }

  std::unique_ptr<Stmt> parse_print() {
    const int line = cur().line;
    next();
    // {% print a, b %} prints a then b; one PrintStmt per expression inside a scope-less block.
    auto s = node<ScopeStmt>(line);
    while (cur().type != Tok::kBlockEnd) {
      if (!s->body.empty()) expect_op(",");
      auto p = node<PrintStmt>(cur().line);
      p->expr = parse_expression(true);
      s->body.push_back(std::move(p));
    }
    return s;
  }

  // ---- expressions ----

  bool is_tuple_end(const std::vector<std::string_view>& extra) const {
    if (cur().type == Tok::kVarEnd || cur().type == Tok::kBlockEnd || is_op(")")) return true;
    return cur().type == Tok::kName && std::find(extra.begin(), extra.end(), cur().text) != extra.end();
  }

  ExprPtr parse_tuple(bool simplified, bool with_condexpr, std::vector<std::string_view> extra, bool explicit_parens) {
    const int line = cur().line;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(",");
      if (is_tuple_end(extra)) break;
      args.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens) error(cur().line, "expected an expression, got '" + describe(cur()) + "'");
    }
    auto t = node<SeqExpr>(line);
    t->items = std::move(args);
    t->tuple = true;
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    Nest nest(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    int line = cur().line;
    ExprPtr e = parse_or();
    while (skip_name("if")) {
      auto c = node<CondExpr>(line);
      c->cond = parse_or();
      if (skip_name("else")) c->otherwise = parse_condexpr();
      c->then = std::move(e);
      e = std::move(c);
      line = cur().line;
    }
    return e;
  }

  ExprPtr binary(BinaryExpr::Op op, ExprPtr l, ExprPtr r, int line) {
    auto b = node<BinaryExpr>(line);
    b->op = op;
    b->left = std::move(l);
    b->right = std::move(r);
    return b;
  }

  ExprPtr parse_or() {
    const int line = cur().line;
    ExprPtr l = parse_and();
    while (skip_name("or")) l = binary(BinaryExpr::Op::kOr, std::move(l), parse_and(), line);
    return l;
  }

  ExprPtr parse_and() {
    const int line = cur().line;
    ExprPtr l = parse_not();
    while (skip_name("and")) l = binary(BinaryExpr::Op::kAnd, std::move(l), parse_not(), line);
    return l;
  }

  ExprPtr parse_not() {
    Nest nest(*this);
    if (is_name("not")) {
      auto u = node<UnaryExpr>(cur().line);
      next();
      u->op = UnaryExpr::Op::kNot;
      u->operand = parse_not();
      return u;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr first = parse_math1();
    std::vector<std::pair<CompareExpr::Op, ExprPtr>> rest;
    while (true) {
      using Op = CompareExpr::Op;
      std::optional<Op> op;
      if (cur().type == Tok::kOp) {
        const std::string& o = cur().text;
        if (o == "==") op = Op::kEq;
        else if (o == "!=") op = Op::kNe;
        else if (o == "<") op = Op::kLt;
        else if (o == "<=") op = Op::kLe;
        else if (o == ">") op = Op::kGt;
        else if (o == ">=") op = Op::kGe;
        if (op) next();
      } else if (is_name("in")) {
        op = Op::kIn;
        next();
      } else if (is_name("not") && peek().type == Tok::kName && peek().text == "in") {
        op = Op::kNotIn;
        next();
        next();
      }
      if (!op) break;
      rest.emplace_back(*op, parse_math1());
    }
    if (rest.empty()) return first;
    auto c = node<CompareExpr>(line);
    c->first = std::move(first);
    c->rest = std::move(rest);
    return c;
  }

  ExprPtr parse_math1() {
    const int line = cur().line;
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      const auto op = is_op("+") ? BinaryExpr::Op::kAdd : BinaryExpr::Op::kSub;
      next();
      l = binary(op, std::move(l), parse_concat(), line);
    }
    return l;
  }

  ExprPtr parse_concat() {
    const int line = cur().line;
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto c = node<ConcatExpr>(line);
    c->parts.push_back(std::move(first));
    while (skip_op("~")) c->parts.push_back(parse_math2());
    return c;
  }

  ExprPtr parse_math2() {
    const int line = cur().line;
    ExprPtr l = parse_pow();
    while (true) {
      BinaryExpr::Op op;
      if (is_op("*")) op = BinaryExpr::Op::kMul;
      else if (is_op("/")) op = BinaryExpr::Op::kDiv;
      else if (is_op("//")) op = BinaryExpr::Op::kFloorDiv;
      else if (is_op("%")) op = BinaryExpr::Op::kMod;
      else break;
      next();
      l = binary(op, std::move(l), parse_pow(), line);
    }
    return l;
  }

  ExprPtr parse_pow() {
    const int line = cur().line;
    ExprPtr l = parse_unary(true);
    while (skip_op("**")) l = binary(BinaryExpr::Op::kPow, std::move(l), parse_unary(true), line);
    return l;
  }

  ExprPtr parse_unary(bool with_filter) {
    Nest nest(*this);
    const int line = cur().line;
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      auto u = node<UnaryExpr>(line);
      u->op = is_op("-") ? UnaryExpr::Op::kNeg : UnaryExpr::Op::kPos;
      next();
      u->operand = parse_unary(false);
      e = std::move(u);
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token t = cur();
    switch (t.type) {
      case Tok::kName: {
        next();
        if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
          auto l = node<Literal>(t.line);
          l->value = t.text == "true" || t.text == "True";
          return l;
        }
        if (t.text == "none" || t.text == "None") return node<Literal>(t.line);
        if (std::find(std::begin(kUnsupportedGlobals), std::end(kUnsupportedGlobals), t.text) !=
            std::end(kUnsupportedGlobals))
          unsupported(t.line, "global '" + t.text + "'");
        if (!macros_.empty()) {
          if (t.text == "varargs") macros_.back()->uses_varargs = true;
          if (t.text == "kwargs") macros_.back()->uses_kwargs = true;
        }
        auto n = node<NameExpr>(t.line);
        n->name = t.text;
        return n;
      }
      case Tok::kString: {
        auto l = node<Literal>(t.line);
        std::string s;
        while (cur().type == Tok::kString) {
          s += cur().text;
          next();
        }
        l->value = std::move(s);
        return l;
      }
      case Tok::kInt: {
        next();
        auto l = node<Literal>(t.line);
        l->value = t.i;
        return l;
      }
      case Tok::kFloat: {
        next();
        auto l = node<Literal>(t.line);
        l->value = t.f;
        return l;
      }
      case Tok::kOp:
        if (t.text == "(") {
          next();
          ExprPtr e = parse_tuple(false, true, {}, true);
          expect_op(")");
          return e;
        }
        if (t.text == "[") return parse_list();
        if (t.text == "{") return parse_dict();
        break;
      default:
        break;
    }
    error(t.line, "unexpected '" + describe(t) + "'");
  }

  ExprPtr parse_list() {
    auto l = node<SeqExpr>(cur().line);
    expect_op("[");
    while (!is_op("]")) {
      if (!l->items.empty()) expect_op(",");
      if (is_op("]")) break;
      l->items.push_back(parse_expression(true));
    }
    expect_op("]");
    return l;
  }

  ExprPtr parse_dict() {
    auto d = node<DictExpr>(cur().line);
    expect_op("{");
    while (!is_op("}")) {
      if (!d->items.empty()) expect_op(",");
      if (is_op("}")) break;
      ExprPtr k = parse_expression(true);
      expect_op(":");
      d->items.emplace_back(std::move(k), parse_expression(true));
    }
    expect_op("}");
    return d;
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".") || is_op("[")) e = parse_subscript(std::move(e));
      else if (is_op("(")) e = parse_call(std::move(e));
      else return e;
    }
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        next();
        e = parse_filter_call(std::move(e));
      } else if (is_name("is")) {
        e = parse_test(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj) {
    const Token t = cur();
    next();
    if (t.text == ".") {
      const Token a = cur();
      next();
      if (a.type == Tok::kName) {
        auto n = node<AttrExpr>(t.line);
        n->obj = std::move(obj);
        n->name = a.text;
        return n;
      }
      if (a.type != Tok::kInt) error(a.line, "expected name or number");
      auto n = node<ItemExpr>(t.line);
      n->obj = std::move(obj);
      auto lit = node<Literal>(a.line);
      lit->value = a.i;
      n->key = std::move(lit);
      return n;
    }
    // '[' subscribed (',' subscribed)* ']'
    std::vector<ExprPtr> keys;
    std::unique_ptr<SliceExpr> the_slice;
    while (!is_op("]")) {
      if (!keys.empty() || the_slice) expect_op(",");
      ExprPtr start;
      if (!is_op(":")) {
        start = parse_expression(true);
        if (!is_op(":")) {
          if (the_slice) unsupported(t.line, "subscript mixing a slice and other keys");
          keys.push_back(std::move(start));
          continue;
        }
      }
      if (!keys.empty() || the_slice) unsupported(t.line, "subscript mixing a slice and other keys");
      next();  // ':'
      the_slice = node<SliceExpr>(t.line);
      the_slice->start = std::move(start);
      if (!is_op("]") && !is_op(",") && !is_op(":")) the_slice->stop = parse_expression(true);
      if (skip_op(":"))
        if (!is_op("]") && !is_op(",")) the_slice->step = parse_expression(true);
    }
    expect_op("]");
    if (the_slice) {
      the_slice->obj = std::move(obj);
      return the_slice;
    }
    if (keys.empty()) error(t.line, "expected subscript expression");
    auto n = node<ItemExpr>(t.line);
    n->obj = std::move(obj);
    if (keys.size() == 1) {
      n->key = std::move(keys[0]);
    } else {
      auto tup = node<SeqExpr>(t.line);
      tup->items = std::move(keys);
      tup->tuple = true;
      n->key = std::move(tup);
    }
    return n;
  }

  Arguments parse_call_args() {
    const int line = cur().line;
    expect_op("(");
    Arguments a;
    bool need_comma = false;
    while (!is_op(")")) {
      if (need_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*") || is_op("**")) unsupported(cur().line, "'*args' / '**kwargs' in a call");
      if (cur().type == Tok::kName && peek().type == Tok::kOp && peek().text == "=") {
        std::string k = take_name();
        next();  // '='
        a.kw.emplace_back(std::move(k), parse_expression(true));
      } else {
        if (!a.kw.empty()) error(line, "invalid syntax for function call expression");
        a.pos.push_back(parse_expression(true));
      }
      need_comma = true;
    }
    expect_op(")");
    return a;
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto c = node<CallExpr>(cur().line);
    c->callee = std::move(callee);
    c->args = parse_call_args();
    return c;
  }

  std::unique_ptr<FilterExpr> parse_filter_call(ExprPtr input) {
    const int line = cur().line;
    std::string name = take_name();
    while (skip_op(".")) {
      name += '.';
      name += take_name();
    }
    auto f = node<FilterExpr>(line);
    f->input = std::move(input);
    f->name = name;
    f->fn = find_filter(name);
    if (f->fn == nullptr) unsupported(line, "filter '" + name + "'");
    if (is_op("(")) f->args = parse_call_args();
    return f;
  }

  ExprPtr parse_test(ExprPtr input) {
    const int line = cur().line;
    next();  // 'is'
    const bool negated = skip_name("not");
    std::string name = take_name();
    while (skip_op(".")) {
      name += '.';
      name += take_name();
    }
    auto t = node<TestExpr>(line);
    t->input = std::move(input);
    t->name = name;
    t->negated = negated;
    t->fn = find_test(name);
    if (t->fn == nullptr) unsupported(line, "test '" + name + "'");
    if (is_op("(")) {
      t->args = parse_call_args();
    } else if ((cur().type == Tok::kName || cur().type == Tok::kString || cur().type == Tok::kInt ||
                cur().type == Tok::kFloat || is_op("(") || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) error(cur().line, "You cannot chain multiple tests with is");
      t->args.pos.push_back(parse_postfix(parse_primary()));
    }
    return t;
  }

  std::vector<Token> toks_;
  size_t i_ = 0;
  int loop_depth_ = 0;
  std::vector<MacroStmt*> macros_;
  std::vector<OpenBlock> open_;  // blocks being parsed, innermost last
  int depth_ = 0;
};

}  // namespace

Result<std::unique_ptr<Program>> parse(std::vector<Token> tokens) {
  try {
    auto p = std::make_unique<Program>();
    p->body = Parser(std::move(tokens)).parse_template();
    return p;
  } catch (const ParseError& e) {
    return Status::InvalidArgument("line " + std::to_string(e.line) + ": " + e.message);
  }
}

}  // namespace ragd::engine::jinja
