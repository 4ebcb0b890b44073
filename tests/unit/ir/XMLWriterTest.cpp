//===- XMLWriterTest.cpp - Writing MSCCL XML ------------------------------===//

#include "IRTestUtil.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

namespace coll::ir {
namespace {

/// A small broadcast built in memory (no lines, spelling left default).
Algorithm smallBroadcast() {
  Algorithm alg;
  alg.name = "b<&>\"'\n";
  alg.protocol = Protocol::LL;
  alg.nchannels = 1;
  alg.nchunksPerLoop = 2;
  alg.collective = Collective::Broadcast;
  alg.root = 1;
  alg.inplace = true;
  alg.outofplace = false;
  alg.minBytes = 8;
  alg.maxBytes = 4096;
  alg.gpus.resize(2);
  alg.gpus[0].inputChunks = 2;
  alg.gpus[0].scratchChunks = 1;
  ThreadBlock tb;
  tb.sendPeer = -1;
  tb.recvPeer = 1;
  Step recv;
  recv.type = StepType::Recv;
  recv.dstBuf = BufferKind::Scratch;
  recv.count = 2;
  recv.hasDep = true;
  Step nop;
  nop.type = StepType::Nop;
  nop.srcOff = nop.dstOff = -1;
  nop.count = 0;
  nop.depTb = 0;
  nop.depStep = 0;
  tb.steps = {recv, nop};
  alg.gpus[0].tbs.push_back(tb);
  return alg;
}

TEST(XMLWriterTest, ExactText) {
  EXPECT_EQ(
      writeAlgorithm(smallBroadcast()),
      R"(<algo name="b&lt;&amp;&gt;&quot;&apos;&#10;" proto="LL" nchannels="1" nchunksperloop="2" ngpus="2" coll="broadcast" inplace="1" outofplace="0" minBytes="8" maxBytes="4096" root="1">
  <gpu id="0" i_chunks="2" o_chunks="0" s_chunks="1">
    <tb id="0" send="-1" recv="1" chan="0">
      <step s="0" type="r" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="1"/>
      <step s="1" type="nop" srcbuf="i" srcoff="-1" dstbuf="i" dstoff="-1" cnt="0" depid="0" deps="0" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="0" o_chunks="0" s_chunks="0">
  </gpu>
</algo>
)");
}

TEST(XMLWriterTest, RootOnlyForRootedCollectives) {
  Algorithm alg = smallBroadcast();
  alg.collective = Collective::AllReduce;
  alg.root = -1;
  std::string text = writeAlgorithm(alg);
  EXPECT_EQ(text.find("root="), std::string::npos);
  EXPECT_NE(text.find(" coll=\"allreduce\" inplace=\"1\""), std::string::npos);

  alg.collective = Collective::Custom;
  alg.collectiveSpelling = "my_thing";
  EXPECT_NE(writeAlgorithm(alg).find(" coll=\"my_thing\" "), std::string::npos);
}

TEST(XMLWriterTest, RoundTripsAndIsDeterministic) {
  Algorithm alg = smallBroadcast();
  std::string text = writeAlgorithm(alg);
  EXPECT_EQ(writeAlgorithm(alg), text);
  Algorithm back = test::parseValid(text);
  // Read from the file, the spelling is the canonical name.
  alg.collectiveSpelling = "broadcast";
  EXPECT_EQ(back, alg);
  EXPECT_EQ(back.name, "b<&>\"'\n");
  EXPECT_EQ(writeAlgorithm(back), text);
}

TEST(XMLWriterTest, WriteAlgorithmFile) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("collir", "xml", path));
  Algorithm alg = smallBroadcast();
  ASSERT_FALSE(bool(writeAlgorithmFile(alg, path)));
  auto buffer = llvm::MemoryBuffer::getFile(path);
  ASSERT_TRUE(bool(buffer));
  EXPECT_EQ((*buffer)->getBuffer(), writeAlgorithm(alg));
  llvm::sys::fs::remove(path);

  llvm::Error err = writeAlgorithmFile(alg, "/nonexistent/dir/a.xml");
  ASSERT_TRUE(bool(err));
  EXPECT_EQ(llvm::toString(std::move(err)),
            "cannot write '/nonexistent/dir/a.xml': No such file or directory");
}

} // namespace
} // namespace coll::ir
