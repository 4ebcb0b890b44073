//===- Check.cpp - Reference definitions of the collectives ---------------===//

#include "coll/interpreter/Check.h"

#include "coll/interpreter/ReduceOps.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstring>
#include <type_traits>

namespace coll::interp {

using ir::Collective;

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <class T> constexpr bool isFloat16 = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <class T> constexpr bool isFloating = isFloat16<T> || std::is_floating_point_v<T>;

/// The reference's view of an element: its value in the wide type.
template <class T> auto widen(T v) {
  if constexpr (isFloat16<T>)
    return static_cast<double>(v.toFloat());
  else if constexpr (std::is_same_v<T, double>)
    return static_cast<long double>(v);
  else if constexpr (std::is_same_v<T, float>)
    return static_cast<double>(v);
  else
    return v;
}

template <class T> T fromDouble(double d) {
  if constexpr (isFloat16<T>)
    return T::fromFloat(static_cast<float>(d));
  else
    return static_cast<T>(d);
}

/// Unit roundoff of a floating type.
template <class T> double unitRoundoff() {
  if constexpr (std::is_same_v<T, Half>)
    return std::ldexp(1.0, -11);
  else if constexpr (std::is_same_v<T, BFloat16>)
    return std::ldexp(1.0, -8);
  else if constexpr (std::is_same_v<T, float>)
    return std::ldexp(1.0, -24);
  else
    return std::ldexp(1.0, -53);
}

/// A random non-zero element: magnitudes in [1/8, 1) for sums and extrema,
/// near 1 for products (so that products of many ranks stay in range), with
/// random signs; integers are random non-zero bit patterns.
template <class T> T randomElement(uint64_t bits, ReduceOp op) {
  if constexpr (isFloating<T>) {
    double u = static_cast<double>(bits >> 11) * std::ldexp(1.0, -53);
    double mag = op == ReduceOp::Prod ? 0.8 + 0.45 * u : 0.125 + 0.875 * u;
    return fromDouble<T>((bits & 1) ? -mag : mag);
  } else {
    T v = static_cast<T>(bits);
    return v == 0 ? T(1) : v;
  }
}

template <class T> bool sameBits(const T &a, const T &b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T> std::string show(T v) {
  if constexpr (isFloating<T>)
    return llvm::formatv("{0:e}", static_cast<double>(widen(v))).str();
  else
    return std::to_string(v);
}

/// Where output element `e` of rank `r` comes from, per the definition: the
/// source element index within each contributing rank's input, and whether
/// all ranks contribute (a reduction) or only `single`.
struct Source {
  bool constrained;
  bool reduction;
  int32_t single; ///< the one contributing rank when !reduction
  uint64_t elem;  ///< element index in the contributing input(s)
};

/// One input element that an output element is made of.
struct Term {
  int32_t rank;
  uint64_t elem;
};

Source sourceOf(const CollectiveDesc &d, uint64_t count, int32_t r, uint64_t e) {
  const int32_t root = d.root;
  switch (d.collective) {
  case Collective::AllReduce: return {true, true, 0, e};
  case Collective::ReduceScatter: return {true, true, 0, r * count + e};
  case Collective::Reduce: return {r == root, true, 0, e};
  case Collective::AllGather: return {true, false, int32_t(e / count), e % count};
  case Collective::AllToAll: return {true, false, int32_t(e / count), r * count + e % count};
  case Collective::Broadcast: return {true, false, root, e};
  case Collective::Gather: return {r == root, false, int32_t(e / count), e % count};
  case Collective::Scatter: return {true, false, root, r * count + e};
  case Collective::Custom: break;
  }
  return {false, false, 0, 0};
}

} // namespace

template <class T> T CheckedCall::inputElement(int32_t r, uint64_t e) const {
  const uint64_t stream = mixedSeed ^ (static_cast<uint64_t>(r) << 48);
  return randomElement<T>(splitmix64(stream + e), op);
}

bool CheckedCall::canCheck(Collective collective) { return collective != Collective::Custom; }

CheckedCall::CheckedCall(const CollectiveDesc &desc, DataType type, ReduceOp op, uint64_t count,
                         bool inplace, uint64_t seed)
    : desc(desc), type(type), op(op), count(count), inplace(inplace),
      elemSize(dataTypeSize(type)), mixedSeed(splitmix64(seed)) {
  ir::ChunkLayout layout(desc.shape, count);
  inElems = layout.bufferElems(ir::BufferKind::Input);
  outElems = layout.bufferElems(ir::BufferKind::Output);
  const size_t inBytes = inElems * elemSize, outBytes = outElems * elemSize;
  const int32_t n = desc.nranks();
  memory.resize(n);
  if (desc.custom)
    pristine.resize(n);
  inputAt.assign(n, 0);
  outputAt.assign(n, 0);
  for (int32_t r = 0; r < n; ++r) {
    if (inplace) {
      ir::InPlaceOffsets off = ir::inPlaceOffsets(desc.shape, r, count);
      inputAt[r] = off.inputInOutput * elemSize;
      outputAt[r] = off.outputInInput * elemSize;
      memory[r].resize(std::max(inBytes + inputAt[r], outBytes + outputAt[r]));
    } else {
      outputAt[r] = (inBytes + 63) / 64 * 64;
      memory[r].resize(outputAt[r] + outBytes);
    }
    if (!desc.custom)
      continue;
    pristine[r].resize(inBytes);
    visitDataType(type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T *in = reinterpret_cast<T *>(pristine[r].data());
      for (uint64_t e = 0; e < inElems; ++e)
        in[e] = inputElement<T>(r, e);
    });
    // The chunks a custom precondition leaves undefined hold no data.
    if (count > 0)
      for (int32_t j = 0; j < desc.custom->inputChunks; ++j)
        if (!desc.custom->inputDefined[r][j])
          std::memset(pristine[r].data() + layout.chunkOffset(ir::BufferKind::Input, j) * elemSize,
                      0xff, layout.chunkSize(ir::BufferKind::Input, j) * elemSize);
  }
  reset();
}

