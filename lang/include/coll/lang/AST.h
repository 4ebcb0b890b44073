//===- AST.h - Abstract syntax tree of .coll programs -----------*- C++ -*-===//
//
// The parser builds this tree from ANTLR's parse tree (so no ANTLR type
// appears here); semantic analysis then resolves every name in place: each
// variable gets a slot in its frame (the global frame or its function's),
// each call its callee, each named argument its parameter. After a
// successful parseProgram() every `Binding`, `callee`, `param` and `slot` is
// filled in.
//
// Every node records where it starts (`loc`); nodes whose errors are about
// one token (an operator, a method name) record that token too.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_LANG_AST_H
#define COLL_LANG_AST_H

#include "coll/ir/Algorithm.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Casting.h"
#include "llvm/Support/SMLoc.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace coll::lang::ast {

enum class UnaryOp : uint8_t { Neg, Not };
enum class BinaryOp : uint8_t {
  Mul, Div, Mod, Add, Sub, Lt, Le, Gt, Ge, Eq, Ne, And, Or
};
llvm::StringRef spelling(UnaryOp op);
llvm::StringRef spelling(BinaryOp op);

enum class Builtin : uint8_t {
#define COLL_BUILTIN(Enum, Name, MinArgs, Positional, Named) Enum,
#include "coll/lang/Builtins.def"
};
enum class Method : uint8_t {
#define COLL_METHOD(Enum, Name, MinArgs, Positional, Named) Enum,
#include "coll/lang/Builtins.def"
};
enum class Property : uint8_t {
#define COLL_PROPERTY(Enum, Name) Enum,
#include "coll/lang/Builtins.def"
};

/// Program-wide options (`option name = value`).
enum class OptionKind : uint8_t {
  Protocol, Instances, Threadblocks, Fusion, Name, MinBytes, MaxBytes
};
llvm::StringRef spelling(OptionKind kind);

/// What a name refers to: a variable slot in the global frame or in the
/// current function's frame, or one of the predefined buffers.
struct Binding {
  enum class Kind : uint8_t {
    Unresolved, Global, Local, Input, Output, Scratch,
    Auto, ///< `auto`: no scheduling hint
  };
  Kind kind = Kind::Unresolved;
  uint32_t slot = 0; ///< for Global and Local
};

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

class Expr {
public:
  enum class Kind : uint8_t {
    Int, Bool, String, Name, List, Unary, Binary, Cond, Index, Call, Method,
    Member
  };
  Expr(Kind kind, llvm::SMLoc loc) : kind(kind), loc(loc) {}
  virtual ~Expr() = default;
  Kind getKind() const { return kind; }

private:
  const Kind kind;

public:
  llvm::SMLoc loc; ///< the first token of the expression
};
using ExprPtr = std::unique_ptr<Expr>;

template <Expr::Kind K> struct ExprNode : Expr {
  explicit ExprNode(llvm::SMLoc loc) : Expr(K, loc) {}
  static bool classof(const Expr *e) { return e->getKind() == K; }
};

struct IntExpr : ExprNode<Expr::Kind::Int> {
  using ExprNode::ExprNode;
  int64_t value = 0;
};
struct BoolExpr : ExprNode<Expr::Kind::Bool> {
  using ExprNode::ExprNode;
  bool value = false;
};
struct StringExpr : ExprNode<Expr::Kind::String> {
  using ExprNode::ExprNode;
  std::string value; ///< escapes resolved
};
struct NameExpr : ExprNode<Expr::Kind::Name> {
  using ExprNode::ExprNode;
  std::string name;
  Binding binding;
};
struct ListExpr : ExprNode<Expr::Kind::List> {
  using ExprNode::ExprNode;
  std::vector<ExprPtr> elements;
};
struct UnaryExpr : ExprNode<Expr::Kind::Unary> {
  using ExprNode::ExprNode;
  UnaryOp op = UnaryOp::Neg;
  ExprPtr operand;
};
struct BinaryExpr : ExprNode<Expr::Kind::Binary> {
  using ExprNode::ExprNode;
  BinaryOp op = BinaryOp::Add;
  llvm::SMLoc opLoc;
  ExprPtr lhs, rhs;
};
/// `if cond then a else b`: evaluates one of the two.
struct CondExpr : ExprNode<Expr::Kind::Cond> {
  using ExprNode::ExprNode;
  ExprPtr cond, then, otherwise;
};
struct IndexExpr : ExprNode<Expr::Kind::Index> {
  using ExprNode::ExprNode;
  ExprPtr base, index;
};

/// An argument of a call: positional (empty name) or `name = value`.
struct Arg {
  std::string name;
  llvm::SMLoc nameLoc;
  ExprPtr value;
  /// The parameter it binds to: its position in the callee's positional
  /// parameters followed by its named ones.
  uint32_t param = 0;
};

struct FnDecl;

