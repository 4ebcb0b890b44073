//===- Sema.cpp - Name resolution and static checks -----------------------===//

#include "Sema.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"

#include <string>

using namespace coll;
using namespace coll::lang;
using namespace coll::lang::ast;

//===----------------------------------------------------------------------===//
// Built-in names
//===----------------------------------------------------------------------===//

static Signature makeSignature(llvm::StringRef name, unsigned minArgs,
                               llvm::StringRef positional,
                               llvm::StringRef named) {
  Signature sig;
  sig.name = name;
  sig.minArgs = minArgs;
  positional.split(sig.params, ", ", -1, /*KeepEmpty=*/false);
  sig.numPositional = sig.params.size();
  named.split(sig.params, ", ", -1, /*KeepEmpty=*/false);
  return sig;
}

const Signature &coll::lang::signature(Builtin builtin) {
  static const Signature table[] = {
#define COLL_BUILTIN(Enum, Name, MinArgs, Positional, Named)                   \
  makeSignature(Name, MinArgs, Positional, Named),
#include "coll/lang/Builtins.def"
  };
  return table[static_cast<size_t>(builtin)];
}

const Signature &coll::lang::signature(Method method) {
  static const Signature table[] = {
#define COLL_METHOD(Enum, Name, MinArgs, Positional, Named)                    \
  makeSignature(Name, MinArgs, Positional, Named),
#include "coll/lang/Builtins.def"
  };
  return table[static_cast<size_t>(method)];
}

llvm::StringRef coll::lang::spelling(Property property) {
  switch (property) {
#define COLL_PROPERTY(Enum, Name)                                              \
  case Property::Enum:                                                         \
    return Name;
#include "coll/lang/Builtins.def"
  }
  return "?";
}

static std::optional<Builtin> lookupBuiltin(llvm::StringRef name) {
#define COLL_BUILTIN(Enum, Name, MinArgs, Positional, Named)                   \
  if (name == Name)                                                            \
    return Builtin::Enum;
#include "coll/lang/Builtins.def"
  return std::nullopt;
}

static std::optional<Method> lookupMethod(llvm::StringRef name) {
#define COLL_METHOD(Enum, Name, MinArgs, Positional, Named)                    \
  if (name == Name)                                                            \
    return Method::Enum;
#include "coll/lang/Builtins.def"
  return std::nullopt;
}

static std::optional<Property> lookupProperty(llvm::StringRef name) {
#define COLL_PROPERTY(Enum, Name)                                              \
  if (name == Name)                                                            \
    return Property::Enum;
#include "coll/lang/Builtins.def"
  return std::nullopt;
}

static std::optional<OptionKind> lookupOption(llvm::StringRef name) {
  for (OptionKind kind :
       {OptionKind::Protocol, OptionKind::Instances, OptionKind::Threadblocks,
        OptionKind::Fusion, OptionKind::Name, OptionKind::MinBytes,
        OptionKind::MaxBytes})
    if (spelling(kind) == name)
      return kind;
  return std::nullopt;
}

/// "a, b and c".
static std::string joinWords(llvm::ArrayRef<llvm::StringRef> words,
                             llvm::StringRef last = " and ") {
  std::string result;
  for (size_t i = 0; i < words.size(); ++i)
    result += (i == 0                  ? ""
               : i + 1 == words.size() ? last.str()
                                       : ", ") +
              words[i].str();
  return result;
}

//===----------------------------------------------------------------------===//
// Resolution
//===----------------------------------------------------------------------===//

namespace {

class Sema {
public:
  explicit Sema(DiagnosticEngine &diags) : diags(diags) {}

  bool run(Program &program) {
    for (StmtPtr &item : program.items)
      if (auto *fn = llvm::dyn_cast<FnDecl>(item.get()))
        declareFunction(*fn);
    scopes.emplace_back();
    for (StmtPtr &item : program.items)
      resolveStmt(*item);
    scopes.clear();
    for (StmtPtr &item : program.items)
      if (auto *fn = llvm::dyn_cast<FnDecl>(item.get()))
        resolveFunction(*fn);
    if (!collective)
      error(program.loc, "the program declares no collective (add, e.g., "
                         "`collective allreduce(ranks = 8)`)");
    program.numGlobals = numGlobals;
    return ok;
  }

private:
  /// TopLet: a top-level `let` as functions see it (they read it, but only
  /// the top level assigns it).
  enum class VarKind : uint8_t { Variable, Param, LoopVar, TopLet };
  struct Var {
    Binding binding;
    VarKind kind;
    llvm::SMLoc declLoc;
  };
  using Scope = llvm::StringMap<Var>;

