//===- HardwareTest.cpp - The NVML query, through a stand-in NVML ----------===//
//
// queryNvml loads the library it is given with dlopen, as it loads the
// driver's libnvidia-ml.so.1: fake_nvml.c describes a made-up two-GPU
// machine, so the query, its error paths and the inventory it makes are
// tested without a GPU.
//
//===----------------------------------------------------------------------===//

#include "coll/support/Hardware.h"

#include <gtest/gtest.h>

using namespace coll::hw;

namespace {

std::string errorOf(llvm::Expected<GpuInventory> inventory) {
  EXPECT_FALSE(!!inventory);
  return inventory ? std::string() : llvm::toString(inventory.takeError());
}

void expectTwoGpus(const GpuInventory &inventory, bool switchTypeKnown) {
  ASSERT_EQ(inventory.gpus.size(), 2u);
  const char *buses[2] = {"0000:18:00.0", "0000:2a:00.0"};
  for (int i = 0; i < 2; ++i) {
    const GpuInventory::Gpu &g = inventory.gpus[i];
    EXPECT_EQ(g.busId, buses[i]);
    EXPECT_EQ(g.name, "Fake H100 " + std::to_string(i));
    EXPECT_EQ(g.sm, 90);
    EXPECT_EQ(g.pcieGen, 5);
    EXPECT_EQ(g.pcieWidth, 16);
    ASSERT_EQ(g.nvlinks.size(), 3u) << "links 3.. are down and must be left out";
    EXPECT_EQ(g.nvlinks[0].remote, buses[1 - i]);
    EXPECT_EQ(g.nvlinks[1].remote, buses[1 - i]);
    EXPECT_FALSE(g.nvlinks[0].toSwitch);
    EXPECT_FALSE(g.nvlinks[1].toSwitch);
    EXPECT_EQ(g.nvlinks[2].remote, "0000:c0:00.0");
    EXPECT_TRUE(g.nvlinks[2].toSwitch) << (switchTypeKnown ? "NVML said so"
                                                           : "no GPU has that bus id");
  }
}

TEST(Hardware, QueriesTheGpusThroughNvml) {
  auto inventory = queryNvml(COLL_FAKE_NVML);
  ASSERT_TRUE(!!inventory) << llvm::toString(inventory.takeError());
  expectTwoGpus(*inventory, true);
}

TEST(Hardware, TellsSwitchesByBusIdWithoutTheRemoteType) {
  auto inventory = queryNvml(COLL_FAKE_NVML_NO_TYPE);
  ASSERT_TRUE(!!inventory) << llvm::toString(inventory.takeError());
  expectTwoGpus(*inventory, false);
}

TEST(Hardware, InventoryReadsBackAsPrinted) {
  auto inventory = queryNvml(COLL_FAKE_NVML);
  ASSERT_TRUE(!!inventory) << llvm::toString(inventory.takeError());
  std::string text;
  llvm::raw_string_ostream os(text);
  printInventory(*inventory, os);
  EXPECT_TRUE(isInventory(os.str()));
  auto again = parseInventory(os.str(), "printed");
  ASSERT_TRUE(!!again) << llvm::toString(again.takeError());
  expectTwoGpus(*again, true);
}

TEST(Hardware, SaysWhyNvmlCannotStart) {
  const std::string message = errorOf(queryNvml(COLL_FAKE_NVML_BROKEN));
  EXPECT_NE(message.find("NVML cannot start: Unknown Error (NVML error 999)"), std::string::npos)
      << message;
}

TEST(Hardware, SaysWhyNvmlCannotBeLoaded) {
  const std::string message = errorOf(queryNvml("/nonexistent/libnvidia-ml.so.1"));
  EXPECT_NE(message.find("cannot load NVML (/nonexistent/libnvidia-ml.so.1"), std::string::npos)
      << message;
}

TEST(Hardware, SaysWhichFunctionsALibraryLacks) {
  // A library that is not NVML at all (the C library) lacks every entry point.
  const std::string message = errorOf(queryNvml("libc.so.6"));
  EXPECT_NE(message.find("lacks functions Coll needs"), std::string::npos) << message;
}

} // namespace
