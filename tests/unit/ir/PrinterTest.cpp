//===- PrinterTest.cpp - The text listing ---------------------------------===//

#include "IRTestUtil.h"

#include "coll/ir/Printer.h"

namespace coll::ir {
namespace {

TEST(PrinterTest, ExactText) {
  Algorithm alg = test::parseValid(
      R"(<algo name="r" proto="LL" nchannels="1" nchunksperloop="2" ngpus="2" coll="reduce" inplace="0" maxBytes="64" root="1">
<gpu id="0" i_chunks="2" o_chunks="0" s_chunks="1">
<tb id="0" send="1" recv="-1" chan="0">
<step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="0"/>
</tb>
</gpu>
<gpu id="1" i_chunks="2" o_chunks="2" s_chunks="0">
<tb id="0" send="-1" recv="0" chan="0">
<step s="0" type="rrc" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="1"/>
<step s="1" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="0" deps="0" hasdep="0"/>
<step s="2" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="-1" deps="-1" hasdep="0"/>
<step s="3" type="cpy" srcbuf="o" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="0" deps="0" hasdep="1"/>
</tb>
</gpu>
</algo>)");
  std::string text;
  llvm::raw_string_ostream os(text);
  printAlgorithm(alg, os);
  EXPECT_EQ(
      os.str(),
      R"(algo name="r" proto=LL nchannels=1 nchunksperloop=2 ngpus=2 coll=reduce inplace=0 outofplace=1 minBytes=0 maxBytes=64 root=1
gpu 0: i_chunks=2 o_chunks=0 s_chunks=1
  tb 0: send=1 recv=-1 chan=0
    0: s     src=i[0+2] dst=s[0+2]
gpu 1: i_chunks=2 o_chunks=2 s_chunks=0
  tb 0: send=-1 recv=0 chan=0
    0: rrc   src=i[0+2] dst=o[0+2] hasdep
    1: nop   dep=(tb 0, step 0)
    2: nop
    3: cpy   src=o[0+1] dst=o[1+1] dep=(tb 0, step 0) hasdep
)");
}

} // namespace
} // namespace coll::ir
