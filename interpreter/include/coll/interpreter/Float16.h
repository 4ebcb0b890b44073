//===- Float16.h - fp16 and bf16 storage types ------------------*- C++ -*-===//
//
// 16-bit floating-point element types usable in host and device code. They
// are storage types: arithmetic converts to float, operates, and rounds back
// to nearest-even. For +, *, min and max of two operands this is exactly the
// correctly rounded 16-bit result (fp32 has more than 2p+2 bits of precision
// for p = 11 and p = 8), i.e. what the GPU's native half/bf16 instructions
// produce, so host and device results can be compared bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_FLOAT16_H
#define COLL_INTERPRETER_FLOAT16_H

#include "coll/interpreter/Config.h"

#include <cstdint>
#include <cstring>

namespace coll::interp {

namespace detail {
COLL_HOST_DEVICE COLL_INLINE uint32_t floatBits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
COLL_HOST_DEVICE COLL_INLINE float bitsFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
} // namespace detail

/// IEEE 754 binary16.
struct Half {
  uint16_t bits;

  COLL_HOST_DEVICE static Half fromBits(uint16_t b) { return Half{b}; }

  /// Round-to-nearest-even conversion, with overflow to infinity, gradual
  /// underflow and NaN preserved (quietened).
  COLL_HOST_DEVICE static Half fromFloat(float f) {
    uint32_t x = detail::floatBits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) // inf or NaN
      return Half{uint16_t(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u))};
    if (absx >= 0x477ff000u) // rounds to >= 65520: overflow
      return Half{uint16_t(sign | 0x7c00u)};
    if (absx < 0x38800000u) { // below the smallest normal half: subnormal
      if (absx < 0x33000000u) // < 2^-25: rounds to zero
        return Half{uint16_t(sign)};
      // The value is mant * 2^(e-150); in units of the smallest subnormal
      // (2^-24) that is mant >> (126 - e), e being the biased exponent.
      uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
      int shift = 126 - int(absx >> 23); // 14..24 in this range
      uint32_t half = mant >> shift;
      uint32_t rem = mant & ((1u << shift) - 1u);
      uint32_t halfway = 1u << (shift - 1);
      if (rem > halfway || (rem == halfway && (half & 1u)))
        ++half;
      return Half{uint16_t(sign | half)};
    }
    // Normal: rebias exponent 127 -> 15 and round 23 -> 10 mantissa bits.
    uint32_t r = absx - 0x38000000u; // exponent - 112
    uint32_t rem = r & 0x1fffu;
    uint32_t h = r >> 13;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
      ++h; // may carry into the exponent, correctly giving the next binade/inf
    return Half{uint16_t(sign | h)};
  }

  COLL_HOST_DEVICE float toFloat() const {
    uint32_t sign = uint32_t(bits & 0x8000u) << 16;
    uint32_t exp = (bits >> 10) & 0x1fu;
    uint32_t mant = bits & 0x3ffu;
    if (exp == 0x1f) // inf / NaN
      return detail::bitsFloat(sign | 0x7f800000u | (mant << 13));
    if (exp != 0)
      return detail::bitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
    if (mant == 0)
      return detail::bitsFloat(sign);
    // Subnormal: value = mant * 2^-24, exact in float.
    float v = float(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
};

/// bfloat16: the top half of an IEEE binary32.
struct BFloat16 {
  uint16_t bits;

  COLL_HOST_DEVICE static BFloat16 fromBits(uint16_t b) { return BFloat16{b}; }

  COLL_HOST_DEVICE static BFloat16 fromFloat(float f) {
    uint32_t x = detail::floatBits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) // NaN: keep it a (quiet) NaN
      return BFloat16{uint16_t((x >> 16) | 0x40u)};
    uint32_t lsb = (x >> 16) & 1u;
    x += 0x7fffu + lsb; // round to nearest even; overflow carries to inf
    return BFloat16{uint16_t(x >> 16)};
  }

  COLL_HOST_DEVICE float toFloat() const {
    return detail::bitsFloat(uint32_t(bits) << 16);
  }
};

} // namespace coll::interp

#endif // COLL_INTERPRETER_FLOAT16_H
