//===- Float16Test.cpp - fp16/bf16 conversions and reduction operators ----===//

#include "coll/interpreter/Float16.h"
#include "coll/interpreter/ReduceOps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace coll::interp;

namespace {

/// The value of a finite binary16 pattern, computed from the definition.
double halfValue(uint16_t bits) {
  int exp = (bits >> 10) & 0x1f;
  int mant = bits & 0x3ff;
  double v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  return (bits & 0x8000) ? -v : v;
}

/// Round-to-nearest-even into binary16 by search over all finite values.
uint16_t referenceHalf(float f, const std::vector<double> &positives) {
  double x = std::fabs(static_cast<double>(f));
  uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (x >= 65520.0)
    return sign | 0x7c00;
  auto hi = std::lower_bound(positives.begin(), positives.end(), x);
  if (hi == positives.begin())
    return sign;
  if (hi == positives.end())
    return sign | 0x7bff;
  auto lo = hi - 1;
  uint16_t loBits = static_cast<uint16_t>(lo - positives.begin());
  double dlo = x - *lo, dhi = *hi - x;
  uint16_t pick = dlo < dhi ? loBits : dhi < dlo ? loBits + 1 : (loBits & 1 ? loBits + 1 : loBits);
  return sign | pick;
}

TEST(Float16, HalfRoundTripsEveryPattern) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    uint16_t bits = static_cast<uint16_t>(b);
    Half h = Half::fromBits(bits);
    float f = h.toFloat();
    if (((bits >> 10) & 0x1f) == 0x1f) {
      EXPECT_TRUE((bits & 0x3ff) ? std::isnan(f) : std::isinf(f)) << b;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), halfValue(bits)) << b;
    ASSERT_EQ(Half::fromFloat(f).bits, bits) << b;
  }
}

TEST(Float16, HalfRoundsToNearestEven) {
  std::vector<double> positives;
  for (uint16_t b = 0; b <= 0x7bff; ++b)
    positives.push_back(halfValue(b));
  std::vector<float> samples = {65504.0f, 65519.99f, 65520.0f, 1e10f, 5.9604645e-08f,
                                2.9802322e-08f, 2.98023259e-08f, 1e-10f, -0.0f, 1.0f + 1.0f / 2048};
  // Every midpoint between neighbours (a tie) and its two float neighbours.
  for (size_t i = 0; i + 1 < positives.size(); i += 7) {
    float mid = static_cast<float>((positives[i] + positives[i + 1]) / 2);
    samples.insert(samples.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)});
  }
  std::mt19937 rng(1);
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = (rng() & 0x807fffffu) | ((97u + rng() % 50u) << 23);
    float f;
    std::memcpy(&f, &bits, 4);
    samples.push_back(f);
  }
  for (float f : samples)
    ASSERT_EQ(Half::fromFloat(f).bits, referenceHalf(f, positives)) << f;
  EXPECT_TRUE(std::isnan(Half::fromFloat(std::nanf("")).toFloat()));
}

TEST(Float16, BFloat16RoundsToNearestEven) {
  std::mt19937 rng(2);
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    uint16_t got = BFloat16::fromFloat(f).bits;
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(BFloat16::fromBits(got).toFloat()));
      continue;
    }
    // The two candidates around f and their distances, in double.
    uint16_t down = static_cast<uint16_t>(bits >> 16);
    // Rounding works with an unbounded exponent: the candidate above the
    // largest finite value is 2^128, and rounding to it overflows to inf.
    auto value = [](uint16_t b) {
      if ((b & 0x7fff) == 0x7f80)
        return std::ldexp((b & 0x8000) ? -1.0 : 1.0, 128);
      return static_cast<double>(BFloat16::fromBits(b).toFloat());
    };
    double x = f, lo = value(down), hi = value(static_cast<uint16_t>(down + 1));
    double dlo = std::fabs(x - lo), dhi = std::fabs(hi - x);
    uint16_t want = dlo < dhi ? down : dhi < dlo ? down + 1 : (down & 1 ? down + 1 : down);
    ASSERT_EQ(got, want) << f;
  }
  EXPECT_EQ(BFloat16::fromFloat(1.0f).toFloat(), 1.0f);
  EXPECT_TRUE(std::isinf(BFloat16::fromFloat(3.4e38f).toFloat()));
}

TEST(ReduceOps, IntegersWrap) {
  EXPECT_EQ(OpSum<int8_t>()(int8_t(127), int8_t(1)), int8_t(-128));
  EXPECT_EQ(OpProd<int32_t>()(0x40000000, 4), 0);
  EXPECT_EQ(OpProd<uint8_t>()(uint8_t(16), uint8_t(17)), uint8_t(16));
  EXPECT_EQ(OpSum<uint64_t>()(~uint64_t(0), 2u), 1u);
  EXPECT_EQ(OpMin<int64_t>()(-5, 3), -5);
  EXPECT_EQ(OpMax<uint32_t>()(5u, 0xffffffffu), 0xffffffffu);
  EXPECT_EQ(Arith<int8_t>::divide(int8_t(-100), 200), int8_t(0));
  EXPECT_EQ(Arith<uint8_t>::divide(uint8_t(255), 256), uint8_t(0));
  EXPECT_EQ(Arith<int32_t>::divide(-9, 4), -2);
}

TEST(ReduceOps, SixteenBitFloatsRoundOnce) {
  Half a = Half::fromFloat(1.0f), b = Half::fromFloat(1.0f / 4096);
  EXPECT_EQ(OpSum<Half>()(a, b).bits, a.bits); // 1 + 2^-12 rounds to 1
  Half c = Half::fromFloat(1.0f / 2048);
  EXPECT_EQ(OpSum<Half>()(a, c).bits, Half::fromFloat(1.0f).bits); // tie to even
  EXPECT_EQ(OpMax<BFloat16>()(BFloat16::fromFloat(-2.0f), BFloat16::fromFloat(3.0f)).toFloat(),
            3.0f);
}

} // namespace
