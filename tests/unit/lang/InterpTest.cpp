//===- InterpTest.cpp - Evaluation of the language ------------------------===//
//
// Programs check their own results with assert(); run() returns "" when
// every assertion held, or the first diagnostic.
//
//===----------------------------------------------------------------------===//

#include "LangTest.h"

using namespace coll;
using namespace coll::lang;
using namespace coll::lang::test;

namespace {

TEST(InterpTest, Arithmetic) {
  EXPECT_EQ(run("assert(1 + 2 * 3 == 7)\nassert((1 + 2) * 3 == 9)\nassert(-4 + "
                "1 == -3)"),
            "");
  EXPECT_EQ(run("assert(7 / 2 == 3)\nassert(7 % 2 == 1)"), "");
  // Floor division; the remainder has the divisor's sign.
  EXPECT_EQ(
      run("assert(-7 / 2 == -4)\nassert(-7 % 2 == 1)\n"
          "assert(7 / -2 == -4)\nassert(7 % -2 == -1)\nassert(-1 % 8 == 7)"),
      "");
  EXPECT_EQ(run("let x = 1 / 0"), "test.coll:2:11: error: division by zero");
  EXPECT_EQ(run("let x = 1 % 0"), "test.coll:2:11: error: modulo by zero");
  EXPECT_EQ(run("let x = 9223372036854775807 + 1"),
            "test.coll:2:29: error: integer overflow: 9223372036854775807 + 1");
  EXPECT_EQ(
      run("let x = -9223372036854775807 - 2"),
      "test.coll:2:30: error: integer overflow: -9223372036854775807 - 2");
  EXPECT_EQ(run("let x = 4294967296 * 4294967296"),
            "test.coll:2:20: error: integer overflow: 4294967296 * 4294967296");
  EXPECT_EQ(
      run("let m = -9223372036854775807 - 1\nlet x = m / -1"),
      "test.coll:3:11: error: integer overflow: -9223372036854775808 / -1");
  EXPECT_EQ(run("let m = -9223372036854775807 - 1\nlet x = -m"),
            "test.coll:3:9: error: integer overflow: -(-9223372036854775808)");
}

TEST(InterpTest, ComparisonsAndLogic) {
  EXPECT_EQ(
      run("assert(1 < 2 && 2 <= 2 && 3 > 2 && 3 >= 3 && 1 != 2 && !(1 == 2))"),
      "");
  EXPECT_EQ(run("assert(true == true && \"a\" == \"a\" && \"a\" != \"b\")"),
            "");
  // Short-circuit: the right side is not evaluated.
  EXPECT_EQ(run("assert(false && 1 / 0 == 1 || true || 1 / 0 == 1)"), "");
  EXPECT_EQ(run("let b = 1 == true"),
            "test.coll:2:11: error: '==' cannot compare an integer with a "
            "boolean (it "
            "compares integers, booleans or strings)");
  EXPECT_EQ(run("let b = 1 && true"),
            "test.coll:2:9: error: expected a boolean, got an integer");
  EXPECT_EQ(run("let b = true < false"),
            "test.coll:2:14: error: '<' needs two integers, got a boolean and "
            "a boolean");
  EXPECT_EQ(run("if 1 { }"),
            "test.coll:2:4: error: expected a boolean, got an integer");
}

TEST(InterpTest, Lists) {
  EXPECT_EQ(
      run("let xs = [1, 2] + [3]\nassert(len(xs) == 3 && xs[2] == 3 && len([]) "
          "== 0)\n"
          "let ys = xs\nys = ys + [4]\nassert(len(xs) == 3 && len(ys) == 4)"),
      "");
  EXPECT_EQ(run("let xs = [[1, 2], [3]]\nassert(xs[0][1] == 2)"), "");
  EXPECT_EQ(run("let x = [1][1]"), "test.coll:2:13: error: index 1 is out of "
                                   "range (the list has 1 elements)");
  EXPECT_EQ(run("let x = [1] + 1"),
            "test.coll:2:13: error: '+' needs two integers, two lists or a "
            "string, got a list and an integer");
  // Strings concatenate, with integers written in decimal.
  EXPECT_EQ(run("assert(\"s\" + 1 + 2 == \"s12\", \"concat\")"), "");
  EXPECT_EQ(run("let x = \"s\" + true"),
            "test.coll:2:13: error: '+' needs two integers, two lists or a "
            "string, got a string and a boolean");
  EXPECT_EQ(run("let x = len(3)"),
            "test.coll:2:13: error: expected a list, got an integer");
}

TEST(InterpTest, Loops) {
  EXPECT_EQ(run("let s = 0\nfor i in 0..5 { s = s + i }\nassert(s == 10)"), "");
  EXPECT_EQ(
      run("let s = 0\nfor i in 0..10 step 3 { s = s + i }\nassert(s == 18)"),
      "");
  EXPECT_EQ(run("let s = []\nfor i in 3..-1 step -1 { s = s + [i] }\n"
                "assert(len(s) == 4 && s[0] == 3 && s[3] == 0)"),
            "");
  EXPECT_EQ(run("let n = 0\nfor i in 5..5 { n = n + 1 }\nfor i in 5..0 { n = n "
                "+ 1 }\n"
                "assert(n == 0)"),
            "");
  EXPECT_EQ(run("for i in 0..2 step 0 { }"),
            "test.coll:2:20: error: the step of a for loop must not be 0");
  // The bounds are evaluated once; the end of int64 does not overflow.
  EXPECT_EQ(run("let n = 0\nfor i in 9223372036854775806..9223372036854775807 "
                "step 5 { n = n + 1 }\n"
                "assert(n == 1)"),
            "");
  EXPECT_EQ(run("let i = 0\nwhile i < 10 { i = i + 1 }\nassert(i == 10)"), "");
  EXPECT_EQ(run("let s = 0\nfor x in [1, 2, 3] { s = s + x }\nassert(s == 6)"),
            "");
  EXPECT_EQ(run("for x in 3 { }"),
            "test.coll:2:10: error: expected a list, got an integer");
}

TEST(InterpTest, Conditionals) {
  EXPECT_EQ(run("fn sign(x) { if x < 0 { return -1 } else if x == 0 { return 0 "
                "} else { "
                "return 1 } }\nassert(sign(-5) == -1 && sign(0) == 0 && "
                "sign(3) == 1)"),
            "");
  // The conditional expression evaluates one branch only, binds loosest
  // and nests in its else branch.
  EXPECT_EQ(run("fn sign(x) { return if x < 0 then -1 else if x == 0 then 0 "
                "else 1 }\nassert(sign(-5) == -1 && sign(0) == 0 && "
                "sign(3) == 1)"),
            "");
  EXPECT_EQ(run("assert((if true then 1 else 1 / 0) + 1 == 2)"), "");
  EXPECT_EQ(run("assert(if false then false else 1 + 1 == 2)"), "");
  EXPECT_EQ(run("let x = if 1 then 2 else 3"),
            "test.coll:2:12: error: expected a boolean, got an integer");
}

TEST(InterpTest, Functions) {
  EXPECT_EQ(run("fn fact(n) { if n <= 1 { return 1 } return n * fact(n - 1) }\n"
                "assert(fact(10) == 3628800)"),
            "");
  EXPECT_EQ(run("fn f(n) { return f(n + 1) }\nlet x = f(0)"),
            "test.coll:2:18: error: recursion is too deep (more than 200 "
            "nested calls)");
  EXPECT_EQ(run("fn f() { }\nlet x = f()"),
            "test.coll:3:9: error: function 'f' returns no value");
  EXPECT_EQ(run("fn f() { return }\nf()"), "");
  EXPECT_EQ(run("let x = assert(true)"),
            "test.coll:2:9: error: 'assert' returns no value");
  // Arguments are values: a list passed in is not changed by the callee.
  EXPECT_EQ(run("fn f(xs) { xs = xs + [1] return len(xs) }\nlet a = [0]\n"
                "assert(f(a) == 2 && len(a) == 1)"),
            "");
}

TEST(InterpTest, Params) {
  const char *program =
      "param N = 4\nparam Flag = false\n"
      "collective custom(ranks = N, input = 1, output = 1) { post { } }\n"
      "assert(N == 8 && Flag)\n";
  Overrides overrides;
  overrides.params["N"] = int64_t(8);
  overrides.params["Flag"] = true;
  traceOk(program, overrides);
  EXPECT_EQ(traceOk(program, overrides).collective.nranks, 8);

  overrides.params["Flag"] = int64_t(1);
  EXPECT_EQ(firstLine(traceError(program, overrides)),
            "test.coll:2:7: error: -D Flag gives an integer but parameter "
            "'Flag' is a boolean");
  Overrides unknown;
  unknown.params["M"] = int64_t(1);
  EXPECT_EQ(traceError(program, unknown),
            "test: error: -D M: the program has no parameter named 'M'\n");
  // A function may read a parameter only once its declaration has run.
  EXPECT_EQ(run("fn f() { return P }\nlet x = f()\nparam P = 1"),
            "test.coll:2:17: error: 'P' is used before its declaration is "
            "evaluated (a function that reads it ran before the "
            "declaration)");
}

TEST(InterpTest, Assert) {
  EXPECT_EQ(run("assert(1 == 2)"), "test.coll:2:1: error: assertion failed");
  EXPECT_EQ(run("assert(false, \"N must be even\")"),
            "test.coll:2:1: error: assertion failed: N must be even");
}

TEST(InterpTest, RunawayPrograms) {
  EXPECT_EQ(
      run("while true { }"),
      "test.coll:2:7: error: the program runs too long (more than 50000000 "
      "evaluation steps); does a loop never end?");
  EXPECT_EQ(
      run("for i in 0..9223372036854775807 { }"),
      "test.coll:2:1: error: the program runs too long (more than 50000000 "
      "evaluation steps); does a loop never end?");
  // A tool may give a smaller budget (the fuzzer does).
  Overrides small;
  small.maxSteps = 1000;
  EXPECT_EQ(firstLine(trace("collective allreduce(ranks = 1, inplace = "
                            "true)\nwhile true { }\n",
                            small)
                          .diags),
            "test.coll:2:7: error: the program runs too long (more than 1000 "
            "evaluation steps); does a loop never end?");
  // Recursion inside deeply nested blocks exhausts the nesting budget before
  // the call limit, with an error rather than a stack overflow.
  std::string nested = "fn g(n) {\n";
  for (int i = 0; i < 90; ++i)
    nested += "if true {\n";
  nested += "if n == 0 { return 0 }\nreturn g(n - 1) + 1\n";
  for (int i = 0; i < 90; ++i)
    nested += "}\n";
  nested += "}\nassert(g(150) == 150)";
  EXPECT_NE(run(nested).find(
                "error: evaluation is nested too deeply (recursive calls "
                "inside deeply nested code)"),
            std::string::npos);
}

TEST(InterpTest, Options) {
  ChunkDag dag =
      traceOk("collective allreduce(ranks = 1, inplace = true)\n"
              "option protocol = LL128, fusion = false, name = \"ring\"\n"
              "option instances = 1 + 1, threadblocks = manual\n"
              "option min_bytes = 1024, max_bytes = 1024 * 1024\n");
  EXPECT_EQ(dag.options.protocol, ir::Protocol::LL128);
  EXPECT_FALSE(dag.options.fusion);
  EXPECT_EQ(dag.options.name, "ring");
  EXPECT_EQ(dag.options.instances, 2);
  EXPECT_TRUE(dag.options.manualThreadblocks);
  EXPECT_EQ(dag.options.minBytes, 1024u);
  // The name becomes an XML attribute: no control characters (found by
  // CollFuzzer, a NUL byte inside the string literal).
  EXPECT_EQ(run(std::string("option name = \"ab\0c\"", 20)),
            "test.coll:2:15: error: the algorithm name may not contain "
            "control characters (byte 0x00 at offset 2)");
  EXPECT_EQ(run("option name = \"a\\tb\""),
            "test.coll:2:15: error: the algorithm name may not contain "
            "control characters (byte 0x09 at offset 1)");

  EXPECT_EQ(run("option instances = 0"),
            "test.coll:2:20: error: instances must be between 1 and "
            "2147483647, got 0");
  EXPECT_EQ(run("option name = 3"),
            "test.coll:2:15: error: expected a string, got an integer");
  EXPECT_EQ(run("option min_bytes = -1"),
            "test.coll:2:20: error: min_bytes must not be negative, got -1");
  EXPECT_EQ(
      run("option max_bytes = 10, min_bytes = 20"),
      "test.coll:2:36: error: min_bytes (20) is larger than max_bytes (10)");
}

} // namespace
