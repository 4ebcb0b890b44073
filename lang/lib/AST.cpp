//===- AST.cpp - Spellings and the text dump of the AST -------------------===//
//
// The dump (collc --emit=ast) prints one node per line, children indented by
// two spaces under their parent, each node with the line:col where it starts:
//
//   For r @5:1
//     Range
//       Int 0 @5:10
//       Name N @5:13
//     Body
//       Let c @6:5
//         Call chunk @6:13
//
// Blocks appear as a labelled line (Body, Then, Else, Pre, Post) above their
// statements; named arguments as `Named NAME` above their value; a loop over
// a list has `Elements` where a counted loop has `Range`.
//
//===----------------------------------------------------------------------===//

#include "coll/lang/AST.h"
#include "coll/lang/Frontend.h"

using namespace coll;
using namespace coll::lang;
using namespace coll::lang::ast;

llvm::StringRef ast::spelling(UnaryOp op) {
  return op == UnaryOp::Neg ? "-" : "!";
}

llvm::StringRef ast::spelling(BinaryOp op) {
  switch (op) {
  case BinaryOp::Mul: return "*";
  case BinaryOp::Div: return "/";
  case BinaryOp::Mod: return "%";
  case BinaryOp::Add: return "+";
  case BinaryOp::Sub: return "-";
  case BinaryOp::Lt: return "<";
  case BinaryOp::Le: return "<=";
  case BinaryOp::Gt: return ">";
  case BinaryOp::Ge: return ">=";
  case BinaryOp::Eq: return "==";
  case BinaryOp::Ne: return "!=";
  case BinaryOp::And: return "&&";
  case BinaryOp::Or: return "||";
  }
  return "?";
}

llvm::StringRef ast::spelling(OptionKind kind) {
  switch (kind) {
  case OptionKind::Protocol: return "protocol";
  case OptionKind::Instances: return "instances";
  case OptionKind::Threadblocks: return "threadblocks";
  case OptionKind::Fusion: return "fusion";
  case OptionKind::Name: return "name";
  case OptionKind::MinBytes: return "min_bytes";
  case OptionKind::MaxBytes: return "max_bytes";
  }
  return "?";
}

namespace {

class AstDumper {
public:
  AstDumper(const llvm::SourceMgr &srcMgr, llvm::raw_ostream &os)
      : srcMgr(srcMgr), os(os) {}

  void dump(const Program &program) {
    os << "Program\n";
    ++indent;
    for (const StmtPtr &item : program.items)
      dump(*item);
  }

private:
  /// Starts a node's line; `loc` is printed at its end by `end`.
  llvm::raw_ostream &line() { return os.indent(2 * indent); }
  void end(llvm::SMLoc loc) {
    auto [l, c] = srcMgr.getLineAndColumn(loc);
    os << " @" << l << ':' << c << '\n';
  }

  void label(llvm::StringRef name, const Block &block) {
    line() << name << '\n';
    ++indent;
    for (const StmtPtr &stmt : block)
      dump(*stmt);
    --indent;
  }
  void children(std::initializer_list<const Expr *> exprs) {
    ++indent;
    for (const Expr *e : exprs)
      dump(*e);
    --indent;
  }
  void args(const std::vector<Arg> &args) {
    ++indent;
    for (const Arg &arg : args) {
      if (arg.name.empty()) {
        dump(*arg.value);
        continue;
      }
      line() << "Named " << arg.name;
      end(arg.nameLoc);
      children({arg.value.get()});
    }
    --indent;
  }