/// `name(args)`: a user function or a built-in.
struct CallExpr : ExprNode<Expr::Kind::Call> {
  using ExprNode::ExprNode;
  std::string callee;
  std::vector<Arg> args;
  const FnDecl *fn = nullptr;     ///< set for user functions
  std::optional<Builtin> builtin; ///< set for built-ins
};
/// `receiver.name(args)`.
struct MethodExpr : ExprNode<Expr::Kind::Method> {
  using ExprNode::ExprNode;
  ExprPtr receiver;
  std::string name;
  llvm::SMLoc nameLoc;
  std::vector<Arg> args;
  Method method = Method::Copy;
};
/// `receiver.name`.
struct MemberExpr : ExprNode<Expr::Kind::Member> {
  using ExprNode::ExprNode;
  ExprPtr receiver;
  std::string name;
  llvm::SMLoc nameLoc;
  Property property = Property::Rank;
};

//===----------------------------------------------------------------------===//
// Statements and declarations
//===----------------------------------------------------------------------===//

class Stmt {
public:
  enum class Kind : uint8_t {
    Let, Assign, For, While, If, Return, Parallelize, Expr,
    Param, Collective, Option, Fn
  };
  Stmt(Kind kind, llvm::SMLoc loc) : kind(kind), loc(loc) {}
  virtual ~Stmt() = default;
  Kind getKind() const { return kind; }

private:
  const Kind kind;

public:
  llvm::SMLoc loc; ///< the first token of the statement
};
using StmtPtr = std::unique_ptr<Stmt>;
using Block = std::vector<StmtPtr>;

template <Stmt::Kind K> struct StmtNode : Stmt {
  explicit StmtNode(llvm::SMLoc loc) : Stmt(K, loc) {}
  static bool classof(const Stmt *s) { return s->getKind() == K; }
};

struct LetStmt : StmtNode<Stmt::Kind::Let> {
  using StmtNode::StmtNode;
  std::string name;
  llvm::SMLoc nameLoc;
  ExprPtr init;
  Binding binding; ///< the new variable's slot
};
struct AssignStmt : StmtNode<Stmt::Kind::Assign> {
  using StmtNode::StmtNode;
  std::string name; ///< at `loc`
  ExprPtr value;
  Binding binding;
};
/// `for var in from..to step step { body }` (`step` may be null: 1), or
/// `for var in from { body }` over the elements of a list (`to` is null).
struct ForStmt : StmtNode<Stmt::Kind::For> {
  using StmtNode::StmtNode;
  std::string var;
  llvm::SMLoc varLoc;
  ExprPtr from, to, step;
  Block body;
  Binding binding; ///< the loop variable's slot
};
struct WhileStmt : StmtNode<Stmt::Kind::While> {
  using StmtNode::StmtNode;
  ExprPtr cond;
  Block body;
};
/// `if c0 { b0 } else if c1 { b1 } ... else { elseBody }`.
struct IfStmt : StmtNode<Stmt::Kind::If> {
  using StmtNode::StmtNode;
  struct Branch {
    ExprPtr cond;
    Block body;
  };
  std::vector<Branch> branches;
  std::optional<Block> elseBody;
};
/// `return` or `return value` (then `value` is non-null).
struct ReturnStmt : StmtNode<Stmt::Kind::Return> {
  using StmtNode::StmtNode;
  ExprPtr value;
};
struct ParallelizeStmt : StmtNode<Stmt::Kind::Parallelize> {
  using StmtNode::StmtNode;
  ExprPtr factor;
  Block body;
};
/// A call evaluated for its effect.
struct ExprStmt : StmtNode<Stmt::Kind::Expr> {
  using StmtNode::StmtNode;
  ExprPtr expr;
};

struct ParamDecl : StmtNode<Stmt::Kind::Param> {
  using StmtNode::StmtNode;
  std::string name;
  llvm::SMLoc nameLoc;
  ExprPtr value;
  Binding binding; ///< global slot
};
/// `collective kind(args) { pre { ... } post { ... } }`; the body only for
/// `custom`.
struct CollectiveDecl : StmtNode<Stmt::Kind::Collective> {
  using StmtNode::StmtNode;
  std::string kindName;
  llvm::SMLoc kindLoc;
  ir::Collective kind = ir::Collective::Custom;
  std::vector<Arg> args; ///< all named
  std::optional<Block> pre, post;
};
struct OptionDecl : StmtNode<Stmt::Kind::Option> {
  using StmtNode::StmtNode;
  struct Item {
    std::string name;
    llvm::SMLoc nameLoc;
    OptionKind kind = OptionKind::Name;
    /// Protocol and threadblocks take a bare word, which is not resolved as
    /// a name.
    ExprPtr value;
  };
  std::vector<Item> items;
};
struct FnDecl : StmtNode<Stmt::Kind::Fn> {
  using StmtNode::StmtNode;
  std::string name;
  llvm::SMLoc nameLoc;
  std::vector<std::string> params; ///< in slots 0..params.size()-1
  std::vector<llvm::SMLoc> paramLocs;
  Block body;
  uint32_t numSlots = 0; ///< size of a call's frame
};

struct Program {
  llvm::SMLoc loc; ///< the start of the source
  /// The top-level items in source order.
  std::vector<StmtPtr> items;
  uint32_t numGlobals = 0; ///< size of the global frame
};

} // namespace coll::lang::ast

#endif // COLL_LANG_AST_H