CheckedCall::~CheckedCall() = default;

void CheckedCall::reset() {
  for (size_t r = 0; r < memory.size(); ++r) {
    // A call of 0 elements has no memory: mem* must not see its null data().
    if (memory[r].empty())
      continue;
    // 0xff bytes: NaN in every floating type, so an unwritten output shows.
    std::memset(memory[r].data(), 0xff, memory[r].size());
    if (!pristine.empty()) {
      if (!pristine[r].empty())
        std::memcpy(memory[r].data() + inputAt[r], pristine[r].data(), pristine[r].size());
      continue;
    }
    visitDataType(type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T *in = reinterpret_cast<T *>(memory[r].data() + inputAt[r]);
      for (uint64_t e = 0; e < inElems; ++e)
        in[e] = inputElement<T>(static_cast<int32_t>(r), e);
    });
  }
}

CallArgs CheckedCall::args() const {
  CallArgs a;
  a.type = type;
  a.op = op;
  a.count = count;
  for (size_t r = 0; r < memory.size(); ++r) {
    auto *base = const_cast<unsigned char *>(memory[r].data());
    a.input.push_back(base + inputAt[r]);
    a.output.push_back(base + outputAt[r]);
  }
  return a;
}

CheckResult CheckedCall::check() const {
  CheckResult res;
  const int32_t n = desc.nranks();
  visitDataType(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Rank r's pristine input element e.
    auto input = [&](int32_t r, uint64_t e) {
      return pristine.empty() ? inputElement<T>(r, e)
                              : reinterpret_cast<const T *>(pristine[r].data())[e];
    };
    auto output = [&](int32_t r) {
      return reinterpret_cast<const T *>(memory[r].data() + outputAt[r]);
    };
    auto wrongAt = [&](int32_t r, uint64_t e, const std::string &what) {
      if (res.wrong++ == 0)
        res.firstWrong = llvm::formatv("rank {0} element {1}: {2}", r, e, what).str();
    };

    // Out of place, the input must come back unchanged.
    if (!inplace)
      for (int32_t r = 0; r < n; ++r) {
        const T *now = reinterpret_cast<const T *>(memory[r].data() + inputAt[r]);
        for (uint64_t e = 0; e < inElems; ++e)
          if (!sameBits(now[e], input(r, e)))
            wrongAt(r, e, "the input buffer was modified (out-of-place input is read-only)");
      }

    // What output element (r, e) must hold; computed once per source element
    // and compared on every rank that expects it (all ranks, for allreduce).
    struct Expected {
      bool exact; ///< compare bits, else |got - value| <= tol
      T bits;
      double value, tol;
    };
    // The result of reducing `terms`, or the one term of a copy. The
    // tolerance grows with the number of terms; avg divides by nranks.
    auto expectedOf = [&](llvm::ArrayRef<Term> terms, bool reduction) -> Expected {
      auto term = [&](const Term &t) { return input(t.rank, t.elem); };
      if (!reduction)
        return {true, term(terms.front()), 0, 0};
      const auto k = static_cast<int32_t>(terms.size());
      if constexpr (isFloating<T>) {
        if (op == ReduceOp::Min || op == ReduceOp::Max) {
          T want = term(terms.front());
          for (const Term &t : terms.drop_front()) {
            T v = term(t);
            if (op == ReduceOp::Min ? widen(v) < widen(want) : widen(v) > widen(want))
              want = v;
          }
          return {true, want, 0, 0};
        }
        using W = decltype(widen(T{}));
        W exact = op == ReduceOp::Prod ? W(1) : W(0), magnitude = 0;
        for (const Term &t : terms) {
          W v = widen(term(t));
          if (op == ReduceOp::Prod)
            exact *= v;
          else
            exact += v;
          magnitude += v < 0 ? -v : v;
        }
        const double u = unitRoundoff<T>();
        double tol;
        if (op == ReduceOp::Prod) {
          tol = k * u * std::fabs(static_cast<double>(exact));
        } else {
          tol = k * u * static_cast<double>(magnitude);
          if (op == ReduceOp::Avg) {
            exact /= n;
            tol = tol / n + 2 * u * std::fabs(static_cast<double>(exact));
          }
        }
        return {false, T{}, static_cast<double>(exact), tol};
      } else {
        // Integers: the wrapping result, computed in 64 bits and truncated.
        using U = std::make_unsigned_t<T>;
        uint64_t acc = op == ReduceOp::Prod ? 1 : 0;
        T extreme = term(terms.front());
        for (const Term &t : terms) {
          T v = term(t);
          uint64_t bits = static_cast<uint64_t>(static_cast<U>(v));
          if (op == ReduceOp::Prod)
            acc *= bits;
          else
            acc += bits;
          if ((op == ReduceOp::Min && v < extreme) || (op == ReduceOp::Max && v > extreme))
            extreme = v;
        }
        T want = static_cast<T>(static_cast<U>(acc));
        if (op == ReduceOp::Min || op == ReduceOp::Max)
          want = extreme;
        else if (op == ReduceOp::Avg)
          want = Arith<T>::divide(want, n);
        return {true, want, 0, 0};
      }
    };

    auto compare = [&](int32_t r, uint64_t e, const Expected &want, const std::string &from) {
      ++res.checked;
      T got = output(r)[e];
      if (want.exact) {
        if (!sameBits(got, want.bits))
          wrongAt(r, e, "got " + show(got) + ", expected " + show(want.bits) + from);
      } else {
        double diff = std::fabs(static_cast<double>(widen(got)) - want.value);
        if (!(diff <= want.tol)) // also catches NaN
          wrongAt(r, e, llvm::formatv("got {0}, expected {1:e} within {2:e}", show(got),
                                      want.value, want.tol)
                            .str() +
                            from);
      }
    };

    llvm::SmallVector<Term, 16> terms;
    if (desc.collective == Collective::Custom) {
      // Output chunk by output chunk, as the postcondition states them.
      const ir::Definition &def = *desc.custom;
      ir::ChunkLayout layout(desc.shape, count);
      auto contrib = [&](uint32_t id) {
        return "in(" + std::to_string(id / def.inputChunks) + "," +
               std::to_string(id % def.inputChunks) + ")";
      };
      for (int32_t r = 0; r < n; ++r)
        for (int32_t i = 0; i < def.outputChunks; ++i) {
          const std::vector<uint32_t> &ids = def.expected[r][i];
          if (ids.empty())
            continue;
          uint64_t at = layout.chunkOffset(ir::BufferKind::Output, i);
          uint64_t size = layout.chunkSize(ir::BufferKind::Output, i);
          std::string from = " (output chunk " + std::to_string(i) + " must hold " +
                             contrib(ids.front()) + (ids.size() > 1 ? " + ..." : "") + ")";
          bool sized = llvm::all_of(ids, [&](uint32_t id) {
            return layout.chunkSize(ir::BufferKind::Input, int32_t(id % def.inputChunks)) ==
                   size;
          });
          for (uint64_t e = 0; e < size; ++e) {
            if (!sized) {
              ++res.checked;
              wrongAt(r, at + e,
                      "output chunk " + std::to_string(i) +
                          " and the input chunks it must hold differ in size for this count");
              continue;
            }
            terms.clear();
            for (uint32_t id : ids)
              terms.push_back(
                  {int32_t(id / def.inputChunks),
                   layout.chunkOffset(ir::BufferKind::Input, int32_t(id % def.inputChunks)) + e});
            compare(r, at + e, expectedOf(terms, terms.size() > 1), from);
          }
        }
    }

    for (uint64_t e = 0; e < outElems && desc.collective != Collective::Custom; ++e) {
      Source cached{false, false, -1, 0};
      Expected want{};
      for (int32_t r = 0; r < n; ++r) {
        Source src = sourceOf(desc, count, r, e);
        if (!src.constrained)
          continue;
        if (src.reduction != cached.reduction || src.single != cached.single ||
            src.elem != cached.elem || !cached.constrained) {
          terms.clear();
          for (int32_t a = 0; a < n; ++a)
            if (src.reduction || a == src.single)
              terms.push_back({a, src.elem});
          want = expectedOf(terms, src.reduction);
          cached = src;
        }
        compare(r, e, want,
                src.reduction ? std::string() : " from rank " + std::to_string(src.single));
      }
    }

    if (desc.collective == Collective::AllReduce)
      for (int32_t r = 1; r < n; ++r)
        for (uint64_t e = 0; e < outElems; ++e)
          if (!sameBits(output(r)[e], output(0)[e]))
            ++res.crossRankDiffs;
  });
  return res;
}

} // namespace coll::interp
