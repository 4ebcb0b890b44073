//===- Parser.cpp - ANTLR parse tree to AST -------------------------------===//
//
// The only file that sees ANTLR. It lexes the whole buffer, rejects input
// nested deeply enough to exhaust ANTLR's recursive-descent stack, parses,
// and converts the parse tree into the AST. Syntax errors are rephrased from
// the parser's state (the offending token and the tokens it expected) rather
// than from ANTLR's own messages, and only the first is reported: ANTLR's
// recovery tends to produce follow-on errors that only confuse.
//
// Token positions from ANTLR are offsets into the buffer because the input
// stream feeds it bytes, not decoded code points (non-ASCII bytes may only
// appear in comments and strings, where they are passed through).
//
//===----------------------------------------------------------------------===//

#include "Limits.h"
#include "Sema.h"

#include "coll/lang/Frontend.h"

#include "CollLexer.h"
#include "CollParser.h"
#include "antlr4-runtime.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

using namespace coll;
using namespace coll::lang;
using coll::lang::grammar::CollLexer;
using coll::lang::grammar::CollParser;

namespace {

/// Feeds the buffer to ANTLR one byte per symbol, so that token indices are
/// byte offsets.
class ByteStream : public antlr4::ANTLRInputStream {
public:
  explicit ByteStream(llvm::StringRef bytes) {
    _data.reserve(bytes.size());
    for (char c : bytes)
      _data.push_back(static_cast<unsigned char>(c));
  }
};

/// Where tokens point into the source.
class SourceText {
public:
  explicit SourceText(llvm::StringRef buffer) : buffer(buffer) {}

  llvm::SMLoc start() const {
    return llvm::SMLoc::getFromPointer(buffer.data());
  }
  llvm::SMLoc loc(const antlr4::Token *tok) const {
    return llvm::SMLoc::getFromPointer(
        buffer.data() + std::min(tok->getStartIndex(), buffer.size()));
  }
  llvm::StringRef text(const antlr4::Token *tok) const {
    if (tok->getType() == antlr4::Token::EOF)
      return "";
    size_t start = tok->getStartIndex();
    return buffer.substr(start, tok->getStopIndex() + 1 - start);
  }

private:
  llvm::StringRef buffer;
};

//===----------------------------------------------------------------------===//
// Syntax errors
//===----------------------------------------------------------------------===//

class SyntaxErrorListener : public antlr4::BaseErrorListener {
public:
  SyntaxErrorListener(const SourceText &src, DiagnosticEngine &diags)
      : src(src), diags(diags) {}

  bool failed() const { return reported; }

  void syntaxError(antlr4::Recognizer *recognizer, antlr4::Token *offending,
                   size_t line, size_t column, const std::string &antlrMessage,
                   std::exception_ptr e) override {
    if (reported || !offending)
      return;
    reported = true;
    diags.error(
        src.loc(offending),
        describe(dynamic_cast<antlr4::Parser *>(recognizer), offending));
  }

private:
  std::string describe(antlr4::Parser *parser, antlr4::Token *tok) const {
    switch (tok->getType()) {
    case CollParser::BAD_CHAR: {
      unsigned char c = src.text(tok).front();
      if (llvm::isPrint(c))
        return (llvm::Twine("unexpected character '") + llvm::Twine(char(c)) +
                "'")
            .str();
      return "unexpected byte 0x" + llvm::utohexstr(c, /*LowerCase=*/false, 2) +
             " (non-ASCII text may only appear in comments and strings)";
    }
    case CollParser::UNTERMINATED_STRING: return "unterminated string literal";
    case CollParser::UNTERMINATED_COMMENT: return "unterminated /* comment";
    default: break;
    }
    // A keyword where only a name fits: say so rather than list what fits.
    llvm::StringRef text = src.text(tok);
    if (parser && tok->getType() != CollParser::ID && !text.empty() &&
        (llvm::isAlpha(text.front()) || text.front() == '_') &&
        llvm::all_of(text,
                     [](char c) { return llvm::isAlnum(c) || c == '_'; })) {
      std::vector<ssize_t> expected = parser->getExpectedTokens().toList();
      if (expected.size() == 1 &&
          expected.front() == static_cast<ssize_t>(CollParser::ID))
        return "'" + text.str() +
               "' is a reserved word and cannot be used as a name";
    }
    std::string message = tok->getType() == antlr4::Token::EOF
                              ? "unexpected end of file"
                              : "unexpected '" + src.text(tok).str() + "'";
    if (parser) {
      std::string expected = describeExpected(*parser);
      if (!expected.empty())
        message += "; expected " + expected;
    }
    return message;
  }