  void dump(const Stmt &stmt) {
    switch (stmt.getKind()) {
    case Stmt::Kind::Let: {
      auto &let = llvm::cast<LetStmt>(stmt);
      line() << "Let " << let.name;
      end(let.loc);
      return children({let.init.get()});
    }
    case Stmt::Kind::Assign: {
      auto &assign = llvm::cast<AssignStmt>(stmt);
      line() << "Assign " << assign.name;
      end(assign.loc);
      return children({assign.value.get()});
    }
    case Stmt::Kind::For: {
      auto &loop = llvm::cast<ForStmt>(stmt);
      line() << "For " << loop.var;
      end(loop.loc);
      ++indent;
      line() << (loop.to ? "Range\n" : "Elements\n");
      children({loop.from.get()});
      if (loop.to)
        children({loop.to.get()});
      if (loop.step)
        children({loop.step.get()});
      label("Body", loop.body);
      --indent;
      return;
    }
    case Stmt::Kind::While: {
      auto &loop = llvm::cast<WhileStmt>(stmt);
      line() << "While";
      end(loop.loc);
      children({loop.cond.get()});
      ++indent;
      label("Body", loop.body);
      --indent;
      return;
    }
    case Stmt::Kind::If: {
      auto &ifStmt = llvm::cast<IfStmt>(stmt);
      line() << "If";
      end(ifStmt.loc);
      ++indent;
      for (const IfStmt::Branch &branch : ifStmt.branches) {
        line() << "Cond\n";
        children({branch.cond.get()});
        label("Then", branch.body);
      }
      if (ifStmt.elseBody)
        label("Else", *ifStmt.elseBody);
      --indent;
      return;
    }
    case Stmt::Kind::Return: {
      auto &ret = llvm::cast<ReturnStmt>(stmt);
      line() << "Return";
      end(ret.loc);
      if (ret.value)
        children({ret.value.get()});
      return;
    }
    case Stmt::Kind::Parallelize: {
      auto &par = llvm::cast<ParallelizeStmt>(stmt);
      line() << "Parallelize";
      end(par.loc);
      children({par.factor.get()});
      ++indent;
      label("Body", par.body);
      --indent;
      return;
    }
    case Stmt::Kind::Expr: return dump(*llvm::cast<ExprStmt>(stmt).expr);
    case Stmt::Kind::Param: {
      auto &param = llvm::cast<ParamDecl>(stmt);
      line() << "Param " << param.name;
      end(param.loc);
      return children({param.value.get()});
    }
    case Stmt::Kind::Collective: {
      auto &coll = llvm::cast<CollectiveDecl>(stmt);
      line() << "Collective " << coll.kindName;
      end(coll.loc);
      args(coll.args);
      ++indent;
      if (coll.pre)
        label("Pre", *coll.pre);
      if (coll.post)
        label("Post", *coll.post);
      --indent;
      return;
    }
    case Stmt::Kind::Option:
      for (const OptionDecl::Item &item : llvm::cast<OptionDecl>(stmt).items) {
        line() << "Option " << item.name;
        end(item.nameLoc);
        children({item.value.get()});
      }
      return;
    case Stmt::Kind::Fn: {
      auto &fn = llvm::cast<FnDecl>(stmt);
      line() << "Fn " << fn.name << '(';
      for (size_t i = 0; i < fn.params.size(); ++i)
        os << (i ? ", " : "") << fn.params[i];
      os << ')';
      end(fn.loc);
      ++indent;
      label("Body", fn.body);
      --indent;
      return;
    }
    }
  }

  void dump(const Expr &expr) {
    switch (expr.getKind()) {
    case Expr::Kind::Int:
      line() << "Int " << llvm::cast<IntExpr>(expr).value;
      return end(expr.loc);
    case Expr::Kind::Bool:
      line() << "Bool "
             << (llvm::cast<BoolExpr>(expr).value ? "true" : "false");
      return end(expr.loc);
    case Expr::Kind::String: {
      line() << "String \"";
      for (char c : llvm::cast<StringExpr>(expr).value) {
        if (c == '"' || c == '\\')
          os << '\\' << c;
        else if (c == '\n')
          os << "\\n";
        else if (c == '\t')
          os << "\\t";
        else
          os << c;
      }
      os << '"';
      return end(expr.loc);
    }
    case Expr::Kind::Name:
      line() << "Name " << llvm::cast<NameExpr>(expr).name;
      return end(expr.loc);
    case Expr::Kind::List:
      line() << "List";
      end(expr.loc);
      ++indent;
      for (const ExprPtr &element : llvm::cast<ListExpr>(expr).elements)
        dump(*element);
      --indent;
      return;
    case Expr::Kind::Unary: {
      auto &unary = llvm::cast<UnaryExpr>(expr);
      line() << "Unary " << spelling(unary.op);
      end(unary.loc);
      return children({unary.operand.get()});
    }
    case Expr::Kind::Binary: {
      auto &binary = llvm::cast<BinaryExpr>(expr);
      line() << "Binary " << spelling(binary.op);
      end(binary.loc);
      return children({binary.lhs.get(), binary.rhs.get()});
    }
    case Expr::Kind::Cond: {
      auto &cond = llvm::cast<CondExpr>(expr);
      line() << "Cond";
      end(cond.loc);
      return children(
          {cond.cond.get(), cond.then.get(), cond.otherwise.get()});
    }
    case Expr::Kind::Index: {
      auto &index = llvm::cast<IndexExpr>(expr);
      line() << "Index";
      end(index.loc);
      return children({index.base.get(), index.index.get()});
    }
    case Expr::Kind::Call: {
      auto &call = llvm::cast<CallExpr>(expr);
      line() << "Call " << call.callee;
      end(call.loc);
      return args(call.args);
    }
    case Expr::Kind::Method: {
      auto &method = llvm::cast<MethodExpr>(expr);
      line() << "Method " << method.name;
      end(method.nameLoc);
      children({method.receiver.get()});
      return args(method.args);
    }
    case Expr::Kind::Member: {
      auto &member = llvm::cast<MemberExpr>(expr);
      line() << "Member " << member.name;
      end(member.nameLoc);
      return children({member.receiver.get()});
    }
    }
  }

  const llvm::SourceMgr &srcMgr;
  llvm::raw_ostream &os;
  unsigned indent = 0;
};

} // namespace

void coll::lang::dumpAst(const Program &program, const llvm::SourceMgr &srcMgr,
                         llvm::raw_ostream &os) {
  AstDumper(srcMgr, os).dump(program);
}
