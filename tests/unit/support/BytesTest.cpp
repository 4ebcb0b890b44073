//===- BytesTest.cpp - Byte counts as people write them --------------------===//

#include "coll/support/Bytes.h"

#include <gtest/gtest.h>

using coll::formatBytes;
using coll::parseBytes;

namespace {

TEST(Bytes, ParsesDigitsWithABinarySuffixInEitherCase) {
  EXPECT_EQ(parseBytes("0"), 0u);
  EXPECT_EQ(parseBytes("3000"), 3000u);
  EXPECT_EQ(parseBytes("64K"), 64u << 10);
  EXPECT_EQ(parseBytes("64k"), 64u << 10);
  EXPECT_EQ(parseBytes("1M"), 1u << 20);
  EXPECT_EQ(parseBytes("2g"), 2ull << 30);
}

TEST(Bytes, RejectsAnythingElse) {
  for (const char *bad : {"", "K", "-1", "1.5M", "64KB", "0x10", " 1", "1 ", "12T"})
    EXPECT_FALSE(parseBytes(bad)) << "'" << bad << "'";
}

TEST(Bytes, RejectsCountsAboveTheLimit) {
  EXPECT_EQ(parseBytes("1024G", 1ull << 40), 1ull << 40);
  EXPECT_FALSE(parseBytes("1025G", 1ull << 40));
  EXPECT_FALSE(parseBytes("99999999999999999999"));
  EXPECT_FALSE(parseBytes("9999999999999G"));
}

TEST(Bytes, FormatsTheShortestExactSpelling) {
  EXPECT_EQ(formatBytes(0), "0");
  EXPECT_EQ(formatBytes(3000), "3000");
  EXPECT_EQ(formatBytes(4096), "4K");
  EXPECT_EQ(formatBytes(6 << 20), "6M");
  EXPECT_EQ(formatBytes(3ull << 30), "3G");
  EXPECT_EQ(formatBytes((1 << 20) + 1024), "1025K");
  EXPECT_EQ(formatBytes(UINT64_MAX), "inf");
}

TEST(Bytes, FormattedCountsReadBack) {
  for (uint64_t b : {0ull, 1ull, 1000ull, 1024ull, 1536ull << 10, 5ull << 30, 123456789ull})
    EXPECT_EQ(parseBytes(formatBytes(b)), b);
}

} // namespace