  void error(llvm::SMLoc loc, const llvm::Twine &message) {
    diags.error(loc, message);
    ok = false;
  }

  static bool isBuiltinName(llvm::StringRef name) {
    return lookupBuiltin(name) || name == "input" || name == "output" ||
           name == "auto";
  }

  const Var *lookupVar(llvm::StringRef name) const {
    for (const Scope &scope : llvm::reverse(scopes)) {
      auto it = scope.find(name);
      if (it != scope.end())
        return &it->second;
    }
    return nullptr;
  }

  /// Declares a name in the innermost scope, in the frame being built.
  Binding declare(llvm::StringRef name, llvm::SMLoc loc, VarKind kind) {
    Binding binding;
    binding.kind = inFunction ? Binding::Kind::Local : Binding::Kind::Global;
    binding.slot = inFunction ? numLocals++ : numGlobals++;
    if (isBuiltinName(name)) {
      error(loc, "'" + name + "' is a built-in name and cannot be redeclared");
    } else if (auto it = functions.find(name); it != functions.end()) {
      error(loc, "'" + name + "' is already the name of a function");
      diags.note(it->second->nameLoc, "'" + name + "' is defined here");
    } else if (auto [it2, inserted] =
                   scopes.back().try_emplace(name, Var{binding, kind, loc});
               !inserted) {
      error(loc, "'" + name + "' is already declared in this scope");
      diags.note(it2->second.declLoc, "the previous declaration is here");
    }
    return binding;
  }

  void declareFunction(FnDecl &fn) {
    if (isBuiltinName(fn.name)) {
      error(fn.nameLoc,
            "'" + fn.name + "' is a built-in name and cannot be redefined");
      return;
    }
    auto [it, inserted] = functions.try_emplace(fn.name, &fn);
    if (!inserted) {
      error(fn.nameLoc, "function '" + fn.name + "' is defined twice");
      diags.note(it->second->nameLoc, "the first definition is here");
    }
  }

  void resolveFunction(FnDecl &fn) {
    inFunction = true;
    numLocals = 0;
    scopes = {params, topLets, Scope()};
    for (size_t i = 0; i < fn.params.size(); ++i)
      declare(fn.params[i], fn.paramLocs[i], VarKind::Variable);
    for (StmtPtr &stmt : fn.body)
      resolveStmt(*stmt);
    fn.numSlots = numLocals;
    scopes.clear();
    inFunction = false;
  }

  void resolveBlock(Block &block) {
    scopes.emplace_back();
    for (StmtPtr &stmt : block)
      resolveStmt(*stmt);
    scopes.pop_back();
  }

