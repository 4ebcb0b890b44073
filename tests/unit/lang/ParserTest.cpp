//===- ParserTest.cpp - Lexer, parser and AST -----------------------------===//

#include "LangTest.h"

using namespace coll::lang;
using namespace coll::lang::test;

namespace {

/// The AST dump of a program that parses, or its diagnostics.
std::string ast(llvm::StringRef source) {
  Session s(source);
  std::unique_ptr<ast::Program> program = parseProgram(s.bufferId, s.diags);
  if (!program)
    return s.text();
  std::string text;
  llvm::raw_string_ostream os(text);
  dumpAst(*program, s.srcMgr, os);
  return os.str();
}

/// The dump of the expression `e`, without locations and without the
/// program around it.
std::string expr(llvm::StringRef e) {
  std::string dump =
      ast("collective allreduce(ranks = 1)\nlet x = " + e.str() + "\n");
  std::string result;
  llvm::StringRef rest(dump);
  bool inLet = false;
  while (!rest.empty()) {
    auto [line, tail] = rest.split('\n');
    rest = tail;
    if (line.startswith("  Let x"))
      inLet = true;
    else if (inLet)
      result += line.drop_front(4).rsplit(" @").first.str() + "\n";
  }
  return result.empty() ? dump : result;
}

TEST(ParserTest, DumpsEveryStatement) {
  EXPECT_EQ(
      ast("param N = 2\n"
          "collective allreduce(ranks = N, inplace = true)\n"
          "option protocol = LL, name = \"x\"\n"
          "fn f(a, b) { return a + b }\n"
          "let xs = [1, f(2, 3)]\n"
          "for i in 0..N step 1 { xs = xs + [i] }\n"
          "while false { }\n"
          "if len(xs) > 2 { } else if true { } else { assert(false) }\n"
          "parallelize(2) { chunk(0, input, 0).copy(1, output, 0, ch = 1) }\n"),
      R"(Program
  Param N @1:1
    Int 2 @1:11
  Collective allreduce @2:1
    Named ranks @2:22
      Name N @2:30
    Named inplace @2:33
      Bool true @2:43
  Option protocol @3:8
    Name LL @3:19
  Option name @3:23
    String "x" @3:30
  Fn f(a, b) @4:1
    Body
      Return @4:14
        Binary + @4:21
          Name a @4:21
          Name b @4:25
  Let xs @5:1
    List @5:10
      Int 1 @5:11
      Call f @5:14
        Int 2 @5:16
        Int 3 @5:19
  For i @6:1
    Range
      Int 0 @6:10
      Name N @6:13
      Int 1 @6:20
    Body
      Assign xs @6:24
        Binary + @6:29
          Name xs @6:29
          List @6:34
            Name i @6:35
  While @7:1
    Bool false @7:7
    Body
  If @8:1
    Cond
      Binary > @8:4
        Call len @8:4
          Name xs @8:8
        Int 2 @8:14
    Then
    Cond
      Bool true @8:28
    Then
    Else
      Call assert @8:44
        Bool false @8:51
  Parallelize @9:1
    Int 2 @9:13
    Body
      Method copy @9:37
        Call chunk @9:18
          Int 0 @9:24
          Name input @9:27
          Int 0 @9:34
        Int 1 @9:42
        Name output @9:45
        Int 0 @9:53
        Named ch @9:56
          Int 1 @9:61
)");
}

TEST(ParserTest, Precedence) {
  EXPECT_EQ(expr("1 + 2 * 3"),
            "Binary +\n  Int 1\n  Binary *\n    Int 2\n    Int 3\n");
  EXPECT_EQ(expr("(1 + 2) * 3"),
            "Binary *\n  Binary +\n    Int 1\n    Int 2\n  Int 3\n");
  EXPECT_EQ(expr("1 - 2 - 3"),
            "Binary -\n  Binary -\n    Int 1\n    Int 2\n  Int 3\n");
  EXPECT_EQ(expr("-1 % 3"), "Binary %\n  Unary -\n    Int 1\n  Int 3\n");
  EXPECT_EQ(expr("1 < 2 == true"),
            "Binary ==\n  Binary <\n    Int 1\n    Int 2\n  Bool true\n");
  EXPECT_EQ(expr("true || false && !true"),
            "Binary ||\n  Bool true\n  Binary &&\n    Bool false\n    Unary "
            "!\n      Bool true\n");
  EXPECT_EQ(expr("-[1][0]"),
            "Unary -\n  Index\n    List\n      Int 1\n    Int 0\n");
}

TEST(ParserTest, CommentsStringsAndNonAscii) {
  EXPECT_EQ(expr("/* caf\xc3\xa9 */ \"a\\\"b\\\\c\\n\xc3\xa9\" // tail"),
            "String \"a\\\"b\\\\c\\n\xc3\xa9\"\n");
  // Columns count bytes: the two-byte character shifts `let` to column 42.
  EXPECT_NE(ast("collective allreduce(ranks = 1) /* \xc3\xa9 */ let x = 1\n")
                .find("Let x @1:42"),
            std::string::npos);
}

TEST(ParserTest, StatementsNeedNoSeparator) {
  EXPECT_NE(
      ast("collective allreduce(ranks = 1) let a = 1 let b = a assert(b == 1)")
          .find("Call assert"),
      std::string::npos);
}

TEST(ParserTest, SyntaxErrors) {
  auto first = [](llvm::StringRef source) { return firstLine(ast(source)); };
  EXPECT_EQ(first("collective allreduce(ranks = 4 chunks = 4)"),
            "test.coll:1:32: error: unexpected 'chunks'; expected ')'");
  EXPECT_EQ(
      first("let x = "),
      "test.coll:1:9: error: unexpected end of file; expected an expression");
  EXPECT_EQ(first("for i in 0..4 {\n"), "test.coll:2:1: error: unexpected end "
                                        "of file; expected a statement or '}'");
  EXPECT_EQ(first("let = 3"),
            "test.coll:1:5: error: unexpected '='; expected an identifier");
  EXPECT_EQ(first("let x = 3 +* 4"),
            "test.coll:1:12: error: unexpected '*'; expected an expression");
  EXPECT_EQ(first("}"), "test.coll:1:1: error: unexpected '}'; expected a "
                        "declaration or statement or end of file");
  EXPECT_EQ(first("let x = $"),
            "test.coll:1:9: error: unexpected character '$'");
  EXPECT_EQ(
      first("let x = \xc3\xa9"),
      "test.coll:1:9: error: unexpected byte 0xC3 (non-ASCII text may only "
      "appear in comments and strings)");
  EXPECT_EQ(first("let s = \"abc\n"),
            "test.coll:1:9: error: unterminated string literal");
  EXPECT_EQ(first("/* abc"), "test.coll:1:1: error: unterminated /* comment");
  EXPECT_EQ(first("let s = \"a\\qb\""),
            "test.coll:1:11: error: unknown escape sequence '\\q' in string "
            "(use \\\", \\\\, \\n or \\t)");
  EXPECT_EQ(
      first("let n = 9223372036854775808"),
      "test.coll:1:9: error: integer literal 9223372036854775808 is too large "
      "(the largest is 9223372036854775807)");
  // Only the first syntax error is reported.
  EXPECT_EQ(ast("let = 1\nlet = 2\n").find("2:"), std::string::npos);
  // Declarations only at the top level.
  EXPECT_EQ(
      first("fn f() { param N = 1 }"),
      "test.coll:1:10: error: unexpected 'param'; expected a statement or '}'");
  // A reserved word where only a name fits.
  EXPECT_EQ(first("fn f(a, in) { }"),
            "test.coll:1:9: error: 'in' is a reserved word and cannot be used "
            "as a name");
  EXPECT_EQ(first("for step in 0..2 { }"),
            "test.coll:1:5: error: 'step' is a reserved word and cannot be "
            "used as a name");
}

TEST(ParserTest, NestingLimits) {
  std::string parens =
      "let x = " + std::string(101, '(') + "1" + std::string(101, ')');
  EXPECT_EQ(firstLine(ast(parens)), "test.coll:1:109: error: program is nested "
                                    "too deeply (more than 100 open brackets)");
  std::string negations = "let x = " + std::string(101, '-') + "1";
  EXPECT_EQ(firstLine(ast(negations)),
            "test.coll:1:109: error: program is nested too deeply (more than "
            "100 prefix "
            "operators in a row)");
  std::string sum = "let x = 1";
  for (int i = 0; i < 300; ++i)
    sum += " + 1";
  EXPECT_EQ(firstLine(ast(sum)), "test.coll:1:9: error: expression is nested "
                                 "too deeply (more than 256 levels)");
}

} // namespace
