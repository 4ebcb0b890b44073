//===- SemaTest.cpp - Name resolution and static checks -------------------===//

#include "LangTest.h"

using namespace coll::lang;
using namespace coll::lang::test;

namespace {

/// The first diagnostic of `body` placed after a valid collective on line 1.
std::string check(llvm::StringRef body) { return run(body); }

TEST(SemaTest, Names) {
  EXPECT_EQ(check("let x = y"), "test.coll:2:9: error: unknown name 'y'");
  EXPECT_EQ(check("f(1)"), "test.coll:2:1: error: unknown function 'f'");
  EXPECT_EQ(check("let x = 1\nx(1)"),
            "test.coll:3:1: error: 'x' is not a function");
  EXPECT_EQ(check("fn f() { return 1 }\nlet x = f"),
            "test.coll:3:9: error: 'f' is a function; call it as f(...)");
  EXPECT_EQ(check("y = 1"), "test.coll:2:1: error: unknown variable 'y'");
  // A name is visible from its declaration to the end of its block.
  EXPECT_EQ(check("if true { let x = 1 }\nlet y = x"),
            "test.coll:3:9: error: unknown name 'x'");
  EXPECT_EQ(check("let x = x"), "test.coll:2:9: error: unknown name 'x'");
  EXPECT_EQ(
      check("let x = 1\nif true { let x = 2 assert(x == 2) }\nassert(x == 1)"),
      "");
}

TEST(SemaTest, Declarations) {
  std::string diags = trace("collective allreduce(ranks = 1, inplace = true)\n"
                            "let x = 1\nlet x = 2\n")
                          .diags;
  EXPECT_EQ(diags,
            "test.coll:3:5: error: 'x' is already declared in this scope\n"
            "let x = 2\n"
            "    ^\n"
            "test.coll:2:5: note: the previous declaration is here\n"
            "let x = 1\n"
            "    ^\n");
  EXPECT_EQ(check("let input = 1"), "test.coll:2:5: error: 'input' is a "
                                    "built-in name and cannot be redeclared");
  EXPECT_EQ(check("fn chunk() { }"), "test.coll:2:4: error: 'chunk' is a "
                                     "built-in name and cannot be redefined");
  EXPECT_EQ(check("fn f() { }\nfn f() { }"),
            "test.coll:3:4: error: function 'f' is defined twice");
  EXPECT_EQ(check("fn f() { }\nlet f = 1"),
            "test.coll:3:5: error: 'f' is already the name of a function");
  EXPECT_EQ(check("fn f(a, a) { }"),
            "test.coll:2:9: error: 'a' is already declared in this scope");
  EXPECT_EQ(check("param N = 1\nparam N = 2"),
            "test.coll:3:7: error: 'N' is already declared in this scope");
}

TEST(SemaTest, Assignments) {
  std::string diags = trace("param N = 4\ncollective allreduce(ranks = N, "
                            "inplace = true)\nN = 5\n")
                          .diags;
  EXPECT_EQ(firstLine(diags), "test.coll:3:1: error: cannot assign to "
                              "parameter 'N': parameters are constants");
  EXPECT_NE(diags.find("test.coll:1:7: note: 'N' is declared here"),
            std::string::npos);
  EXPECT_EQ(check("for i in 0..2 { i = 3 }"),
            "test.coll:2:17: error: cannot assign to loop variable 'i'");
  EXPECT_EQ(check("fn f(a) { a = a + 1 return a }\nassert(f(1) == 2)"), "");
}

TEST(SemaTest, Functions) {
  // Called before its definition; sees parameters declared anywhere.
  EXPECT_EQ(
      check("param K = 2\nassert(twice(3) == 6)\nfn twice(x) { return x * K }"),
      "");
  // Does not see top-level variables.
  // Top-level lets are readable from functions, not assignable; lets in
  // blocks are not visible.
  EXPECT_EQ(check("let g = 1\nfn f() { return g }"), "");
  EXPECT_EQ(check("if true { let g = 1 }\nfn f() { return g }"),
            "test.coll:3:17: error: unknown name 'g'");
  EXPECT_EQ(check("let g = 1\nfn f() { g = 2 }").rfind(
                "test.coll:3:10: error: a function cannot assign to top-level "
                "variable 'g'",
                0),
            0u);
  EXPECT_EQ(check("fn f(a) { }\nf()"),
            "test.coll:3:1: error: function 'f' takes 1 argument, got 0");
  EXPECT_EQ(check("fn f(a) { }\nf(a = 1)"),
            "test.coll:3:3: error: function 'f' takes no named arguments");
  EXPECT_EQ(check("return 1"),
            "test.coll:2:1: error: 'return' outside a function");
}

TEST(SemaTest, Statements) {
  EXPECT_EQ(check("1 + 2"), "test.coll:2:1: error: this expression has no "
                            "effect (only calls can be statements)");
  EXPECT_EQ(check("let x = 1\nx == 2"),
            "test.coll:3:1: error: this expression has no effect (only calls "
            "can be statements)");
}

TEST(SemaTest, BuiltinArguments) {
  EXPECT_EQ(check("chunk(0, input)"), "test.coll:2:1: error: 'chunk' takes 3 "
                                      "arguments (rank, buffer, index), got 2");
  EXPECT_EQ(check("assert()"), "test.coll:2:1: error: 'assert' takes 1 or 2 "
                               "arguments (condition, message), got 0");
  EXPECT_EQ(check("chunk(0, input, 0, sz = 2)"),
            "test.coll:2:20: error: 'chunk' has no argument named 'sz' (it "
            "takes size)");
  EXPECT_EQ(check("len([], x = 1)"),
            "test.coll:2:9: error: 'len' has no argument named 'x' (it takes "
            "no named arguments)");
  EXPECT_EQ(check("chunk(0, input, size = 1, 0)"),
            "test.coll:2:27: error: positional argument after a named one");
  EXPECT_EQ(check("chunk(0, input, 0, size = 1, size = 2)"),
            "test.coll:2:30: error: argument 'size' is given twice");
  EXPECT_EQ(check("chunk(0, input, 0).copy(1, output, 0, chan = 1)"),
            "test.coll:2:39: error: 'copy' has no argument named 'chan' (it "
            "takes ch, sendtb or recvtb)");
  EXPECT_EQ(check("chunk(0, input, 0).send(1, output, 0)"),
            "test.coll:2:20: error: unknown method 'send' (chunk references "
            "have copy, reduce, split and group)");
  EXPECT_EQ(check("let r = chunk(0, input, 0).copy"),
            "test.coll:2:28: error: 'copy' is a method; call it as .copy(...)");
  EXPECT_EQ(check("let r = chunk(0, input, 0).owner"),
            "test.coll:2:28: error: unknown property 'owner' (chunk references "
            "have rank, index, "
            "size, origin_rank, origin_index, dest_rank and dest_index)");
}

TEST(SemaTest, Collectives) {
  auto first = [](llvm::StringRef source) {
    return firstLine(trace(source).diags);
  };
  EXPECT_EQ(
      first("let x = 1"),
      "test.coll:1:1: error: the program declares no collective (add, e.g., "
      "`collective allreduce(ranks = 8)`)");
  EXPECT_EQ(
      first("collective allreduce(ranks = 1)\ncollective allgather(ranks = 1)"),
      "test.coll:2:1: error: the collective is declared twice");
  EXPECT_EQ(
      first("collective allsum(ranks = 1)"),
      "test.coll:1:12: error: unknown collective 'allsum' (expected allreduce, "
      "allgather, "
      "reducescatter, alltoall, broadcast, reduce, gather, scatter or custom)");
  EXPECT_EQ(first("collective allreduce(4)"),
            "test.coll:1:22: error: collective arguments must be named, as in "
            "`ranks = 8`");
  EXPECT_EQ(first("collective allreduce(ranks = 4, root = 0)"),
            "test.coll:1:33: error: collective allreduce has no argument "
            "'root' (it takes ranks, "
            "chunks and inplace)");
  EXPECT_EQ(first("collective broadcast(ranks = 4, ranks = 4)"),
            "test.coll:1:33: error: argument 'ranks' is given twice");
  EXPECT_EQ(first("collective allreduce(chunks = 4)"),
            "test.coll:1:12: error: collective allreduce needs `ranks = ...`");
  EXPECT_EQ(first("collective custom(ranks = 4, input = 1) { post { } }"),
            "test.coll:1:12: error: collective custom needs `output = ...`");
  EXPECT_EQ(first("collective allreduce(ranks = 4) { post { } }"),
            "test.coll:1:12: error: only a custom collective has pre and post "
            "blocks");
  EXPECT_EQ(first("collective custom(ranks = 4, input = 1, output = 1)"),
            "test.coll:1:12: error: a custom collective needs a `post { ... }` "
            "block stating "
            "its postcondition");
  EXPECT_EQ(
      first("collective custom(ranks = 1, input = 1, output = 1) { post { } }\n"
            "collective allreduce(ranks = 1)"),
      "test.coll:2:1: error: the collective is declared twice");
}

TEST(SemaTest, Options) {
  EXPECT_EQ(check("option protocol = LL128, fusion = false, name = \"n\", "
                  "instances = 2, "
                  "threadblocks = manual, min_bytes = 1, max_bytes = 2"),
            "");
  EXPECT_EQ(check("option speed = 3"),
            "test.coll:2:8: error: unknown option 'speed' (options are "
            "protocol, instances, "
            "threadblocks, fusion, name, min_bytes and max_bytes)");
  EXPECT_EQ(check("option protocol = Fast"),
            "test.coll:2:19: error: protocol must be Simple, LL or LL128");
  EXPECT_EQ(check("option threadblocks = 3"),
            "test.coll:2:23: error: threadblocks must be auto or manual");
  EXPECT_EQ(check("option instances = 1\noption instances = 2"),
            "test.coll:3:8: error: option 'instances' is set twice");
}

} // namespace
