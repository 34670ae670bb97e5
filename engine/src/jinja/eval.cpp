// Evaluation of the program tree, with jinja2's scoping: `if` shares its scope, each `for`
// iteration, `with` block and macro call opens one (assignments inside stay inside; namespace()
// carries values out), macros see the scope they were defined in (live) and not their caller's.
#include <algorithm>

#include "jinja/ast.h"
#include "jinja/text.h"

namespace ragd::engine::jinja {

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* lookup(std::string_view name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent.get())
      for (const auto& [k, v] : s->vars)
        if (k == name) return &v;
    return nullptr;
  }
  void set(const std::string& name, Value v) {
    for (auto& [k, old] : vars)
      if (k == name) {
        old = std::move(v);
        return;
      }
    vars.emplace_back(name, std::move(v));
  }
};

class Ctx {
 public:
  Ctx(const RenderOptions& o, std::shared_ptr<Scope> root) : opts(o), scope(std::move(root)) {}

  const RenderOptions& opts;
  std::shared_ptr<Scope> scope;  // current
  std::string* out = nullptr;
  int line = 0;
  int depth = 0;
  int64_t iterations = 0;
  enum class Flow : uint8_t { kNormal, kBreak, kContinue } flow = Flow::kNormal;

  void write(std::string_view s) {
    out->append(s);
    if (out->size() > opts.max_output_bytes)
      fail("output larger than " + std::to_string(opts.max_output_bytes) + " bytes");
  }

  // Runs a body with output to a fresh buffer; returns what it wrote.
  std::string capture(const Body& body);
  void run(const Body& body);
  void tick() {
    if (++iterations > opts.max_loop_iterations)
      fail("more than " + std::to_string(opts.max_loop_iterations) + " loop iterations");
  }
};

const RenderOptions& render_options(const Ctx& c) { return c.opts; }

void Ctx::run(const Body& body) {
  for (const auto& s : body) {
    line = s->line;
    s->exec(*this);
    if (flow != Flow::kNormal) return;
  }
}

std::string Ctx::capture(const Body& body) {
  std::string buf;
  std::string* saved = out;
  out = &buf;
  try {
    run(body);
  } catch (...) {
    out = saved;
    throw;
  }
  out = saved;
  return buf;
}

namespace {

// Swaps the current scope for the duration of a block.
class ScopeGuard {
 public:
  ScopeGuard(Ctx& c, std::shared_ptr<Scope> s) : c_(c), saved_(std::move(c.scope)) { c_.scope = std::move(s); }
  ~ScopeGuard() { c_.scope = std::move(saved_); }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  Ctx& c_;
  std::shared_ptr<Scope> saved_;
};

std::shared_ptr<Scope> child_scope(const Ctx& c) {
  auto s = std::make_shared<Scope>();
  s->parent = c.scope;
  return s;
}

class Macro final : public Object {
 public:
  Macro(const MacroStmt* def, std::shared_ptr<Scope> closure) : def_(def), closure_(std::move(closure)) {}
  std::string type_name() const override { return "Macro"; }
  std::string repr() const override { return "<Macro '" + def_->name + "'>"; }
  bool callable() const override { return true; }

  Value call(Ctx& c, const CallArgs& args) const override {
    if (c.depth >= c.opts.max_call_depth)
      fail("macro calls nested deeper than " + std::to_string(c.opts.max_call_depth));
    const auto& params = def_->params;
    auto scope = std::make_shared<Scope>();
    scope->parent = closure_;
    std::vector<std::optional<Value>> bound(params.size());
    std::vector<Value> extra;
    for (size_t i = 0; i < args.pos.size(); ++i) {
      if (i < params.size()) bound[i] = args.pos[i];
      else if (def_->uses_varargs) extra.push_back(args.pos[i]);
      else fail("macro '" + def_->name + "' takes not more than " + std::to_string(params.size()) + " argument(s)");
    }
    std::vector<std::pair<std::string, Value>> extra_kw;
    for (const auto& [k, v] : args.kw) {
      auto it = std::find(params.begin(), params.end(), k);
      if (it != params.end()) {
        auto& slot = bound[static_cast<size_t>(it - params.begin())];
        if (slot) fail("macro '" + def_->name + "' got multiple values for argument '" + k + "'");
        slot = v;
      } else if (def_->uses_kwargs) {
        extra_kw.emplace_back(k, v);
      } else {
        fail("macro '" + def_->name + "' takes no keyword argument '" + k + "'");
      }
    }
    ScopeGuard guard(c, scope);
    const size_t first_default = params.size() - def_->defaults.size();
    for (size_t i = 0; i < params.size(); ++i) {
      if (bound[i]) scope->set(params[i], *bound[i]);
      else if (i >= first_default) scope->set(params[i], def_->defaults[i - first_default]->eval(c));
      else scope->set(params[i], Value::undefined("parameter '" + params[i] + "' was not provided"));
    }
    if (def_->uses_varargs) scope->set("varargs", Value::list(std::move(extra), SeqKind::kTuple));
    if (def_->uses_kwargs) scope->set("kwargs", Value::dict(std::move(extra_kw)));
    ++c.depth;
    const int saved_line = c.line;
    std::string out;
    try {
      out = c.capture(def_->body);
    } catch (...) {
      --c.depth;
      throw;
    }
    --c.depth;
    c.line = saved_line;
    c.flow = Ctx::Flow::kNormal;
    return out;
  }

