//===- ReduceOps.h - Reduction operators for host and device ----*- C++ -*-===//
//
// One functor per reduction operator, shared by the host and CUDA backends so
// that both compute the same bits. Integer arithmetic wraps (as NCCL's does);
// fp16/bf16 compute in float and round once (see Float16.h). `avg` reduces
// with `sum` and divides at the end (applyAverage), for every type.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_REDUCEOPS_H
#define COLL_INTERPRETER_REDUCEOPS_H

#include "coll/interpreter/Config.h"
#include "coll/interpreter/Float16.h"

#include <cstdint>
#include <type_traits>

namespace coll::interp {

/// Wrapping integer and IEEE arithmetic on the element types.
template <class T> struct Arith {
  using U = std::make_unsigned_t<T>;
  COLL_HOST_DEVICE COLL_INLINE static T add(T a, T b) {
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
  COLL_HOST_DEVICE COLL_INLINE static T mul(T a, T b) {
    // Promote so that uint16-like operands cannot overflow a signed int.
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) *
                                         static_cast<W>(static_cast<U>(b))));
  }
  COLL_HOST_DEVICE COLL_INLINE static bool less(T a, T b) { return a < b; }
  /// Integer division by the rank count, in 64 bits so that `n` is never
  /// narrowed to the element type.
  COLL_HOST_DEVICE COLL_INLINE static T divide(T a, int n) {
    using W = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
    return static_cast<T>(static_cast<W>(a) / static_cast<W>(n));
  }
};

template <> struct Arith<float> {
  COLL_HOST_DEVICE COLL_INLINE static float add(float a, float b) { return a + b; }
  COLL_HOST_DEVICE COLL_INLINE static float mul(float a, float b) { return a * b; }
  COLL_HOST_DEVICE COLL_INLINE static bool less(float a, float b) { return a < b; }
  COLL_HOST_DEVICE COLL_INLINE static float divide(float a, int n) { return a / float(n); }
};

template <> struct Arith<double> {
  COLL_HOST_DEVICE COLL_INLINE static double add(double a, double b) { return a + b; }
  COLL_HOST_DEVICE COLL_INLINE static double mul(double a, double b) { return a * b; }
  COLL_HOST_DEVICE COLL_INLINE static bool less(double a, double b) { return a < b; }
  COLL_HOST_DEVICE COLL_INLINE static double divide(double a, int n) { return a / double(n); }
};

/// fp16 and bf16: compute in float, round once.
template <class H> struct Arith16 {
  COLL_HOST_DEVICE COLL_INLINE static H add(H a, H b) {
    return H::fromFloat(a.toFloat() + b.toFloat());
  }
  COLL_HOST_DEVICE COLL_INLINE static H mul(H a, H b) {
    return H::fromFloat(a.toFloat() * b.toFloat());
  }
  COLL_HOST_DEVICE COLL_INLINE static bool less(H a, H b) {
    return a.toFloat() < b.toFloat();
  }
  COLL_HOST_DEVICE COLL_INLINE static H divide(H a, int n) {
    return H::fromFloat(a.toFloat() / float(n));
  }
};
template <> struct Arith<Half> : Arith16<Half> {};
template <> struct Arith<BFloat16> : Arith16<BFloat16> {};

template <class T> struct OpSum {
  COLL_HOST_DEVICE COLL_INLINE T operator()(T a, T b) const { return Arith<T>::add(a, b); }
};
template <class T> struct OpProd {
  COLL_HOST_DEVICE COLL_INLINE T operator()(T a, T b) const { return Arith<T>::mul(a, b); }
};
template <class T> struct OpMin {
  COLL_HOST_DEVICE COLL_INLINE T operator()(T a, T b) const {
    return Arith<T>::less(b, a) ? b : a;
  }
};
template <class T> struct OpMax {
  COLL_HOST_DEVICE COLL_INLINE T operator()(T a, T b) const {
    return Arith<T>::less(a, b) ? b : a;
  }
};

} // namespace coll::interp

#endif // COLL_INTERPRETER_REDUCEOPS_H