  /// The tokens the parser would have accepted, in words; empty when there
  /// are too many to be helpful. Whole classes of tokens are named as one
  /// ("an expression"), and operators, which could continue almost any
  /// expression, are left out.
  static std::string describeExpected(antlr4::Parser &parser) {
    const antlr4::dfa::Vocabulary &vocab = parser.getVocabulary();
    llvm::SmallVector<std::string, 16> names;
    for (ssize_t type : parser.getExpectedTokens().toList()) {
      auto t = static_cast<size_t>(type);
      names.push_back(t == antlr4::Token::EOF ? "end of file"
                      : vocab.getLiteralName(t).empty()
                          ? vocab.getSymbolicName(t)
                          : vocab.getLiteralName(t));
    }
    auto removeAll = [&](llvm::ArrayRef<llvm::StringRef> group) {
      for (llvm::StringRef name : group)
        if (!llvm::is_contained(names, name))
          return false;
      llvm::erase_if(names, [&](const std::string &n) {
        return llvm::is_contained(group, n);
      });
      return true;
    };
    // `if` starts an expression (`if c then a else b`) as well as a
    // statement.
    static const llvm::StringRef exprStart[] = {
        "INT", "ID",  "STRING", "'true'", "'false'",
        "'('", "'['", "'-'",    "'!'",    "'if'"};
    static const llvm::StringRef stmtStart[] = {
        "'let'", "'for'", "'while'", "'return'", "'parallelize'"};
    static const llvm::StringRef declStart[] = {"'param'", "'collective'",
                                                "'option'", "'fn'"};
    static const llvm::StringRef operators[] = {
        "'.'",  "'['", "'*'",  "'/'",  "'%'",  "'+'",  "'-'", "'<'",
        "'<='", "'>'", "'>='", "'=='", "'!='", "'&&'", "'||'"};
    std::string group;
    if (removeAll(exprStart))
      group = removeAll(stmtStart)
                  ? (removeAll(declStart) ? "a declaration or statement"
                                          : "a statement")
                  : "an expression";
    llvm::erase_if(names, [](const std::string &n) {
      return llvm::is_contained(operators, n);
    });
    for (std::string &n : names)
      n = llvm::StringSwitch<std::string>(n)
              .Case("ID", "an identifier")
              .Case("INT", "an integer")
              .Case("STRING", "a string")
              .Default(n);
    if (!group.empty())
      names.insert(names.begin(), group);
    if (names.empty() || names.size() > 4)
      return "";
    std::string result;
    for (size_t i = 0; i < names.size(); ++i)
      result += (i == 0                  ? ""
                 : i + 1 == names.size() ? " or "
                                         : ", ") +
                names[i];
    return result;
  }