 private:
  const MacroStmt* def_;
  std::shared_ptr<Scope> closure_;
};

// jinja2's LoopContext over a materialised sequence; one per loop, advanced per iteration.
class Loop final : public Object {
 public:
  explicit Loop(std::shared_ptr<const std::vector<Value>> items) : items_(std::move(items)) {}
  std::string type_name() const override { return "LoopContext"; }
  std::string repr() const override {
    return "<LoopContext " + std::to_string(index_ + 1) + "/" + std::to_string(items_->size()) + ">";
  }
  void advance(size_t i) { index_ = i; }

  Value getattr(const std::string& name) const override {
    const auto n = static_cast<int64_t>(items_->size());
    const auto i = static_cast<int64_t>(index_);
    if (name == "index") return i + 1;
    if (name == "index0") return i;
    if (name == "revindex") return n - i;
    if (name == "revindex0") return n - i - 1;
    if (name == "first") return i == 0;
    if (name == "last") return i == n - 1;
    if (name == "length") return n;
    if (name == "depth") return int64_t{1};
    if (name == "depth0") return int64_t{0};
    if (name == "previtem")
      return i > 0 ? (*items_)[index_ - 1] : Value::undefined("there is no previous item");
    if (name == "nextitem")
      return i + 1 < n ? (*items_)[index_ + 1] : Value::undefined("there is no next item");
    if (name == "cycle") {
      const size_t at = index_;
      return Value::object(std::make_shared<Function>("loop.cycle", [at](Ctx&, const CallArgs& a) -> Value {
        if (a.pos.empty()) fail("no items for cycling given");
        return a.pos[at % a.pos.size()];
      }));
    }
    if (name == "changed") {
      auto self = last_changed_;
      return Value::object(std::make_shared<Function>("loop.changed", [self](Ctx&, const CallArgs& a) -> Value {
        Value now = Value::list(a.pos);
        if (self->has && equal(self->value, now)) return false;
        self->has = true;
        self->value = now;
        return true;
      }));
    }
    return Object::getattr(name);
  }

 private:
  struct Changed {
    bool has = false;
    Value value;
  };
  std::shared_ptr<const std::vector<Value>> items_;
  size_t index_ = 0;
  std::shared_ptr<Changed> last_changed_ = std::make_shared<Changed>();
};

void assign(Ctx& c, const Target& t, const Value& v) {
  if (!t.ns_attr.empty()) {
    const Value* ns = c.scope->lookup(t.names[0]);
    if (ns == nullptr || !ns->is_object() || !ns->as_object()->setattr(t.ns_attr, v))
      fail("cannot assign attribute on non-namespace object");
    return;
  }
  if (!t.unpack) {
    c.scope->set(t.names[0], v);
    return;
  }
  std::vector<Value> items = iterate(v);
  if (items.size() != t.names.size())
    fail(items.size() > t.names.size()
             ? "too many values to unpack (expected " + std::to_string(t.names.size()) + ")"
             : "not enough values to unpack (expected " + std::to_string(t.names.size()) + ", got " +
                   std::to_string(items.size()) + ")");
  for (size_t i = 0; i < items.size(); ++i) c.scope->set(t.names[i], items[i]);
}

}  // namespace

// ---- expressions ---------------------------------------------------------------------------

Value Literal::eval(Ctx&) const { return value; }

Value NameExpr::eval(Ctx& c) const {
  if (const Value* v = c.scope->lookup(name)) return *v;
  return Value::undefined("'" + name + "' is undefined");
}

Value SeqExpr::eval(Ctx& c) const {
  std::vector<Value> out;
  out.reserve(items.size());
  for (const auto& e : items) out.push_back(e->eval(c));
  return Value::list(std::move(out), tuple ? SeqKind::kTuple : SeqKind::kList);
}