  void resolveStmt(Stmt &stmt) {
    switch (stmt.getKind()) {
    case Stmt::Kind::Let: {
      auto &let = llvm::cast<LetStmt>(stmt);
      resolveExpr(*let.init);
      let.binding = declare(let.name, let.nameLoc, VarKind::Variable);
      if (!inFunction && scopes.size() == 1)
        topLets.try_emplace(let.name,
                            Var{let.binding, VarKind::TopLet, let.nameLoc});
      return;
    }
    case Stmt::Kind::Assign: {
      auto &assign = llvm::cast<AssignStmt>(stmt);
      resolveExpr(*assign.value);
      const Var *var = lookupVar(assign.name);
      if (!var) {
        error(assign.loc,
              "unknown variable '" + assign.name + "'" +
                  (functions.count(assign.name) ? " (it is a function)" : ""));
      } else if (var->kind == VarKind::Param) {
        error(assign.loc, "cannot assign to parameter '" + assign.name +
                              "': parameters are constants");
        diags.note(var->declLoc, "'" + assign.name + "' is declared here");
      } else if (var->kind == VarKind::LoopVar) {
        error(assign.loc,
              "cannot assign to loop variable '" + assign.name + "'");
      } else if (var->kind == VarKind::TopLet) {
        error(assign.loc,
              "a function cannot assign to top-level variable '" +
                  assign.name +
                  "': functions read top-level variables but only the top "
                  "level changes them; return the new value instead");
        diags.note(var->declLoc, "'" + assign.name + "' is declared here");
      } else {
        assign.binding = var->binding;
      }
      return;
    }
    case Stmt::Kind::For: {
      auto &loop = llvm::cast<ForStmt>(stmt);
      resolveExpr(*loop.from);
      if (loop.to)
        resolveExpr(*loop.to);
      if (loop.step)
        resolveExpr(*loop.step);
      scopes.emplace_back();
      loop.binding = declare(loop.var, loop.varLoc, VarKind::LoopVar);
      resolveBlock(loop.body);
      scopes.pop_back();
      return;
    }
    case Stmt::Kind::While: {
      auto &loop = llvm::cast<WhileStmt>(stmt);
      resolveExpr(*loop.cond);
      resolveBlock(loop.body);
      return;
    }
    case Stmt::Kind::If: {
      auto &ifStmt = llvm::cast<IfStmt>(stmt);
      for (IfStmt::Branch &branch : ifStmt.branches) {
        resolveExpr(*branch.cond);
        resolveBlock(branch.body);
      }
      if (ifStmt.elseBody)
        resolveBlock(*ifStmt.elseBody);
      return;
    }
    case Stmt::Kind::Return: {
      auto &ret = llvm::cast<ReturnStmt>(stmt);
      if (!inFunction)
        error(ret.loc, "'return' outside a function");
      if (ret.value)
        resolveExpr(*ret.value);
      return;
    }
    case Stmt::Kind::Parallelize: {
      auto &par = llvm::cast<ParallelizeStmt>(stmt);
      resolveExpr(*par.factor);
      resolveBlock(par.body);
      return;
    }
    case Stmt::Kind::Expr: {
      auto &exprStmt = llvm::cast<ExprStmt>(stmt);
      resolveExpr(*exprStmt.expr);
      if (!llvm::isa<CallExpr, MethodExpr>(exprStmt.expr.get()))
        error(exprStmt.expr->loc,
              "this expression has no effect (only calls can be statements)");
      return;
    }
    case Stmt::Kind::Param: {
      auto &param = llvm::cast<ParamDecl>(stmt);
      resolveExpr(*param.value);
      param.binding = declare(param.name, param.nameLoc, VarKind::Param);
      params.try_emplace(param.name,
                         Var{param.binding, VarKind::Param, param.nameLoc});
      return;
    }
    case Stmt::Kind::Collective:
      return resolveCollective(llvm::cast<CollectiveDecl>(stmt));
    case Stmt::Kind::Option: return resolveOption(llvm::cast<OptionDecl>(stmt));
    case Stmt::Kind::Fn:
      return; // resolved after the top level, when every param is known
    }
  }

  void resolveCollective(CollectiveDecl &decl) {
    if (collective) {
      error(decl.loc, "the collective is declared twice");
      diags.note(collective->loc, "the first declaration is here");
      return;
    }
    collective = &decl;
    std::optional<ir::Collective> kind = ir::parseCollective(decl.kindName);
    if (!kind) {
      error(decl.kindLoc,
            "unknown collective '" + decl.kindName +
                "' (expected allreduce, allgather, reducescatter, alltoall, "
                "broadcast, reduce, gather, scatter or custom)");
      return;
    }
    decl.kind = *kind;
    bool custom = *kind == ir::Collective::Custom;
    // The required arguments come first.
    static const llvm::StringRef customArgs[] = {"ranks", "input", "output",
                                                 "inplace"};
    static const llvm::StringRef builtinArgs[] = {"ranks", "chunks", "inplace",
                                                  "root"};
    llvm::ArrayRef<llvm::StringRef> allowed =
        custom ? customArgs
               : llvm::makeArrayRef(builtinArgs)
                     .drop_back(ir::collectiveInfo(*kind).hasRoot ? 0 : 1);
    llvm::StringMap<llvm::SMLoc> given;
    for (Arg &arg : decl.args) {
      resolveExpr(*arg.value);
      if (arg.name.empty()) {
        error(arg.value->loc,
              "collective arguments must be named, as in `ranks = 8`");
        continue;
      }
      if (!llvm::is_contained(allowed, arg.name)) {
        error(arg.nameLoc, "collective " + decl.kindName +
                               " has no argument '" + arg.name +
                               "' (it takes " + joinWords(allowed) + ")");
        continue;
      }
      if (!given.try_emplace(arg.name, arg.nameLoc).second) {
        error(arg.nameLoc, "argument '" + arg.name + "' is given twice");
        continue;
      }
      CollectiveArg which = llvm::StringSwitch<CollectiveArg>(arg.name)
                                .Case("ranks", CollectiveArg::Ranks)
                                .Case("chunks", CollectiveArg::Chunks)
                                .Case("inplace", CollectiveArg::Inplace)
                                .Case("root", CollectiveArg::Root)
                                .Case("input", CollectiveArg::Input)
                                .Case("output", CollectiveArg::Output);
      arg.param = static_cast<uint32_t>(which);
    }
    for (llvm::StringRef required : allowed.take_front(custom ? 3 : 1))
      if (!given.count(required))
        error(decl.kindLoc, "collective " + decl.kindName + " needs `" +
                                required + " = ...`");
    if (!custom && (decl.pre || decl.post))
      error(decl.kindLoc, "only a custom collective has pre and post blocks");
    if (custom && !decl.post)
      error(decl.kindLoc, "a custom collective needs a `post { ... }` block "
                          "stating its postcondition");
    if (decl.pre)
      resolveBlock(*decl.pre);
    if (decl.post)
      resolveBlock(*decl.post);
  }

