//===- TimeScale.h - Time bounds times COLL_TEST_TIME_SCALE -----*- C++ -*-===//
//
// Every time bound a test sets (a watchdog period, a deadline, a "within N
// ms" check, a sleep that waits for the other ranks to get somewhere) is
// written as its value on an ordinary machine and scaled by the environment
// variable COLL_TEST_TIME_SCALE: a positive number (3, 1.5, 0.5), 1 when
// unset or empty; e.g. 3 on a slow machine or under a sanitizer. Scale 1
// gives every bound exactly as written. A value that is not a positive
// number ends the test with status 2 and a message naming the variable.
//
// C++ tests: coll::testing::scaledMs(ms), scaledSeconds(s). C programs (the
// drop-in checks) include this header too: coll_test_scaled(n). The shell
// scripts' counterpart is time-scale.sh beside this file; ctest's TIMEOUTs
// scale in tests/CMakeLists.txt (coll_test_time).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_TESTS_SUPPORT_TIMESCALE_H
#define COLL_TESTS_SUPPORT_TIMESCALE_H

#include <float.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/// The scale `text` gives: 1 for null or empty; 0 when it is not a decimal
/// number greater than 0 (digits with at most one '.': 3, 1.5, .5; no sign,
/// exponent or spaces), so that "fast" or "-1" cannot pass for a number.
static inline double coll_test_parse_time_scale(const char *text) {
  if (!text || !*text)
    return 1;
  int digits = 0, dots = 0;
  for (const char *p = text; *p; ++p) {
    if (*p >= '0' && *p <= '9')
      ++digits;
    else if (*p != '.' || ++dots > 1)
      return 0;
  }
  if (!digits)
    return 0;
  const double scale = strtod(text, NULL);
  return scale > 0 && scale <= DBL_MAX ? scale : 0;
}

/// COLL_TEST_TIME_SCALE, read now; a bad value prints why and exits 2.
static inline double coll_test_read_time_scale(void) {
  const char *text = getenv("COLL_TEST_TIME_SCALE");
  const double scale = coll_test_parse_time_scale(text);
  if (scale == 0) {
    fprintf(stderr,
            "COLL_TEST_TIME_SCALE='%s' is not a positive number (it multiplies the tests' time "
            "bounds: 1 when unset, e.g. 3 on a slow machine or under a sanitizer)\n",
            text);
    fflush(stderr);
    exit(2);
  }
  return scale;
}

/// `value` (milliseconds or seconds) times `scale`, rounded to the nearest
/// whole number; at least 1 when `value` is positive, so that no bound
/// becomes 0 ("no limit" to alarm() and to watchdogs).
static inline long coll_test_scale(long value, double scale) {
  if (value <= 0)
    return value;
  const double scaled = (double)value * scale + 0.5; /* positive: truncation rounds */
  if (scaled < 1)
    return 1;
  return scaled > 1e15 ? (long)1e15 : (long)scaled;
}

/// For C programs: `value` times COLL_TEST_TIME_SCALE, read on the first
/// call (single-threaded callers: the cached value is a plain static).
static inline long coll_test_scaled(long value) {
  static double scale = 0;
  if (scale == 0)
    scale = coll_test_read_time_scale();
  return coll_test_scale(value, scale);
}

#ifdef __cplusplus
namespace coll::testing {

/// COLL_TEST_TIME_SCALE, read once per program (the first call; later
/// changes of the variable are not seen).
inline double timeScale() {
  static const double scale = coll_test_read_time_scale();
  return scale;
}

/// A bound in milliseconds (or seconds), as written for scale 1, scaled.
inline long scaledMs(long ms) { return coll_test_scale(ms, timeScale()); }
inline int scaledSeconds(int seconds) {
  const long scaled = coll_test_scale(seconds, timeScale());
  return scaled > INT_MAX ? INT_MAX : int(scaled);
}

} // namespace coll::testing
#endif

#endif // COLL_TESTS_SUPPORT_TIMESCALE_H
