// The parsed template: expression and statement nodes (built by parser.cpp, evaluated by
// eval.cpp). Nodes are immutable after parsing; a render keeps its state in Ctx.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/lexer.h"
#include "jinja/object.h"

namespace ragd::engine::jinja {

class Ctx;

using FilterFn = Value (*)(Ctx&, const Value& input, const CallArgs& args);
using TestFn = bool (*)(Ctx&, const Value& input, const CallArgs& args);
// The filter / test tables (filters.cpp); nullptr when jinja2 has no such name or ragd does not
// support it.
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);

struct Expr {
  int line = 0;
  virtual ~Expr() = default;
  virtual Value eval(Ctx& c) const = 0;
};
using ExprPtr = std::unique_ptr<Expr>;

struct Literal final : Expr {
  Value value;
  Value eval(Ctx& c) const override;
};

struct NameExpr final : Expr {
  std::string name;
  Value eval(Ctx& c) const override;
};

struct SeqExpr final : Expr {  // [a, b] or (a, b)
  std::vector<ExprPtr> items;
  bool tuple = false;
  Value eval(Ctx& c) const override;
};

struct DictExpr final : Expr {
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
  Value eval(Ctx& c) const override;
};

struct AttrExpr final : Expr {  // obj.name
  ExprPtr obj;
  std::string name;
  Value eval(Ctx& c) const override;
};

struct ItemExpr final : Expr {  // obj[key]
  ExprPtr obj, key;
  Value eval(Ctx& c) const override;
};

struct SliceExpr final : Expr {  // obj[start:stop:step]; absent parts are null
  ExprPtr obj, start, stop, step;
  Value eval(Ctx& c) const override;
};

struct Arguments {
  std::vector<ExprPtr> pos;
  std::vector<std::pair<std::string, ExprPtr>> kw;
  CallArgs eval(Ctx& c) const;
};

struct CallExpr final : Expr {
  ExprPtr callee;
  Arguments args;
  Value eval(Ctx& c) const override;
};

struct FilterExpr final : Expr {  // input | name(args); input is null inside filter blocks / block set
  ExprPtr input;
  std::string name;
  FilterFn fn = nullptr;
  Arguments args;
  Value apply(Ctx& c, const Value& in) const;
  Value eval(Ctx& c) const override;
};

struct TestExpr final : Expr {  // input is [not] name(args)
  ExprPtr input;
  std::string name;
  TestFn fn = nullptr;
  Arguments args;
  bool negated = false;
  Value eval(Ctx& c) const override;
};

struct UnaryExpr final : Expr {
  enum class Op : uint8_t { kNot, kNeg, kPos } op = Op::kNot;
  ExprPtr operand;
  Value eval(Ctx& c) const override;
};

struct BinaryExpr final : Expr {
  enum class Op : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kAnd, kOr } op = Op::kAdd;
  ExprPtr left, right;
  Value eval(Ctx& c) const override;
};

struct ConcatExpr final : Expr {  // a ~ b ~ c
  std::vector<ExprPtr> parts;
  Value eval(Ctx& c) const override;
};

struct CompareExpr final : Expr {  // a < b <= c, a in b, a not in b
  enum class Op : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };
  ExprPtr first;
  std::vector<std::pair<Op, ExprPtr>> rest;
  Value eval(Ctx& c) const override;
};

struct CondExpr final : Expr {  // then if cond else otherwise
  ExprPtr cond, then, otherwise;  // otherwise may be null (undefined)
  Value eval(Ctx& c) const override;
};

// ---- statements ----------------------------------------------------------------------------

struct Stmt {
  int line = 0;
  virtual ~Stmt() = default;
  virtual void exec(Ctx& c) const = 0;
};
using Body = std::vector<std::unique_ptr<Stmt>>;

struct TextStmt final : Stmt {
  std::string text;
  void exec(Ctx& c) const override;
};

struct PrintStmt final : Stmt {
  ExprPtr expr;
  void exec(Ctx& c) const override;
};

struct IfStmt final : Stmt {
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif...
  Body otherwise;
  void exec(Ctx& c) const override;
};

// Assignment target: one name, names to unpack into, or a namespace attribute.
struct Target {
  std::vector<std::string> names;
  bool unpack = false;      // `a, b` (even `a,`)
  std::string ns_attr;      // non-empty: names[0].ns_attr
};

struct ForStmt final : Stmt {
  Target target;
  ExprPtr iter;
  ExprPtr filter;  // `for x in xs if cond`; may be null
  Body body, otherwise;
  void exec(Ctx& c) const override;
};

struct SetStmt final : Stmt {
  Target target;
  ExprPtr value;
  void exec(Ctx& c) const override;
};

struct SetBlockStmt final : Stmt {
  Target target;
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
  void exec(Ctx& c) const override;
};

struct MacroStmt final : Stmt {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() params
  bool uses_varargs = false, uses_kwargs = false;
  Body body;
  void exec(Ctx& c) const override;
};

struct FilterBlockStmt final : Stmt {
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
  void exec(Ctx& c) const override;
};

struct WithStmt final : Stmt {
  std::vector<std::pair<std::string, ExprPtr>> assigns;
  Body body;
  void exec(Ctx& c) const override;
};

struct LoopControlStmt final : Stmt {
  bool is_break = true;
  void exec(Ctx& c) const override;
};

struct ScopeStmt final : Stmt {  // statements run in the current scope ({% print a, b %})
  Body body;
  void exec(Ctx& c) const override;
};

struct Program {
  Body body;
};

// Parses tokens into a program; errors are InvalidArgument "line N: ...".
Result<std::unique_ptr<Program>> parse(std::vector<Token> tokens);

}  // namespace ragd::engine::jinja