  void resolveOption(OptionDecl &decl) {
    for (OptionDecl::Item &item : decl.items) {
      std::optional<OptionKind> kind = lookupOption(item.name);
      if (!kind) {
        error(item.nameLoc,
              "unknown option '" + item.name +
                  "' (options are protocol, instances, threadblocks, "
                  "fusion, name, min_bytes and max_bytes)");
        continue;
      }
      item.kind = *kind;
      if (auto [it, inserted] = options.try_emplace(item.name, item.nameLoc);
          !inserted) {
        error(item.nameLoc, "option '" + item.name + "' is set twice");
        diags.note(it->second, "it is first set here");
        continue;
      }
      auto *word = llvm::dyn_cast<NameExpr>(item.value.get());
      if (*kind == OptionKind::Protocol) {
        if (!word || !ir::parseProtocol(word->name))
          error(item.value->loc, "protocol must be Simple, LL or LL128");
      } else if (*kind == OptionKind::Threadblocks) {
        if (!word || (word->name != "auto" && word->name != "manual"))
          error(item.value->loc, "threadblocks must be auto or manual");
      } else {
        resolveExpr(*item.value);
      }
    }
  }

  void resolveExpr(Expr &expr) {
    switch (expr.getKind()) {
    case Expr::Kind::Int:
    case Expr::Kind::Bool:
    case Expr::Kind::String: return;
    case Expr::Kind::Name: {
      auto &name = llvm::cast<NameExpr>(expr);
      if (const Var *var = lookupVar(name.name))
        name.binding = var->binding;
      else if (name.name == "input")
        name.binding.kind = Binding::Kind::Input;
      else if (name.name == "output")
        name.binding.kind = Binding::Kind::Output;
      else if (name.name == "scratch")
        name.binding.kind = Binding::Kind::Scratch;
      else if (name.name == "auto")
        name.binding.kind = Binding::Kind::Auto;
      else if (functions.count(name.name))
        error(name.loc, "'" + name.name + "' is a function; call it as " +
                            name.name + "(...)");
      else
        error(name.loc, "unknown name '" + name.name + "'");
      return;
    }
    case Expr::Kind::List:
      for (ExprPtr &element : llvm::cast<ListExpr>(expr).elements)
        resolveExpr(*element);
      return;
    case Expr::Kind::Unary:
      return resolveExpr(*llvm::cast<UnaryExpr>(expr).operand);
    case Expr::Kind::Cond: {
      auto &cond = llvm::cast<CondExpr>(expr);
      resolveExpr(*cond.cond);
      resolveExpr(*cond.then);
      resolveExpr(*cond.otherwise);
      return;
    }
    case Expr::Kind::Binary: {
      auto &binary = llvm::cast<BinaryExpr>(expr);
      resolveExpr(*binary.lhs);
      resolveExpr(*binary.rhs);
      return;
    }
    case Expr::Kind::Index: {
      auto &index = llvm::cast<IndexExpr>(expr);
      resolveExpr(*index.base);
      resolveExpr(*index.index);
      return;
    }
    case Expr::Kind::Call: return resolveCall(llvm::cast<CallExpr>(expr));
    case Expr::Kind::Method: {
      auto &method = llvm::cast<MethodExpr>(expr);
      resolveExpr(*method.receiver);
      for (Arg &arg : method.args)
        resolveExpr(*arg.value);
      std::optional<Method> kind = lookupMethod(method.name);
      if (!kind) {
        error(method.nameLoc, "unknown method '" + method.name +
                                  "' (chunk references have copy, reduce, "
                                  "split and group)");
        return;
      }
      method.method = *kind;
      checkArgs(signature(*kind), method.args, method.nameLoc);
      return;
    }
    case Expr::Kind::Member: {
      auto &member = llvm::cast<MemberExpr>(expr);
      resolveExpr(*member.receiver);
      if (std::optional<Property> property = lookupProperty(member.name))
        member.property = *property;
      else if (lookupMethod(member.name))
        error(member.nameLoc, "'" + member.name +
                                  "' is a method; call it as ." + member.name +
                                  "(...)");
      else
        error(member.nameLoc,
              "unknown property '" + member.name +
                  "' (chunk references have rank, index, size, origin_rank, "
                  "origin_index, dest_rank and dest_index)");
      return;
    }
    }
  }