Value DictExpr::eval(Ctx& c) const {
  std::vector<std::pair<std::string, Value>> out;
  for (const auto& [k, v] : items) {
    Value key = k->eval(c);
    if (!key.is_string()) {
      if (key.is_list() || key.is_dict()) fail("unhashable type: '" + type_name(key) + "'");
      fail("dict literal: only str keys are supported, got " + type_name(key));
    }
    out.emplace_back(key.as_string(), v->eval(c));
  }
  return Value::dict(std::move(out));
}

Value AttrExpr::eval(Ctx& c) const { return getattr(obj->eval(c), name); }

Value ItemExpr::eval(Ctx& c) const {
  Value o = obj->eval(c);
  return getitem(o, key->eval(c));
}

Value SliceExpr::eval(Ctx& c) const {
  Value o = obj->eval(c);
  auto part = [&](const ExprPtr& e) { return e ? e->eval(c) : Value(); };
  Value a = part(start), b = part(stop), s = part(step);
  return slice(o, a, b, s);
}

CallArgs Arguments::eval(Ctx& c) const {
  CallArgs a;
  a.pos.reserve(pos.size());
  for (const auto& e : pos) a.pos.push_back(e->eval(c));
  for (const auto& [k, e] : kw) a.kw.emplace_back(k, e->eval(c));
  return a;
}

Value CallExpr::eval(Ctx& c) const {
  Value f = callee->eval(c);
  CallArgs a = args.eval(c);
  c.line = line;
  if (f.is_undefined()) fail_undefined(f);
  if (!is_callable(f)) fail("'" + type_name(f) + "' object is not callable");
  Value r = f.as_object()->call(c, a);
  c.line = line;
  return r;
}

Value FilterExpr::apply(Ctx& c, const Value& in) const {
  CallArgs a = args.eval(c);
  c.line = line;
  return fn(c, in, a);
}

Value FilterExpr::eval(Ctx& c) const { return apply(c, input->eval(c)); }

Value TestExpr::eval(Ctx& c) const {
  Value in = input->eval(c);
  CallArgs a = args.eval(c);
  c.line = line;
  return fn(c, in, a) != negated;
}

Value UnaryExpr::eval(Ctx& c) const {
  Value v = operand->eval(c);
  switch (op) {
    case Op::kNot: return !v.truthy();
    case Op::kNeg: return negate(v);
    case Op::kPos: return plus(v);
  }
  return v;
}

Value BinaryExpr::eval(Ctx& c) const {
  Value l = left->eval(c);
  if (op == Op::kAnd) return l.truthy() ? right->eval(c) : l;
  if (op == Op::kOr) return l.truthy() ? l : right->eval(c);
  Value r = right->eval(c);
  switch (op) {
    case Op::kAdd: return add(l, r);
    case Op::kSub: return sub(l, r);
    case Op::kMul: return mul(l, r);
    case Op::kDiv: return truediv(l, r);
    case Op::kFloorDiv: return floordiv(l, r);
    case Op::kMod: return mod(l, r);
    case Op::kPow: return power(l, r);
    default: return Value();
  }
}

Value ConcatExpr::eval(Ctx& c) const {
  std::string s;
  for (const auto& p : parts) s += p->eval(c).str();
  return s;
}

Value CompareExpr::eval(Ctx& c) const {
  Value l = first->eval(c);
  for (const auto& [op, e] : rest) {
    Value r = e->eval(c);
    bool ok = false;
    switch (op) {
      case Op::kEq: ok = equal(l, r); break;
      case Op::kNe: ok = !equal(l, r); break;
      case Op::kLt: ok = compare(l, r, "<"); break;
      case Op::kLe: ok = compare(l, r, "<="); break;
      case Op::kGt: ok = compare(l, r, ">"); break;
      case Op::kGe: ok = compare(l, r, ">="); break;
      case Op::kIn: ok = contains(r, l); break;
      case Op::kNotIn: ok = !contains(r, l); break;
    }
    if (!ok) return false;
    l = std::move(r);
  }
  return true;
}

Value CondExpr::eval(Ctx& c) const {
  if (cond->eval(c).truthy()) return then->eval(c);
  if (otherwise) return otherwise->eval(c);
  return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
}

// ---- statements ----------------------------------------------------------------------------

void TextStmt::exec(Ctx& c) const { c.write(text); }

void PrintStmt::exec(Ctx& c) const {
  Value v = expr->eval(c);
  c.write(v.str());
}