  const SourceText &src;
  DiagnosticEngine &diags;
  bool reported = false;
};

/// Rejects bracket nesting and prefix-operator runs deeper than ANTLR's
/// recursive descent can safely take.
bool checkNesting(const std::vector<antlr4::Token *> &tokens,
                  const SourceText &src, DiagnosticEngine &diags) {
  unsigned depth = 0, prefixRun = 0;
  for (antlr4::Token *tok : tokens) {
    llvm::StringRef text = src.text(tok);
    bool isPrefix = text == "-" || text == "!";
    prefixRun = isPrefix ? prefixRun + 1 : 0;
    if (text == "(" || text == "[" || text == "{")
      ++depth;
    else if ((text == ")" || text == "]" || text == "}") && depth > 0)
      --depth;
    if (depth > limits::MaxNesting || prefixRun > limits::MaxNesting) {
      diags.error(
          src.loc(tok),
          llvm::Twine("program is nested too deeply (more than ") +
              llvm::Twine(limits::MaxNesting) +
              (isPrefix ? " prefix operators in a row)" : " open brackets)"));
      return false;
    }
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Parse tree to AST
//===----------------------------------------------------------------------===//

class AstBuilder {
public:
  AstBuilder(const SourceText &src, DiagnosticEngine &diags)
      : src(src), diags(diags) {}

  std::unique_ptr<ast::Program> build(CollParser::ProgramContext *ctx) {
    auto program = std::make_unique<ast::Program>();
    program->loc = src.start();
    for (CollParser::ItemContext *item : ctx->item())
      program->items.push_back(buildItem(item));
    return failed ? nullptr : std::move(program);
  }

private:
  llvm::SMLoc loc(antlr4::Token *tok) const { return src.loc(tok); }
  llvm::SMLoc loc(antlr4::tree::TerminalNode *node) const {
    return src.loc(node->getSymbol());
  }
  llvm::SMLoc loc(antlr4::ParserRuleContext *ctx) const {
    return src.loc(ctx->getStart());
  }
  std::string text(antlr4::tree::TerminalNode *node) const {
    return src.text(node->getSymbol()).str();
  }
  void error(llvm::SMLoc at, const llvm::Twine &message) {
    diags.error(at, message);
    failed = true;
  }

  template <typename Node> std::unique_ptr<Node> make(llvm::SMLoc at) {
    return std::make_unique<Node>(at);
  }

  ast::StmtPtr buildItem(CollParser::ItemContext *ctx) {
    if (auto *c = dynamic_cast<CollParser::StmtItemContext *>(ctx))
      return buildStmt(c->stmt());
    if (auto *c = dynamic_cast<CollParser::ParamItemContext *>(ctx)) {
      auto param = make<ast::ParamDecl>(loc(ctx));
      param->name = text(c->ID());
      param->nameLoc = loc(c->ID());
      param->value = buildExpr(c->expr());
      return param;
    }
    if (auto *c = dynamic_cast<CollParser::CollectiveItemContext *>(ctx)) {
      auto coll = make<ast::CollectiveDecl>(loc(ctx));
      coll->kindName = text(c->ID());
      coll->kindLoc = loc(c->ID());
      coll->args = buildArgs(c->args());
      if (CollParser::CollectiveBodyContext *body = c->collectiveBody()) {
        if (body->pre)
          coll->pre = buildBlock(body->pre);
        if (body->post)
          coll->post = buildBlock(body->post);
      }
      return coll;
    }
    if (auto *c = dynamic_cast<CollParser::OptionItemContext *>(ctx)) {
      auto option = make<ast::OptionDecl>(loc(ctx));
      for (CollParser::OptionContext *o : c->option())
        option->items.push_back({text(o->ID()), loc(o->ID()),
                                 ast::OptionKind::Name, buildExpr(o->expr())});
      return option;
    }
    auto *c = dynamic_cast<CollParser::FnItemContext *>(ctx);
    assert(c && "unhandled item alternative");
    auto fn = make<ast::FnDecl>(loc(ctx));
    std::vector<antlr4::tree::TerminalNode *> ids = c->ID();
    fn->name = text(ids.front());
    fn->nameLoc = loc(ids.front());
    for (antlr4::tree::TerminalNode *id : llvm::drop_begin(ids)) {
      fn->params.push_back(text(id));
      fn->paramLocs.push_back(loc(id));
    }
    fn->body = buildBlock(c->block());
    return fn;
  }

  ast::Block buildBlock(CollParser::BlockContext *ctx) {
    ast::Block block;
    for (CollParser::StmtContext *stmt : ctx->stmt())
      block.push_back(buildStmt(stmt));
    return block;
  }

  ast::StmtPtr buildStmt(CollParser::StmtContext *ctx) {
    if (auto *c = dynamic_cast<CollParser::ExprStmtContext *>(ctx)) {
      auto stmt = make<ast::ExprStmt>(loc(ctx));
      stmt->expr = buildExpr(c->expr());
      return stmt;
    }
    if (auto *c = dynamic_cast<CollParser::LetStmtContext *>(ctx)) {
      auto let = make<ast::LetStmt>(loc(ctx));
      let->name = text(c->ID());
      let->nameLoc = loc(c->ID());
      let->init = buildExpr(c->expr());
      return let;
    }
    if (auto *c = dynamic_cast<CollParser::AssignStmtContext *>(ctx)) {
      auto assign = make<ast::AssignStmt>(loc(ctx));
      assign->name = text(c->ID());
      assign->value = buildExpr(c->expr());
      return assign;
    }
    if (auto *c = dynamic_cast<CollParser::ForStmtContext *>(ctx)) {
      auto loop = make<ast::ForStmt>(loc(ctx));
      loop->var = text(c->ID());
      loop->varLoc = loc(c->ID());
      std::vector<CollParser::ExprContext *> exprs = c->expr();
      loop->from = buildExpr(exprs[0]);
      if (exprs.size() > 1)
        loop->to = buildExpr(exprs[1]);
      if (exprs.size() > 2)
        loop->step = buildExpr(exprs[2]);
      loop->body = buildBlock(c->block());
      return loop;
    }
    if (auto *c = dynamic_cast<CollParser::WhileStmtContext *>(ctx)) {
      auto loop = make<ast::WhileStmt>(loc(ctx));
      loop->cond = buildExpr(c->expr());
      loop->body = buildBlock(c->block());
      return loop;
    }
    if (auto *c = dynamic_cast<CollParser::IfStmtContext *>(ctx)) {
      auto stmt = make<ast::IfStmt>(loc(ctx));
      std::vector<CollParser::ExprContext *> conds = c->expr();
      std::vector<CollParser::BlockContext *> blocks = c->block();
      for (size_t i = 0; i < conds.size(); ++i)
        stmt->branches.push_back({buildExpr(conds[i]), buildBlock(blocks[i])});
      if (blocks.size() > conds.size())
        stmt->elseBody = buildBlock(blocks.back());
      return stmt;
    }
    if (auto *c = dynamic_cast<CollParser::ReturnStmtContext *>(ctx)) {
      auto ret = make<ast::ReturnStmt>(loc(ctx));
      if (c->expr())
        ret->value = buildExpr(c->expr());
      return ret;
    }
    auto *c = dynamic_cast<CollParser::ParallelizeStmtContext *>(ctx);
    assert(c && "unhandled stmt alternative");
    auto par = make<ast::ParallelizeStmt>(loc(ctx));
    par->factor = buildExpr(c->expr());
    par->body = buildBlock(c->block());
    return par;
  }

  std::vector<ast::Arg> buildArgs(CollParser::ArgsContext *ctx) {
    std::vector<ast::Arg> args;
    if (!ctx)
      return args;
    for (CollParser::ArgContext *a : ctx->arg()) {
      ast::Arg arg;
      if (a->name) {
        arg.name = src.text(a->name).str();
        arg.nameLoc = loc(a->name);
      }
      arg.value = buildExpr(a->expr());
      args.push_back(std::move(arg));
    }
    return args;
  }

  ast::ExprPtr buildExpr(CollParser::ExprContext *ctx) {
    if (depth >= limits::MaxExprDepth) {
      if (!tooDeep)
        error(loc(ctx),
              llvm::Twine("expression is nested too deeply (more than ") +
                  llvm::Twine(limits::MaxExprDepth) + " levels)");
      tooDeep = true;
      return nullptr;
    }
    ++depth;
    ast::ExprPtr result = buildExprNode(ctx);
    --depth;
    return result;
  }

  ast::ExprPtr buildExprNode(CollParser::ExprContext *ctx) {
    llvm::SMLoc at = loc(ctx);
    if (auto *c = dynamic_cast<CollParser::ParenExprContext *>(ctx))
      return buildExpr(c->expr());
    if (auto *c = dynamic_cast<CollParser::IntExprContext *>(ctx)) {
      auto lit = make<ast::IntExpr>(at);
      std::string digits = text(c->INT());
      if (llvm::StringRef(digits).getAsInteger(10, lit->value))
        error(at, "integer literal " + digits +
                      " is too large (the largest is " +
                      llvm::Twine(INT64_MAX) + ")");
      return lit;
    }
    if (auto *c = dynamic_cast<CollParser::BoolExprContext *>(ctx)) {
      auto lit = make<ast::BoolExpr>(at);
      lit->value = src.text(c->value) == "true";
      return lit;
    }
    if (auto *c = dynamic_cast<CollParser::StringExprContext *>(ctx)) {
      auto lit = make<ast::StringExpr>(at);
      lit->value = unescape(c->STRING()->getSymbol());
      return lit;
    }
    if (auto *c = dynamic_cast<CollParser::NameExprContext *>(ctx)) {
      auto name = make<ast::NameExpr>(at);
      name->name = text(c->ID());
      return name;
    }
    if (auto *c = dynamic_cast<CollParser::ListExprContext *>(ctx)) {
      auto list = make<ast::ListExpr>(at);
      for (CollParser::ExprContext *e : c->expr())
        list->elements.push_back(buildExpr(e));
      return list;
    }
    if (auto *c = dynamic_cast<CollParser::UnaryExprContext *>(ctx)) {
      auto unary = make<ast::UnaryExpr>(at);
      unary->op =
          src.text(c->op) == "-" ? ast::UnaryOp::Neg : ast::UnaryOp::Not;
      unary->operand = buildExpr(c->expr());
      return unary;
    }
    if (auto *c = dynamic_cast<CollParser::BinaryExprContext *>(ctx)) {
      auto binary = make<ast::BinaryExpr>(at);
      binary->op = llvm::StringSwitch<ast::BinaryOp>(src.text(c->op))
                       .Case("*", ast::BinaryOp::Mul)
                       .Case("/", ast::BinaryOp::Div)
                       .Case("%", ast::BinaryOp::Mod)
                       .Case("+", ast::BinaryOp::Add)
                       .Case("-", ast::BinaryOp::Sub)
                       .Case("<", ast::BinaryOp::Lt)
                       .Case("<=", ast::BinaryOp::Le)
                       .Case(">", ast::BinaryOp::Gt)
                       .Case(">=", ast::BinaryOp::Ge)
                       .Case("==", ast::BinaryOp::Eq)
                       .Case("!=", ast::BinaryOp::Ne)
                       .Case("&&", ast::BinaryOp::And)
                       .Case("||", ast::BinaryOp::Or);
      binary->opLoc = loc(c->op);
      binary->lhs = buildExpr(c->expr(0));
      binary->rhs = buildExpr(c->expr(1));
      return binary;
    }
    if (auto *c = dynamic_cast<CollParser::CondExprContext *>(ctx)) {
      auto cond = make<ast::CondExpr>(at);
      cond->cond = buildExpr(c->expr(0));
      cond->then = buildExpr(c->expr(1));
      cond->otherwise = buildExpr(c->expr(2));
      return cond;
    }
    if (auto *c = dynamic_cast<CollParser::IndexExprContext *>(ctx)) {
      auto index = make<ast::IndexExpr>(at);
      index->base = buildExpr(c->expr(0));
      index->index = buildExpr(c->expr(1));
      return index;
    }
    if (auto *c = dynamic_cast<CollParser::CallExprContext *>(ctx)) {
      auto call = make<ast::CallExpr>(at);
      call->callee = text(c->ID());
      call->args = buildArgs(c->args());
      return call;
    }
    if (auto *c = dynamic_cast<CollParser::MethodExprContext *>(ctx)) {
      auto method = make<ast::MethodExpr>(at);
      method->receiver = buildExpr(c->expr());
      method->name = text(c->ID());
      method->nameLoc = loc(c->ID());
      method->args = buildArgs(c->args());
      return method;
    }
    auto *c = dynamic_cast<CollParser::MemberExprContext *>(ctx);
    assert(c && "unhandled expr alternative");
    auto member = make<ast::MemberExpr>(at);
    member->receiver = buildExpr(c->expr());
    member->name = text(c->ID());
    member->nameLoc = loc(c->ID());
    return member;
  }

  /// The value of a string literal; the lexer admitted any escaped
  /// character, only these four mean something.
  std::string unescape(antlr4::Token *tok) {
    llvm::StringRef quoted = src.text(tok);
    std::string value;
    for (size_t i = 1; i + 1 < quoted.size(); ++i) {
      if (quoted[i] != '\\') {
        value += quoted[i];
        continue;
      }
      char c = quoted[++i];
      switch (c) {
      case '"': value += '"'; break;
      case '\\': value += '\\'; break;
      case 'n': value += '\n'; break;
      case 't': value += '\t'; break;
      default:
        error(llvm::SMLoc::getFromPointer(quoted.data() + i - 1),
              llvm::Twine("unknown escape sequence '\\") + llvm::Twine(c) +
                  "' in string (use \\\", \\\\, \\n or \\t)");
      }
    }
    return value;
  }

  const SourceText &src;
  DiagnosticEngine &diags;
  unsigned depth = 0;
  bool tooDeep = false;
  bool failed = false;
};

std::unique_ptr<ast::Program> parseSyntax(llvm::StringRef buffer,
                                          DiagnosticEngine &diags) {
  SourceText src(buffer);
  SyntaxErrorListener listener(src, diags);
  ByteStream input(buffer);
  CollLexer lexer(&input);
  lexer.removeErrorListeners();
  lexer.addErrorListener(&listener);
  antlr4::CommonTokenStream tokens(&lexer);
  tokens.fill();
  if (!checkNesting(tokens.getTokens(), src, diags))
    return nullptr;
  // Two stages, as ANTLR advises: SLL prediction, which ignores the
  // caller's context and so is cheap and cached, returns the tree LL would
  // or stops at the first error; only then does full LL prediction parse
  // again, and report. Every runtime rank parses the built-in programs at
  // communicator creation, where LL's full-context predictions cost most of
  // the time.
  CollParser fast(&tokens);
  fast.removeErrorListeners();
  fast.getInterpreter<antlr4::atn::ParserATNSimulator>()->setPredictionMode(
      antlr4::atn::PredictionMode::SLL);
  fast.setErrorHandler(std::make_shared<antlr4::BailErrorStrategy>());
  CollParser::ProgramContext *tree = nullptr;
  try {
    tree = fast.program();
  } catch (const antlr4::ParseCancellationException &) {
    tree = nullptr;
  }
  if (tree) // the lexer reports to the listener: a bad token may parse
    return listener.failed() ? nullptr : AstBuilder(src, diags).build(tree);
  tokens.seek(0);
  CollParser parser(&tokens);
  parser.removeErrorListeners();
  parser.addErrorListener(&listener);
  tree = parser.program();
  if (listener.failed())
    return nullptr;
  return AstBuilder(src, diags).build(tree);
}

} // namespace

std::unique_ptr<ast::Program>
coll::lang::parseProgram(unsigned bufferId, DiagnosticEngine &diags) {
  llvm::StringRef buffer =
      diags.sourceMgr().getMemoryBuffer(bufferId)->getBuffer();
  std::unique_ptr<ast::Program> program;
  // ANTLR reports syntax errors through the listener; anything it throws is
  // a failure of the runtime itself, which must not escape this library.
  try {
    program = parseSyntax(buffer, diags);
  } catch (const std::exception &e) {
    diags.error(SourceText(buffer).start(),
                llvm::Twine("internal parser error: ") + e.what());
    return nullptr;
  }
  if (!program || !checkProgram(*program, diags))
    return nullptr;
  return program;
}