  void resolveCall(CallExpr &call) {
    for (Arg &arg : call.args)
      resolveExpr(*arg.value);
    if (auto it = functions.find(call.callee); it != functions.end()) {
      call.fn = it->second;
      for (size_t i = 0; i < call.args.size(); ++i) {
        if (!call.args[i].name.empty()) {
          error(call.args[i].nameLoc,
                "function '" + call.callee + "' takes no named arguments");
          return;
        }
        call.args[i].param = static_cast<uint32_t>(i);
      }
      size_t expected = call.fn->params.size();
      if (call.args.size() != expected) {
        error(call.loc, "function '" + call.callee + "' takes " +
                            llvm::Twine(expected) +
                            (expected == 1 ? " argument" : " arguments") +
                            ", got " + llvm::Twine(call.args.size()));
        diags.note(call.fn->nameLoc, "'" + call.callee + "' is defined here");
      }
      return;
    }
    if (std::optional<Builtin> builtin = lookupBuiltin(call.callee)) {
      call.builtin = builtin;
      checkArgs(signature(*builtin), call.args, call.loc);
      return;
    }
    if (lookupVar(call.callee) || call.callee == "input" ||
        call.callee == "output")
      error(call.loc, "'" + call.callee + "' is not a function");
    else
      error(call.loc, "unknown function '" + call.callee + "'");
  }

  /// Binds each argument to a parameter of a built-in.
  void checkArgs(const Signature &sig, std::vector<Arg> &args,
                 llvm::SMLoc loc) {
    unsigned positional = 0;
    bool seenNamed = false;
    llvm::SmallVector<bool, 6> given(sig.params.size(), false);
    for (Arg &arg : args) {
      if (arg.name.empty()) {
        if (seenNamed) {
          error(arg.value->loc, "positional argument after a named one");
          return;
        }
        arg.param = positional++;
        continue;
      }
      seenNamed = true;
      auto named = llvm::makeArrayRef(sig.params).drop_front(sig.numPositional);
      const auto *it = llvm::find(named, arg.name);
      if (it == named.end()) {
        error(arg.nameLoc,
              "'" + sig.name + "' has no argument named '" + arg.name + "'" +
                  (named.empty()
                       ? " (it takes no named arguments)"
                       : " (it takes " + joinWords(named, " or ") + ")"));
        return;
      }
      arg.param = sig.numPositional + static_cast<uint32_t>(it - named.begin());
      if (given[arg.param]) {
        error(arg.nameLoc, "argument '" + arg.name + "' is given twice");
        return;
      }
      given[arg.param] = true;
    }
    if (positional >= sig.minArgs && positional <= sig.numPositional)
      return;
    auto names = llvm::makeArrayRef(sig.params).take_front(sig.numPositional);
    std::string count = std::to_string(sig.minArgs);
    if (sig.numPositional != sig.minArgs)
      count += (sig.numPositional == sig.minArgs + 1 ? " or " : " to ") +
               std::to_string(sig.numPositional);
    error(loc, "'" + sig.name + "' takes " + count +
                   (sig.numPositional == 1 ? " argument" : " arguments") +
                   " (" + joinWords(names, ", ") + "), got " +
                   llvm::Twine(positional));
  }

  DiagnosticEngine &diags;
  bool ok = true;
  llvm::StringMap<FnDecl *> functions;
  std::vector<Scope> scopes;
  /// The variables `let` declares at the top level, outside any block.
  Scope topLets;
  /// Every parameter: the scope function bodies see.
  Scope params;
  uint32_t numGlobals = 0, numLocals = 0;
  bool inFunction = false;
  const CollectiveDecl *collective = nullptr;
  llvm::StringMap<llvm::SMLoc> options;
};

} // namespace

bool coll::lang::checkProgram(Program &program, DiagnosticEngine &diags) {
  return Sema(diags).run(program);
}