void IfStmt::exec(Ctx& c) const {
  for (const auto& [cond, body] : branches) {
    if (cond->eval(c).truthy()) {
      c.run(body);
      return;
    }
  }
  c.run(otherwise);
}

void ForStmt::exec(Ctx& c) const {
  std::vector<Value> all = iterate(iter->eval(c));
  auto items = std::make_shared<std::vector<Value>>();
  if (filter) {
    for (Value& v : all) {
      auto probe = child_scope(c);
      ScopeGuard g(c, probe);
      assign(c, target, v);
      if (filter->eval(c).truthy()) items->push_back(std::move(v));
    }
  } else {
    *items = std::move(all);
  }
  // jinja2 runs `else` unless some iteration reached the end of the body: an iteration left by
  // `continue` or `break` does not count (the loop's iteration flag is cleared at the body's end).
  bool run_else = true;
  auto loop = std::make_shared<Loop>(items);
  const Value loop_value = Value::object(loop);
  for (size_t i = 0; i < items->size(); ++i) {
    c.tick();
    loop->advance(i);
    auto scope = child_scope(c);
    ScopeGuard g(c, scope);
    scope->vars.emplace_back("loop", loop_value);
    assign(c, target, (*items)[i]);
    c.run(body);
    const Ctx::Flow flow = c.flow;
    c.flow = Ctx::Flow::kNormal;
    if (flow == Ctx::Flow::kBreak) break;
    if (flow == Ctx::Flow::kNormal) run_else = false;
  }
  if (run_else) c.run(otherwise);
}

void SetStmt::exec(Ctx& c) const { assign(c, target, value->eval(c)); }

// A break / continue inside the captured body leaves the enclosing loop at once, as in jinja2:
// nothing is assigned or written.
void SetBlockStmt::exec(Ctx& c) const {
  Value v = c.capture(body);
  if (c.flow != Ctx::Flow::kNormal) return;
  for (const auto& f : filters) v = f->apply(c, v);
  assign(c, target, v);
}

void MacroStmt::exec(Ctx& c) const { c.scope->set(name, Value::object(std::make_shared<Macro>(this, c.scope))); }

void FilterBlockStmt::exec(Ctx& c) const {
  Value v = c.capture(body);
  if (c.flow != Ctx::Flow::kNormal) return;
  for (const auto& f : filters) v = f->apply(c, v);
  c.write(v.str());
}

void WithStmt::exec(Ctx& c) const {
  auto scope = child_scope(c);
  for (const auto& [name, e] : assigns) scope->set(name, e->eval(c));
  ScopeGuard g(c, scope);
  c.run(body);
}

void LoopControlStmt::exec(Ctx& c) const { c.flow = is_break ? Ctx::Flow::kBreak : Ctx::Flow::kContinue; }

void ScopeStmt::exec(Ctx& c) const { c.run(body); }

// ---- Template ------------------------------------------------------------------------------

struct Template::Impl {
  std::string name;
  std::unique_ptr<Program> program;
};

Template::Template(std::unique_ptr<const Impl> impl) : impl_(std::move(impl)) {}
Template::~Template() = default;

const std::string& Template::name() const { return impl_->name; }

Result<std::unique_ptr<Template>> Template::compile(std::string_view source, std::string name) {
  auto tokens = lex(source);
  if (!tokens.ok()) return tokens.status().with_context(name);
  auto program = parse(std::move(*tokens));
  if (!program.ok()) return program.status().with_context(name);
  auto impl = std::make_unique<Impl>();
  impl->name = std::move(name);
  impl->program = std::move(*program);
  return std::unique_ptr<Template>(new Template(std::move(impl)));
}

Result<std::string> Template::render(const Value& context, const RenderOptions& opts) const {
  static const std::shared_ptr<const Scope> kGlobals = [] {
    auto g = std::make_shared<Scope>();
    g->vars = make_globals();
    return g;
  }();
  if (!context.is_dict() && !context.is_none())
    return Status::InvalidArgument(impl_->name + ": the render context must be a dict, got " + type_name(context));
  auto vars = std::make_shared<Scope>();
  vars->parent = std::const_pointer_cast<Scope>(kGlobals);  // never written: sets go to `top`
  if (context.is_dict()) vars->vars = context.entries();
  auto top = std::make_shared<Scope>();
  top->parent = vars;
  Ctx c(opts, top);
  std::string out;
  c.out = &out;
  try {
    c.run(impl_->program->body);
  } catch (const RenderError& e) {
    return Status::InvalidArgument(impl_->name + ": line " + std::to_string(c.line) + ": " + e.message);
  }
  return out;
}

}  // namespace ragd::engine::jinja
