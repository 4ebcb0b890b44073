//===- TimeScaleTest.cpp - COLL_TEST_TIME_SCALE, the tests' time bounds ----===//
//
// tests/support/TimeScale.h: how a value of COLL_TEST_TIME_SCALE parses, how
// a bound scales (scale 1 keeps every bound as written), and, in a child
// process each (the variable is read once per program), the default, the
// one reading and the error for a value that is not a positive number.
//
//===----------------------------------------------------------------------===//

#include "TimeScale.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace {

TEST(TimeScale, ParsesPositiveDecimalNumbers) {
  EXPECT_EQ(coll_test_parse_time_scale("1"), 1.0);
  EXPECT_EQ(coll_test_parse_time_scale("3"), 3.0);
  EXPECT_EQ(coll_test_parse_time_scale("1.5"), 1.5);
  EXPECT_EQ(coll_test_parse_time_scale("0.5"), 0.5);
  EXPECT_EQ(coll_test_parse_time_scale(".5"), 0.5);
  EXPECT_EQ(coll_test_parse_time_scale("2."), 2.0);
  EXPECT_EQ(coll_test_parse_time_scale("007"), 7.0);
}

TEST(TimeScale, UnsetOrEmptyIsOne) {
  EXPECT_EQ(coll_test_parse_time_scale(nullptr), 1.0);
  EXPECT_EQ(coll_test_parse_time_scale(""), 1.0);
}

TEST(TimeScale, RejectsWhatIsNotAPositiveNumber) {
  for (const char *bad : {"0", "0.0", ".", "-1", "+2", "fast", "3x", "1e3", " 3", "3 ", "1.2.3",
                          "inf", "nan", "1,5"})
    EXPECT_EQ(coll_test_parse_time_scale(bad), 0.0) << "'" << bad << "'";
}

TEST(TimeScale, ScalesToTheNearestWholeNumberAndNeverToZero) {
  for (long bound : {1L, 200L, 300L, 2000L, 20000L, 60000L})
    EXPECT_EQ(coll_test_scale(bound, 1.0), bound) << "scale 1 must keep " << bound;
  EXPECT_EQ(coll_test_scale(200, 3.0), 600);
  EXPECT_EQ(coll_test_scale(300, 1.5), 450);
  EXPECT_EQ(coll_test_scale(5, 0.5), 3);  // 2.5 rounds up
  EXPECT_EQ(coll_test_scale(10, 0.01), 1); // a bound never becomes 0 ("no limit")
  EXPECT_EQ(coll_test_scale(0, 3.0), 0);
}

// The death tests re-run this binary for the child ("threadsafe"), so that
// the child reads the variable afresh whatever the parent read before.
class TimeScaleFromTheEnvironment : public ::testing::Test {
protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(TimeScaleFromTheEnvironment, DefaultsToOne) {
  EXPECT_EXIT(
      {
        unsetenv("COLL_TEST_TIME_SCALE");
        std::exit(coll::testing::timeScale() == 1.0 && coll::testing::scaledMs(20000) == 20000 &&
                          coll::testing::scaledSeconds(600) == 600
                      ? 0
                      : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(TimeScaleFromTheEnvironment, IsReadOnce) {
  EXPECT_EXIT(
      {
        setenv("COLL_TEST_TIME_SCALE", "2.5", 1);
        const long first = coll::testing::scaledMs(200);
        setenv("COLL_TEST_TIME_SCALE", "7", 1);
        std::exit(first == 500 && coll::testing::scaledMs(200) == 500 &&
                          coll::testing::scaledSeconds(60) == 150
                      ? 0
                      : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(TimeScaleFromTheEnvironment, ABadValueEndsTheTestNamingTheVariable) {
  EXPECT_EXIT(
      {
        setenv("COLL_TEST_TIME_SCALE", "fast", 1);
        coll::testing::scaledMs(200);
      },
      ::testing::ExitedWithCode(2), "COLL_TEST_TIME_SCALE='fast' is not a positive number");
}

} // namespace
