#pragma once
// The syntax tree of a parsed template: expressions and statements as Jinja2's parser builds them.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/lexer.h"
#include "jinja/value.h"

namespace ember::jinja {

enum class ExprType {
  Literal, Name, List, Tuple, Dict, Attr, Item, Slice, Call, Filter, Test, Neg, Pos, Not,
  Binary, And, Or, Concat, Compare, Cond,
};

struct Expr {
  ExprType type;
  Pos pos;
  Expr(ExprType t, Pos p) : type(t), pos(p) {}
  virtual ~Expr() = default;
};
using ExprPtr = std::unique_ptr<Expr>;

struct LiteralExpr : Expr {
  Value value;
  LiteralExpr(Pos p, Value v) : Expr(ExprType::Literal, p), value(std::move(v)) {}
};

struct NameExpr : Expr {
  std::string name;
  NameExpr(Pos p, std::string n) : Expr(ExprType::Name, p), name(std::move(n)) {}
};

// List and Tuple literals.
struct SeqExpr : Expr {
  std::vector<ExprPtr> items;
  SeqExpr(ExprType t, Pos p) : Expr(t, p) {}
};

struct DictExpr : Expr {
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
  explicit DictExpr(Pos p) : Expr(ExprType::Dict, p) {}
};

struct AttrExpr : Expr {
  ExprPtr object;
  std::string name;
  AttrExpr(Pos p, ExprPtr o, std::string n) : Expr(ExprType::Attr, p), object(std::move(o)), name(std::move(n)) {}
};

struct ItemExpr : Expr {
  ExprPtr object, index;
  ItemExpr(Pos p, ExprPtr o, ExprPtr i) : Expr(ExprType::Item, p), object(std::move(o)), index(std::move(i)) {}
};

// start:stop:step inside [], any part may be absent.
struct SliceExpr : Expr {
  ExprPtr start, stop, step;
  explicit SliceExpr(Pos p) : Expr(ExprType::Slice, p) {}
};

struct Args {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star, double_star;  // *args, **kwargs
};

struct CallExpr : Expr {
  ExprPtr callee;
  Args args;
  CallExpr(Pos p, ExprPtr c) : Expr(ExprType::Call, p), callee(std::move(c)) {}
};

// `subject | name(args)`; subject is null inside {% filter %} and {% set x | f %} chains.
struct FilterExpr : Expr {
  ExprPtr subject;
  std::string name;
  Args args;
  FilterExpr(Pos p, ExprPtr s, std::string n) : Expr(ExprType::Filter, p), subject(std::move(s)), name(std::move(n)) {}
};

struct TestExpr : Expr {
  ExprPtr subject;
  std::string name;
  Args args;
  bool negated = false;
  TestExpr(Pos p, ExprPtr s, std::string n) : Expr(ExprType::Test, p), subject(std::move(s)), name(std::move(n)) {}
};

// Neg, Pos, Not.
struct UnaryExpr : Expr {
  ExprPtr operand;
  UnaryExpr(ExprType t, Pos p, ExprPtr o) : Expr(t, p), operand(std::move(o)) {}
};

enum class BinOp { Add, Sub, Mul, Div, FloorDiv, Mod, Pow };

// Binary arithmetic (with op), and the short-circuit And / Or.
struct BinaryExpr : Expr {
  BinOp op = BinOp::Add;
  ExprPtr left, right;
  BinaryExpr(ExprType t, Pos p, ExprPtr l, ExprPtr r) : Expr(t, p), left(std::move(l)), right(std::move(r)) {}
};

struct ConcatExpr : Expr {
  std::vector<ExprPtr> parts;
  explicit ConcatExpr(Pos p) : Expr(ExprType::Concat, p) {}
};

enum class CmpOp { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

struct CompareExpr : Expr {
  ExprPtr first;
  std::vector<std::pair<CmpOp, ExprPtr>> rest;
  CompareExpr(Pos p, ExprPtr f) : Expr(ExprType::Compare, p), first(std::move(f)) {}
};

// `then if cond else otherwise`; otherwise may be null (gives Undefined).
struct CondExpr : Expr {
  ExprPtr cond, then, otherwise;
  explicit CondExpr(Pos p) : Expr(ExprType::Cond, p) {}
};

// Assignment target: a name, a namespace attribute (ns.x) or a tuple of targets.
struct Target {
  enum class Kind { Name, NsAttr, Tuple } kind = Kind::Name;
  std::string name, attr;
  std::vector<Target> items;
  Pos pos;
};

enum class StmtType { Output, Emit, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, Break, Continue, With, Scope };

struct Stmt {
  StmtType type;
  Pos pos;
  Stmt(StmtType t, Pos p) : type(t), pos(p) {}
  virtual ~Stmt() = default;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct OutputStmt : Stmt {
  std::string text;
  OutputStmt(Pos p, std::string t) : Stmt(StmtType::Output, p), text(std::move(t)) {}
};

struct EmitStmt : Stmt {
  ExprPtr expr;
  EmitStmt(Pos p, ExprPtr e) : Stmt(StmtType::Emit, p), expr(std::move(e)) {}
};

struct IfStmt : Stmt {
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body otherwise;
  explicit IfStmt(Pos p) : Stmt(StmtType::If, p) {}
};

struct ForStmt : Stmt {
  Target target;
  ExprPtr iter, filter;
  Body body, otherwise;
  bool recursive = false;
  explicit ForStmt(Pos p) : Stmt(StmtType::For, p) {}
};

struct SetStmt : Stmt {
  Target target;
  ExprPtr value;
  explicit SetStmt(Pos p) : Stmt(StmtType::Set, p) {}
};

// {% set x | filters %}body{% endset %}
struct SetBlockStmt : Stmt {
  Target target;
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
  explicit SetBlockStmt(Pos p) : Stmt(StmtType::SetBlock, p) {}
};

struct MacroParams {
  std::vector<std::string> names;
  std::vector<ExprPtr> defaults;  // aligned with names; null where there is none
  // Whether the body mentions varargs / kwargs / caller: Jinja2 refuses extra arguments otherwise.
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;
};

struct MacroStmt : Stmt {
  std::string name;
  MacroParams params;
  Body body;
  explicit MacroStmt(Pos p) : Stmt(StmtType::Macro, p) {}
};

// {% call(params) macro(args) %}body{% endcall %}: body becomes caller().
struct CallBlockStmt : Stmt {
  std::unique_ptr<CallExpr> call;
  MacroParams params;
  Body body;
  explicit CallBlockStmt(Pos p) : Stmt(StmtType::CallBlock, p) {}
};

struct FilterBlockStmt : Stmt {
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
  explicit FilterBlockStmt(Pos p) : Stmt(StmtType::FilterBlock, p) {}
};

struct WithStmt : Stmt {
  std::vector<std::pair<Target, ExprPtr>> assignments;
  Body body;
  explicit WithStmt(Pos p) : Stmt(StmtType::With, p) {}
};

// A body rendered in place ({% generation %}, {% block %}).
struct ScopeStmt : Stmt {
  Body body;
  explicit ScopeStmt(Pos p) : Stmt(StmtType::Scope, p) {}
};

}  // namespace ember::jinja
