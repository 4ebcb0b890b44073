/*===- nccl_conformance.c - An NCCL library against NCCL's semantics -------===*
 *
 *   nccl-conformance MODE NRANKS UNDERNEATH [huge]
 *
 * Forks NRANKS ranks of an NCCL program and runs every collective of
 * nccl.h through the NCCL library it is linked to (libcoll_nccl.so; the
 * real libnccl for the target nccl-conformance-nccl), comparing every byte
 * the call may and may not write with a reference computed on the host from
 * NCCL's documented semantics (docs.nvidia.com, "Collective Communication
 * Functions" and "In-place Operations"; where those are silent, NCCL's
 * source, named at the place). Rank 0 makes the unique id and hands it to
 * the others through a pipe.
 *
 * MODE: `host` (buffers from malloc: Coll serves them on the host, the real
 * NCCL does not take them); `device` (buffers from cudaMalloc, read and
 * written with cudaMemcpy: the stand-in CUDA runtime's on the emulated
 * device, a GPU's with the real CUDA runtime; rank r uses device r modulo
 * the device count); `failure-watchdog`, `failure-mismatch`,
 * `failure-late`, `failure-died`: a call Coll serves fails on purpose, and
 * the job goes on (failure(), below); `failure-shrink`: a rank is killed,
 * and the others revoke, shrink and go on (shrinkAfterLoss()); `device-failure-KIND`, the same with
 * the failing call on device buffers.
 *
 * UNDERNEATH: what runs the calls Coll does not: `standin` (the stand-in of
 * nccl_standin.c, which records calls and, unless COLL_STANDIN_COMPUTE is
 * set, computes nothing: such calls are checked to reach it with the
 * program's arguments and to leave every buffer as it was), `none` (no
 * real NCCL: such calls must fail with ncclInvalidUsage) or `real` (a real
 * NCCL: they are checked as any other).
 *
 * The matrix, on the whole communicator, a split with NCCL_SPLIT_NOCOLOR
 * (rank 0 left out, the others numbered backwards) and a communicator of
 * one rank: every collective; every type (fp8 included); every built-in op
 * (ncclAvg too) and ncclRedOpCreatePreMulSum's with the scalar on the host
 * and on the device; in place (NCCL's forms) and out of place; counts 0, 1,
 * 7, 13, 1031 and a large prime (with `huge`, 1048573 float32 elements
 * too, for the collectives that pipeline); roots first, middle and last;
 * calls and send/recv pairs inside
 * groups; NCCL's argument checks. Every buffer lies in one allocation with
 * guard bytes before, between and after, all filled with a pattern, and is
 * aligned to its element and no more: after the call, bytes the call must
 * not write (guards, inputs, recvbuff where NCCL leaves it alone) must
 * still hold it. A difference prints the call, its arguments, and the first
 * differing byte (its place, what it is and what it should be).
 *
 * Integer data are arbitrary bit patterns (sums and products wrap, as
 * NCCL's do); floating data are small integers, whose sums, products,
 * minima and maxima are exact in every type and order, so that results are
 * compared byte for byte. ncclAvg on floating types is NCCL's premultiplied
 * sum (each input times 1/nranks rounded to the type): compared within the
 * type's rounding.
 *
 * Exits 0 when every rank passed (and nothing of Coll's is left in
 * /dev/shm), 77 in device mode without a CUDA device.
 *
 *===----------------------------------------------------------------------===*/

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "NcclTestRanks.h"
#include "TimeScale.h"

static int myRank = -1;
static int failures = 0;
static int deviceMode = 0;
static int huge = 0; /* the optional last argument `huge` */
static enum { Standin, None, Real } underneath;

/* One line, written at once, so that the ranks' lines do not interleave. */
static void fail(int line, const char *fmt, ...) {
  char text[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  fprintf(stderr, "rank %d: FAIL %s:%d: %s\n", myRank, __FILE__, line, text);
  ++failures;
}
#define FAIL(...) fail(__LINE__, __VA_ARGS__)

#define OK(call)                                                                                   \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    if (r_ != ncclSuccess)                                                                         \
      FAIL("%s -> %d (%s): %s", #call, (int)r_, ncclGetErrorString(r_), ncclGetLastError(NULL));  \
  } while (0)

#define CUDA(call)                                                                                 \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      FAIL("%s -> %d", #call, (int)e_);                                                            \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/*===--- types and values -------------------------------------------------===*/

static const ncclDataType_t AllTypes[] = {ncclInt8,    ncclUint8,   ncclInt32,     ncclUint32,
                                          ncclInt64,   ncclUint64,  ncclFloat16,   ncclFloat32,
                                          ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
enum { NumTypes = sizeof AllTypes / sizeof *AllTypes };

static const char *typeName(ncclDataType_t t) {
  static const char *names[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",     "ncclUint32",
                                "ncclInt64",   "ncclUint64",  "ncclFloat16",   "ncclFloat32",
                                "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  return t >= 0 && t < ncclNumTypes ? names[t] : "?";
}

static size_t typeSize(ncclDataType_t t) {
  switch (t) {
  case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
  case ncclFloat16: case ncclBfloat16: return 2;
  case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
  default: return 8;
  }
}

static int isFloat(ncclDataType_t t) { return t >= ncclFloat16; }
static int isFp8(ncclDataType_t t) { return t == ncclFloat8e4m3 || t == ncclFloat8e5m2; }
static int isSigned(ncclDataType_t t) { return t == ncclInt8 || t == ncclInt32 || t == ncclInt64; }

static const char *opName(ncclRedOp_t op) {
  static const char *names[] = {"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"};
  return op >= 0 && op < ncclNumOps ? names[op] : "PreMulSum";
}

/* Floating encodings: every value written is a small integer (or, for
 * ncclAvg, the nearest value of the type), so rounding is to nearest even on
 * the bits dropped. */
static uint16_t toHalf(double v) {
  float f = (float)v;
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int exp = (int)((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (f == 0)
    return (uint16_t)sign;
  if (exp <= 0) { /* subnormal */
    mant |= 0x800000;
    int shift = 14 - exp;
    uint32_t h = mant >> shift, rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1)))
      ++h;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)exp << 10) | (mant >> 13), rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
    ++h;
  return (uint16_t)(sign | h);
}

static double fromHalf(uint16_t h) {
  int exp = (h >> 10) & 0x1f;
  double mant = h & 0x3ff;
  double v = exp == 0 ? ldexp(mant, -24) : ldexp(mant + 1024, exp - 25);
  return (h & 0x8000) ? -v : v;
}

static uint16_t toBf16(double v) {
  float f = (float)v;
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t rest = x & 0xffff, h = x >> 16;
  if (rest > 0x8000 || (rest == 0x8000 && (h & 1)))
    ++h;
  return (uint16_t)h;
}

static double fromBf16(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* fp8 (OCP e4m3 and e5m2): decoded by formula; encoded by finding the code
 * nearest the value (ties to the even code), which is exact for the small
 * integers written. */
static double fromFp8(uint8_t b, int e5m2) {
  const int mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  int exp = (b >> mbits) & (e5m2 ? 0x1f : 0xf);
  double mant = b & ((1 << mbits) - 1);
  double v = exp == 0 ? ldexp(mant, 1 - bias - mbits) : ldexp(mant + (1 << mbits), exp - bias - mbits);
  return (b & 0x80) ? -v : v;
}

static uint8_t nearestFp8(double v, int e5m2) {
  int best = 0;
  double bestErr = INFINITY;
  for (int c = 0; c < 256; ++c) {
    if (e5m2 ? ((c & 0x7c) == 0x7c) : ((c & 0x7f) == 0x7f))
      continue; /* NaN and infinities */
    double err = fabs(fromFp8((uint8_t)c, e5m2) - v);
    if (err < bestErr || (err == bestErr && !(c & 1))) {
      best = c;
      bestErr = err;
    }
  }
  return (uint8_t)best;
}

/* The small integers, which are most of what is written, from a table. */
static uint8_t toFp8(double v, int e5m2) {
  static int made[2];
  static uint8_t table[2][33];
  if (!made[e5m2]) {
    for (int i = -16; i <= 16; ++i)
      table[e5m2][i + 16] = nearestFp8(i, e5m2);
    made[e5m2] = 1;
  }
  if (v == (int)v && v >= -16 && v <= 16)
    return table[e5m2][(int)v + 16];
  return nearestFp8(v, e5m2);
}

static void encodeFloat(ncclDataType_t t, double v, void *dst) {
  switch (t) {
  case ncclFloat16: { uint16_t h = toHalf(v); memcpy(dst, &h, 2); break; }
  case ncclBfloat16: { uint16_t h = toBf16(v); memcpy(dst, &h, 2); break; }
  case ncclFloat32: { float f = (float)v; memcpy(dst, &f, 4); break; }
  case ncclFloat64: memcpy(dst, &v, 8); break;
  case ncclFloat8e4m3: *(uint8_t *)dst = toFp8(v, 0); break;
  case ncclFloat8e5m2: *(uint8_t *)dst = toFp8(v, 1); break;
  default: break;
  }
}

static double decodeFloat(ncclDataType_t t, const void *src) {
  switch (t) {
  case ncclFloat16: { uint16_t h; memcpy(&h, src, 2); return fromHalf(h); }
  case ncclBfloat16: { uint16_t h; memcpy(&h, src, 2); return fromBf16(h); }
  case ncclFloat32: { float f; memcpy(&f, src, 4); return f; }
  case ncclFloat64: { double d; memcpy(&d, src, 8); return d; }
  case ncclFloat8e4m3: return fromFp8(*(const uint8_t *)src, 0);
  case ncclFloat8e5m2: return fromFp8(*(const uint8_t *)src, 1);
  default: return 0;
  }
}

static uint64_t mix(uint64_t x) { /* splitmix64 */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Element `i` of rank `r`'s input to call number `seed`, written to `dst`.
 * Floating values are small integers: in [-8, 8], in [-2, 2] for products
 * and for fp8 (whose sums must stay exact). */
static void inputElement(ncclDataType_t t, ncclRedOp_t op, unsigned seed, int r, size_t i,
                         void *dst) {
  uint64_t x = mix(((uint64_t)seed << 40) ^ ((uint64_t)r << 32) ^ i);
  if (!isFloat(t)) {
    memcpy(dst, &x, typeSize(t)); /* little endian: the low bytes */
    return;
  }
  int small = op == ncclProd || isFp8(t) ? (int)(x % 5) - 2 : (int)(x % 17) - 8;
  encodeFloat(t, small, dst);
}

static uint64_t loadInt(ncclDataType_t t, const void *p) {
  uint64_t v = 0;
  memcpy(&v, p, typeSize(t));
  if (isSigned(t) && typeSize(t) < 8 && (v >> (8 * typeSize(t) - 1)) & 1)
    v |= ~0ull << (8 * typeSize(t)); /* sign-extended */
  return v;
}

/* The reduction of the inputs `in[0..n)` (one element each) by `op`, as NCCL
 * computes it: integers wrap, integer ncclAvg divides the wrapped sum
 * truncating towards zero (src/device/reduce_kernel.h, FuncSumPostDiv);
 * PreMulSum multiplies each input by `scalar` first. Writes the element to
 * `out`; returns the tolerance of the comparison (0: bit for bit). */
static double reduceElements(ncclDataType_t t, int op, double scalar, const void *const *in,
                             int n, void *out) {
  if (!isFloat(t)) {
    uint64_t acc = loadInt(t, in[0]);
    if (op >= ncclNumOps)
      acc *= (uint64_t)(int64_t)scalar;
    for (int r = 1; r < n; ++r) {
      uint64_t v = loadInt(t, in[r]);
      switch (op) {
      case ncclProd: acc *= v; break;
      case ncclMax:
      case ncclMin: {
        int less = isSigned(t) ? (int64_t)v < (int64_t)acc : v < acc;
        if (op == ncclMin ? less : (!less && v != acc))
          acc = v;
        break;
      }
      default: acc += op >= ncclNumOps ? v * (uint64_t)(int64_t)scalar : v; break;
      }
    }
    if (op == ncclAvg) {
      const size_t bits = 8 * typeSize(t);
      uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
      acc &= mask;
      if (isSigned(t)) {
        int64_t s = bits == 64 ? (int64_t)acc : (int64_t)(acc << (64 - bits)) >> (64 - bits);
        acc = (uint64_t)(s / n);
      } else {
        acc /= (uint64_t)n;
      }
    }
    memcpy(out, &acc, typeSize(t));
    return 0;
  }
  double acc = decodeFloat(t, in[0]) * (op >= ncclNumOps ? scalar : 1);
  for (int r = 1; r < n; ++r) {
    double v = decodeFloat(t, in[r]);
    switch (op) {
    case ncclProd: acc *= v; break;
    case ncclMax: acc = v > acc ? v : acc; break;
    case ncclMin: acc = v < acc ? v : acc; break;
    default: acc += op >= ncclNumOps ? v * scalar : v; break;
    }
  }
  if (op != ncclAvg) {
    encodeFloat(t, acc, out);
    return 0;
  }
  acc /= n;
  encodeFloat(t, acc, out);
  /* NCCL premultiplies by 1/n rounded to the type and sums in the type:
   * a few units of the type's last place at the inputs' magnitude (8). */
  switch (t) {
  case ncclFloat16: return 8 * ldexp(8.0, -10) * n;
  case ncclBfloat16: return 8 * ldexp(8.0, -7) * n;
  case ncclFloat32: return 8 * ldexp(8.0, -23) * n;
  case ncclFloat64: return 8 * ldexp(8.0, -52) * n;
  default: return 2 * n;
  }
}

/*===--- one call ---------------------------------------------------------===*/

enum Kind { AllReduce, Broadcast, Bcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter };
static const char *const KindNames[] = {"ncclAllReduce",     "ncclBroadcast", "ncclBcast",
                                        "ncclReduce",        "ncclAllGather", "ncclReduceScatter",
                                        "ncclAlltoAll",      "ncclGather",    "ncclScatter"};

/* Guard bytes before, between and after the buffers: 40 and the element's
 * size below 8, so that the buffers are aligned to their element (all NCCL
 * asks) and no more: an int8 buffer at an odd address, a half one at 2
 * mod 4, a float one at 4 mod 8, a double one at 8 mod 16. */
enum { Guard = 40 };
static size_t guardFor(size_t elemSize) { return Guard + (elemSize < 8 ? elemSize : 0); }

/* A call's memory: [guard][send][guard][recv][guard] out of place,
 * [guard][buffer][guard] in place. Offsets are in bytes into `image`. */
typedef struct {
  enum Kind kind;
  ncclDataType_t type;
  int op; /* ncclRedOp_t, or a PreMulSum op (then `scalar`) */
  double scalar;
  size_t count;
  int root;
  int inPlace;
  unsigned seed;
  /* layout */
  size_t guard, total, sendOff, sendBytes, recvOff, recvBytes;
  unsigned char *image;    /* host copy: what the memory holds */
  unsigned char *expected; /* what it must hold after the call */
  double *tolerance;       /* per element of recvbuff, or NULL: exact */
  void *mem;               /* the memory the call uses (device or host) */
} Call;

static int isReduction(enum Kind k) {
  return k == AllReduce || k == Reduce || k == ReduceScatter;
}
static int isRooted(enum Kind k) {
  return k == Broadcast || k == Bcast || k == Reduce || k == Gather || k == Scatter;
}

static unsigned char pattern(size_t offset, int rank) {
  return (unsigned char)(0xa5 ^ (offset * 7) ^ ((unsigned)rank << 4));
}

/* Sizes in elements of sendbuff and recvbuff as NCCL reads and writes them
 * (the larger of both for in place). */
static void sizes(const Call *c, int n, size_t *sendElems, size_t *recvElems) {
  const size_t k = c->count;
  switch (c->kind) {
  case AllGather: *sendElems = k; *recvElems = n * k; break;
  case ReduceScatter: *sendElems = n * k; *recvElems = k; break;
  case AlltoAll: *sendElems = n * k; *recvElems = n * k; break;
  case Gather: *sendElems = k; *recvElems = n * k; break;
  case Scatter: *sendElems = n * k; *recvElems = k; break;
  default: *sendElems = k; *recvElems = k; break;
  }
}

/* Lays the call out, fills its memory with the pattern and this rank's
 * input, and computes what it must hold afterwards. */
static void prepare(Call *c, int rank, int n, int reference) {
  const size_t es = typeSize(c->type);
  size_t sendElems, recvElems;
  sizes(c, n, &sendElems, &recvElems);
  c->sendBytes = sendElems * es;
  c->recvBytes = recvElems * es;
  const size_t G = c->guard = guardFor(es);
  if (c->inPlace) {
    /* NCCL's in-place forms: the larger buffer holds the smaller one at the
     * rank's block (allgather's sendbuff, reducescatter's recvbuff) or, for
     * gather and scatter (NCCL's send/recv of each block,
     * src/enqueue.cc taskAppend), at the root's block on the root and at
     * the rank's own block elsewhere. */
    const size_t big = sendElems > recvElems ? sendElems : recvElems;
    const int block = (c->kind == Gather || c->kind == Scatter) && rank == c->root ? c->root : rank;
    c->total = G + big * es + G;
    c->sendOff = c->recvOff = G;
    if (c->kind == AllGather || c->kind == Gather)
      c->sendOff = G + (size_t)block * c->count * es;
    if (c->kind == ReduceScatter || c->kind == Scatter)
      c->recvOff = G + (size_t)block * c->count * es;
  } else {
    c->sendOff = G;
    c->recvOff = G + c->sendBytes + G;
    c->total = c->recvOff + c->recvBytes + G;
  }
  c->image = malloc(c->total);
  c->expected = malloc(c->total);
  c->tolerance = NULL;
  for (size_t b = 0; b < c->total; ++b)
    c->image[b] = pattern(b, rank);
  /* This rank's input fills sendbuff (for in place, the part of the buffer
   * NCCL reads). A scatter's non-root reads nothing: in place its buffer
   * holds only the pattern. */
  const size_t inElems = c->inPlace && c->kind == Scatter && rank != c->root ? 0 : sendElems;
  for (size_t i = 0; i < inElems; ++i)
    inputElement(c->type, c->op, c->seed, rank, i, c->image + c->sendOff + i * es);
  memcpy(c->expected, c->image, c->total);

  /* What NCCL writes: recvbuff's elements, where this rank receives. */
  const size_t k = reference ? c->count : 0;
  unsigned char *out = c->expected + c->recvOff;
  unsigned char tmp[16];
  const void *ins[64];
  unsigned char *elems = malloc((size_t)n * 16);
  switch (c->kind) {
  case AllReduce:
  case Reduce:
  case ReduceScatter: {
    if (c->kind == Reduce && rank != c->root)
      break;
    const size_t base = c->kind == ReduceScatter ? (size_t)rank * k : 0;
    for (size_t i = 0; i < k; ++i) {
      for (int r = 0; r < n; ++r) {
        inputElement(c->type, c->op, c->seed, r, base + i, elems + r * 16);
        ins[r] = elems + r * 16;
      }
      double tol = reduceElements(c->type, c->op, c->scalar, ins, n, tmp);
      memcpy(out + i * es, tmp, es);
      if (tol > 0) {
        if (!c->tolerance)
          c->tolerance = calloc(k, sizeof(double));
        c->tolerance[i] = tol;
      }
    }
    break;
  }
  case Broadcast:
  case Bcast:
    for (size_t i = 0; i < k; ++i)
      inputElement(c->type, c->op, c->seed, c->root, i, out + i * es);
    break;
  case AllGather:
  case Gather:
    if (c->kind == Gather && rank != c->root)
      break;
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < k; ++i)
        inputElement(c->type, c->op, c->seed, r, i, out + (r * k + i) * es);
    break;
  case AlltoAll: /* block r of recvbuff: block `rank` of rank r's sendbuff */
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < k; ++i)
        inputElement(c->type, c->op, c->seed, r, (size_t)rank * k + i, out + (r * k + i) * es);
    break;
  case Scatter: /* the root's block `rank` */
    for (size_t i = 0; i < k; ++i)
      inputElement(c->type, c->op, c->seed, c->root, (size_t)rank * k + i, out + i * es);
    break;
  }
  free(elems);
  if (deviceMode) {
    CUDA(cudaMalloc(&c->mem, c->total));
    CUDA(cudaMemcpy(c->mem, c->image, c->total, cudaMemcpyHostToDevice));
  } else {
    c->mem = malloc(c->total);
    memcpy(c->mem, c->image, c->total);
  }
}

static void describe(const Call *c, char *text, size_t size) {
  char op[64] = "";
  if (isReduction(c->kind))
    snprintf(op, sizeof op, c->op < ncclNumOps ? ", %s" : ", %s of %g", opName((ncclRedOp_t)c->op),
             c->scalar);
  char root[32] = "";
  if (isRooted(c->kind))
    snprintf(root, sizeof root, ", root %d", c->root);
  snprintf(text, size, "%s(count %zu, %s%s%s, %s; seed %u)", KindNames[c->kind], c->count,
           typeName(c->type), op, root, c->inPlace ? "in place" : "out of place", c->seed);
}

static const char *placeOf(const Call *c, size_t b, size_t *rel) {
  if (b >= c->recvOff && b < c->recvOff + c->recvBytes) {
    *rel = b - c->recvOff;
    return "recvbuff";
  }
  if (b >= c->sendOff && b < c->sendOff + c->sendBytes) {
    *rel = b - c->sendOff;
    return "sendbuff";
  }
  *rel = b;
  if (b < c->guard)
    return "the guard before";
  if (b >= c->total - c->guard)
    return "the guard after";
  return c->inPlace ? "the buffer outside sendbuff and recvbuff" : "the guard between";
}

/* Compares the memory after the call with what it must hold. */
static int verify(Call *c) {
  unsigned char *got = malloc(c->total);
  if (deviceMode)
    CUDA(cudaMemcpy(got, c->mem, c->total, cudaMemcpyDeviceToHost));
  else
    memcpy(got, c->mem, c->total);
  const size_t es = typeSize(c->type);
  int ok = 1;
  for (size_t b = 0; b < c->total; ++b) {
    if (got[b] == c->expected[b])
      continue;
    size_t rel;
    const char *place = placeOf(c, b, &rel);
    if (c->tolerance && !strcmp(place, "recvbuff")) {
      size_t e = rel / es;
      double want = decodeFloat(c->type, c->expected + c->recvOff + e * es);
      double have = decodeFloat(c->type, got + c->recvOff + e * es);
      if (fabs(want - have) <= c->tolerance[e]) {
        b = c->recvOff + (e + 1) * es - 1; /* the element is within rounding */
        continue;
      }
    }
    char text[256];
    describe(c, text, sizeof text);
    FAIL("%s: first differing byte at %s + %zu (element %zu, byte %zu of it): 0x%02x, "
         "expected 0x%02x%s",
         text, place, rel, rel / es, rel % es, got[b], c->expected[b],
         strcmp(place, "recvbuff") ? " (must be left untouched)" : "");
    ok = 0;
    break;
  }
  free(got);
  return ok;
}

static void release(Call *c) {
  if (deviceMode)
    cudaFree(c->mem);
  else
    free(c->mem);
  free(c->image);
  free(c->expected);
  free(c->tolerance);
}

/* Issues the call as the program would. */
static ncclResult_t issue(const Call *c, ncclComm_t comm) {
  char *m = c->mem;
  void *send = m + c->sendOff, *recv = m + c->recvOff;
  const ncclRedOp_t op = (ncclRedOp_t)c->op;
  switch (c->kind) {
  case AllReduce: return ncclAllReduce(send, recv, c->count, c->type, op, comm, NULL);
  case Broadcast: return ncclBroadcast(send, recv, c->count, c->type, c->root, comm, NULL);
  case Bcast: return ncclBcast(recv, c->count, c->type, c->root, comm, NULL);
  case Reduce: return ncclReduce(send, recv, c->count, c->type, op, c->root, comm, NULL);
  case AllGather: return ncclAllGather(send, recv, c->count, c->type, comm, NULL);
  case ReduceScatter: return ncclReduceScatter(send, recv, c->count, c->type, op, comm, NULL);
  case AlltoAll: return ncclAlltoAll(send, recv, c->count, c->type, comm, NULL);
  case Gather: return ncclGather(send, recv, c->count, c->type, c->root, comm, NULL);
  case Scatter: return ncclScatter(send, recv, c->count, c->type, c->root, comm, NULL);
  }
  return ncclInternalError;
}

/*===--- what reaches the stand-in ---------------------------------------===*/

/* Whether the call Coll cannot run (fp8, a PreMulSum op) went underneath as
 * it must: to the stand-in with the program's arguments (its memory then
 * left as it was), or, without a real NCCL, failed with ncclInvalidUsage
 * naming the reason. Returns 1 when the call was handled this way. */
static int checkedUnderneath(Call *c, ncclComm_t comm) {
  if (underneath == Real)
    return 0;
  char text[256], line[256];
  describe(c, text, sizeof text);
  const int before = countOf(standinCalls(), KindNames[c->kind == Bcast ? Broadcast : c->kind]);
  ncclResult_t r = issue(c, comm);
  if (underneath == None) {
    if (r != ncclInvalidUsage ||
        !strstr(ncclGetLastError(comm), "the real NCCL has no communicator here"))
      FAIL("%s without a real NCCL: %d (%s), expected ncclInvalidUsage saying why there is none",
           text, (int)r, ncclGetLastError(comm));
  } else {
    if (r != ncclSuccess)
      FAIL("%s: %d (%s), expected the stand-in's ncclSuccess", text, (int)r,
           ncclGetLastError(comm));
    char *m = c->mem;
    snprintf(line, sizeof line, "send=%p recv=%p count=%zu type=%d", (void *)(m + c->sendOff),
             (void *)(m + c->recvOff), c->count, (int)c->type);
    const enum Kind real = c->kind == Bcast ? Broadcast : c->kind; /* ncclBcast is one */
    if (countOf(standinCalls(), KindNames[real]) != before + 1 || !strstr(standinCalls(), line))
      FAIL("%s did not reach the real NCCL as '%s ...'", text, line);
    memcpy(c->expected, c->image, c->total); /* the stand-in writes nothing */
    free(c->tolerance);
    c->tolerance = NULL;
  }
  if (underneath == Standin)
    verify(c);
  return 1;
}

/*===--- the matrix -------------------------------------------------------===*/

static unsigned nextSeed = 1;
static long callsMade = 0;

/* One call: prepared, issued, checked, freed. */
static void runCall(Call *c, ncclComm_t comm, int rank, int n) {
  c->seed = nextSeed++;
  /* A PreMulSum op is Coll's where no real NCCL is loaded */
  const int collRuns =
      !isFp8(c->type) && !(isReduction(c->kind) && c->op >= ncclNumOps && underneath != None);
  prepare(c, rank, n, collRuns || underneath == Real);
  ++callsMade;
  if (!collRuns && c->count > 0 && checkedUnderneath(c, comm)) {
    release(c);
    return;
  }
  ncclResult_t r = issue(c, comm);
  if (r != ncclSuccess) {
    char text[256];
    describe(c, text, sizeof text);
    FAIL("%s -> %d (%s): %s", text, (int)r, ncclGetErrorString(r), ncclGetLastError(comm));
  } else {
    if (deviceMode)
      CUDA(cudaStreamSynchronize(NULL));
    verify(c);
  }
  release(c);
}

static const ncclRedOp_t BuiltinOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

/* Every collective, type, op, count, root and in-place form on `comm`. */
static void matrix(ncclComm_t comm, int rank, int n, const size_t *counts, int ncounts,
                   const ncclDataType_t *types, int ntypes) {
  int roots[3] = {0, n / 2, n - 1};
  int nroots = n == 1 ? 1 : (n == 2 ? 2 : 3);
  if (n == 2)
    roots[1] = 1;
  for (int t = 0; t < ntypes; ++t)
    for (int ci = 0; ci < ncounts; ++ci)
      for (int kind = AllReduce; kind <= Scatter; ++kind)
        for (int inPlace = 0; inPlace < 2; ++inPlace) {
          if (kind == AlltoAll && inPlace)
            continue; /* NCCL: sends and receives of the same buffer race */
          if (kind == Bcast && !inPlace)
            continue; /* always in place */
          const int nops = isReduction((enum Kind)kind) ? 5 : 1;
          for (int o = 0; o < nops; ++o)
            for (int ri = 0; ri < (isRooted((enum Kind)kind) ? nroots : 1); ++ri) {
              Call c = {(enum Kind)kind, types[t], BuiltinOps[o], 1, counts[ci], roots[ri],
                        inPlace};
              runCall(&c, comm, rank, n);
            }
        }
}

/* ncclRedOpCreatePreMulSum with the scalar on the host and on the device. */
static void preMulSum(ncclComm_t comm, int rank, int n) {
  const ncclDataType_t types[] = {ncclFloat32, ncclInt32, ncclBfloat16};
  for (int t = 0; t < 3; ++t)
    for (int residence = 0; residence < 2; ++residence) {
      unsigned char scalar[8];
      encodeFloat(isFloat(types[t]) ? types[t] : ncclFloat64, 2, scalar);
      if (!isFloat(types[t])) {
        int32_t two = 2;
        memcpy(scalar, &two, 4);
      }
      void *where = scalar;
      if (residence == 1) { /* in device memory, whatever the buffers' mode */
        CUDA(cudaMalloc(&where, 8));
        CUDA(cudaMemcpy(where, scalar, 8, cudaMemcpyHostToDevice));
      }
      ncclRedOp_t op;
      ncclResult_t r = ncclRedOpCreatePreMulSum(
          &op, where, types[t], residence ? ncclScalarDevice : ncclScalarHostImmediate, comm);
      /* Without a real NCCL the op is Coll's (its inputs multiplied on the
       * host), and the calls below are checked against NCCL's semantics;
       * with one, the real NCCL's. */
      if (r != ncclSuccess) {
        FAIL("ncclRedOpCreatePreMulSum(%s): %d (%s)", typeName(types[t]), (int)r,
             ncclGetLastError(comm));
      } else {
        const size_t counts[] = {1, 13, 1031};
        for (int ci = 0; ci < 3; ++ci)
          for (int kind = AllReduce; kind <= ReduceScatter; ++kind)
            if (isReduction((enum Kind)kind))
              for (int inPlace = 0; inPlace < 2; ++inPlace) {
                Call c = {(enum Kind)kind, types[t], op, 2, counts[ci], n - 1, inPlace};
                runCall(&c, comm, rank, n);
              }
        OK(ncclRedOpDestroy(op, comm));
      }
      if (residence == 1)
        cudaFree(where);
    }
}

/* Calls inside one group: collectives of several kinds, and send/receive
 * pairs (a ring each way, to itself too), checked after ncclGroupEnd. */
static void groups(ncclComm_t comm, int rank, int n) {
  const size_t counts[] = {0, 1, 1031};
  for (int ci = 0; ci < 3; ++ci) {
    const size_t k = counts[ci];
    Call calls[4] = {
        {AllReduce, ncclInt32, ncclSum, 1, k, 0, 0},
        {AllGather, ncclFloat32, ncclSum, 1, k, 0, 1},
        {Broadcast, ncclInt64, ncclSum, 1, k, n - 1, 0},
        {ReduceScatter, ncclBfloat16, ncclMax, 1, k, 0, 1},
    };
    for (int i = 0; i < 4; ++i) {
      calls[i].seed = nextSeed++;
      prepare(&calls[i], rank, n, 1);
    }
    /* send/recv: to rank+1 and rank-1 and to itself, each from its own
     * block of one buffer, into its own block of another */
    const int peers[3] = {(rank + 1) % n, (rank + n - 1) % n, rank};
    const size_t es = 4, G = guardFor(es);
    const size_t bytes = G + 3 * k * es + G;
    unsigned char *sendImage = malloc(bytes), *recvImage = malloc(bytes), *want = malloc(bytes);
    for (size_t b = 0; b < bytes; ++b)
      sendImage[b] = recvImage[b] = pattern(b, rank);
    const unsigned seed = nextSeed++;
    for (int p = 0; p < 3; ++p)
      for (size_t i = 0; i < k; ++i)
        inputElement(ncclInt32, ncclSum, seed, rank * 8 + p, i, sendImage + G + (p * k + i) * es);
    memcpy(want, recvImage, bytes);
    /* block p receives from the peer that sends to this rank in direction p;
     * send/recv on device memory is the real NCCL's where there is one
     * (docs/DROPIN.md), which the stand-in only records; without one Coll
     * serves it, staged through host memory */
    const int from[3] = {(rank + n - 1) % n, (rank + 1) % n, rank};
    const char *computes = getenv("COLL_STANDIN_COMPUTE");
    const int p2pUnderneath =
        deviceMode && underneath == Standin && !(computes && *computes && strcmp(computes, "0"));
    const int sendsBefore = countOf(standinCalls(), "ncclSend rank=");
    for (int p = 0; p < 3 && !p2pUnderneath; ++p)
      for (size_t i = 0; i < k; ++i)
        inputElement(ncclInt32, ncclSum, seed, from[p] * 8 + p, i, want + G + (p * k + i) * es);
    char *sendMem, *recvMem;
    if (deviceMode) {
      CUDA(cudaMalloc((void **)&sendMem, bytes));
      CUDA(cudaMalloc((void **)&recvMem, bytes));
      CUDA(cudaMemcpy(sendMem, sendImage, bytes, cudaMemcpyHostToDevice));
      CUDA(cudaMemcpy(recvMem, recvImage, bytes, cudaMemcpyHostToDevice));
    } else {
      sendMem = malloc(bytes);
      recvMem = malloc(bytes);
      memcpy(sendMem, sendImage, bytes);
      memcpy(recvMem, recvImage, bytes);
    }
    OK(ncclGroupStart());
    for (int i = 0; i < 2; ++i)
      OK(issue(&calls[i], comm));
    for (int p = 0; p < 3; ++p) {
      OK(ncclSend(sendMem + G + p * k * es, k, ncclInt32, peers[p], comm, NULL));
      OK(ncclRecv(recvMem + G + p * k * es, k, ncclInt32, from[p], comm, NULL));
    }
    for (int i = 2; i < 4; ++i)
      OK(issue(&calls[i], comm));
    ncclResult_t r = ncclGroupEnd();
    if (r != ncclSuccess)
      FAIL("a group of 4 collectives and 3 send/recv pairs of count %zu: %d (%s)", k, (int)r,
           ncclGetLastError(NULL));
    if (deviceMode)
      CUDA(cudaStreamSynchronize(NULL));
    callsMade += 10;
    for (int i = 0; i < 4; ++i) {
      if (r == ncclSuccess)
        verify(&calls[i]);
      release(&calls[i]);
    }
    if (p2pUnderneath && k > 0 && countOf(standinCalls(), "ncclSend rank=") != sendsBefore + 3)
      FAIL("grouped ncclSend on device memory of count %zu did not reach the real NCCL", k);
    unsigned char *got = malloc(bytes), *sent = malloc(bytes);
    if (deviceMode) {
      CUDA(cudaMemcpy(got, recvMem, bytes, cudaMemcpyDeviceToHost));
      CUDA(cudaMemcpy(sent, sendMem, bytes, cudaMemcpyDeviceToHost));
    } else {
      memcpy(got, recvMem, bytes);
      memcpy(sent, sendMem, bytes);
    }
    for (size_t b = 0; r == ncclSuccess && b < bytes; ++b)
      if (got[b] != want[b] || sent[b] != sendImage[b]) {
        FAIL("grouped ncclSend/ncclRecv of count %zu ncclInt32 to and from ranks %d, %d and %d: "
             "first differing byte at %s + %zu: 0x%02x, expected 0x%02x",
             k, peers[0], peers[1], peers[2], got[b] != want[b] ? "the receive buffer" : "the send buffer", b,
             got[b] != want[b] ? got[b] : sent[b], got[b] != want[b] ? want[b] : sendImage[b]);
        break;
      }
    free(got);
    free(sent);
    if (deviceMode) {
      cudaFree(sendMem);
      cudaFree(recvMem);
    } else {
      free(sendMem);
      free(recvMem);
    }
    free(sendImage);
    free(recvImage);
    free(want);
  }
}

/* Ungrouped ncclSend/ncclRecv on device memory without a real NCCL, which
 * Coll serves: around the ring, even ranks sending first and odd ones
 * receiving first (as a program must order blocking calls), at a count
 * that fits a connection's slots and one that does not. */
static void ungroupedDeviceP2P(ncclComm_t comm, int rank, int n) {
  if (!deviceMode || underneath != None || n < 2)
    return;
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  const size_t counts[] = {7, 1 << 20};
  for (int c = 0; c < 2; ++c) {
    const size_t k = counts[c], bytes = k * sizeof(int32_t);
    int32_t *mine = malloc(bytes), *got = malloc(bytes);
    for (size_t i = 0; i < k; ++i)
      mine[i] = (int32_t)(rank * 1000003 + i);
    char *sendMem, *recvMem;
    CUDA(cudaMalloc((void **)&sendMem, bytes));
    CUDA(cudaMalloc((void **)&recvMem, bytes));
    CUDA(cudaMemcpy(sendMem, mine, bytes, cudaMemcpyHostToDevice));
    memset(got, 0x5a, bytes);
    CUDA(cudaMemcpy(recvMem, got, bytes, cudaMemcpyHostToDevice));
    if (rank % 2 == 0) {
      OK(ncclSend(sendMem, k, ncclInt32, next, comm, NULL));
      OK(ncclRecv(recvMem, k, ncclInt32, prev, comm, NULL));
    } else {
      OK(ncclRecv(recvMem, k, ncclInt32, prev, comm, NULL));
      OK(ncclSend(sendMem, k, ncclInt32, next, comm, NULL));
    }
    CUDA(cudaStreamSynchronize(NULL));
    callsMade += 2;
    CUDA(cudaMemcpy(got, recvMem, bytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < k; ++i)
      if (got[i] != (int32_t)(prev * 1000003 + i)) {
        FAIL("ungrouped ncclRecv of count %zu from rank %d on device memory: element %zu is %d, "
             "expected %d", k, prev, i, (int)got[i], (int)(prev * 1000003 + i));
        break;
      }
    cudaFree(sendMem);
    cudaFree(recvMem);
    free(mine);
    free(got);
  }
}

/* NCCL's argument checks (src/misc/argcheck.cc, ArgsCheck): a root or
 * peer out of range, a datatype or op that does not exist, an op of
 * ncclRedOpCreatePreMulSum already destroyed: ncclInvalidArgument, and
 * nothing touched. And the buffers NCCL ignores may be NULL: a broadcast's
 * and a scatter's sendbuff off the root, a reduce's and a gather's
 * recvbuff off the root. (NCCL checks pointers only with NCCL_CHECK_POINTERS;
 * Coll refuses a NULL buffer it would use with ncclInvalidArgument.) */
static void arguments(ncclComm_t comm, int rank, int n) {
  int32_t in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8 * 8];
  memset(out, 0x5a, sizeof out);
  struct {
    const char *what;
    ncclResult_t result;
  } bad[] = {
      {"ncclBroadcast root n", ncclBroadcast(in, out, 8, ncclInt32, n, comm, NULL)},
      {"ncclReduce root -1", ncclReduce(in, out, 8, ncclInt32, ncclSum, -1, comm, NULL)},
      {"ncclGather root n", ncclGather(in, out, 8, ncclInt32, n, comm, NULL)},
      {"ncclScatter root n", ncclScatter(in, out, 8, ncclInt32, n, comm, NULL)},
      {"ncclSend peer n", ncclSend(in, 8, ncclInt32, n, comm, NULL)},
      {"ncclRecv peer -1", ncclRecv(out, 8, ncclInt32, -1, comm, NULL)},
      {"ncclAllReduce datatype ncclNumTypes",
       ncclAllReduce(in, out, 8, (ncclDataType_t)ncclNumTypes, ncclSum, comm, NULL)},
      {"ncclAllGather datatype -1", ncclAllGather(in, out, 8, (ncclDataType_t)-1, comm, NULL)},
      {"ncclAllReduce op ncclNumOps",
       ncclAllReduce(in, out, 8, ncclInt32, (ncclRedOp_t)ncclNumOps, comm, NULL)},
      {"ncclReduceScatter op -1",
       ncclReduceScatter(in, out, 1, ncclInt32, (ncclRedOp_t)-1, comm, NULL)},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; ++i)
    if (bad[i].result != ncclInvalidArgument)
      FAIL("%s: %d, expected ncclInvalidArgument (%s)", bad[i].what, (int)bad[i].result,
           ncclGetLastError(comm));
  for (size_t b = 0; b < sizeof out; ++b)
    if (((unsigned char *)out)[b] != 0x5a) {
      FAIL("a call that failed its checks wrote recvbuff + %zu", b);
      break;
    }
  /* NCCL's conventions: closing a NULL communicator succeeds (teardown code
     relies on it), and ncclGetLastError gives the newest message of the
     process whatever communicator it is passed (NCCL ignores it). The
     message texts differ between NCCL and Coll; both name the call. */
  const struct {
    const char *what;
    ncclResult_t result;
  } nulls[] = {{"ncclCommDestroy(NULL)", ncclCommDestroy(NULL)},
               {"ncclCommFinalize(NULL)", ncclCommFinalize(NULL)},
               {"ncclCommAbort(NULL)", ncclCommAbort(NULL)},
               {"ncclCommRevoke(NULL, 0)", ncclCommRevoke(NULL, 0)}};
  for (size_t i = 0; i < sizeof nulls / sizeof *nulls; ++i)
    if (nulls[i].result != ncclSuccess)
      FAIL("%s: %d (%s), expected ncclSuccess as NCCL's", nulls[i].what, (int)nulls[i].result,
           ncclGetLastError(NULL));
  const struct {
    const char *what, *names;
    ncclResult_t expected;
  } newest[] = {{"ncclRedOpDestroy(ncclSum)", "ncclRedOpDestroy", ncclInvalidArgument},
                {"ncclGroupEnd without ncclGroupStart", "ncclGroupEnd", ncclInvalidUsage},
                {"ncclAllReduce on a NULL comm", "ncclAllReduce", ncclInvalidArgument},
                {"ncclBroadcast root n", "ncclBroadcast", ncclInvalidArgument}};
  for (size_t i = 0; i < sizeof newest / sizeof *newest; ++i) {
    ncclResult_t r;
    switch (i) {
    case 0: r = ncclRedOpDestroy(ncclSum, comm); break;
    case 1: r = ncclGroupEnd(); break;
    case 2: r = ncclAllReduce(in, out, 8, ncclInt32, ncclSum, NULL, NULL); break;
    default: r = ncclBroadcast(in, out, 8, ncclInt32, n, comm, NULL); break;
    }
    if (r != newest[i].expected)
      FAIL("%s: %d, expected %d", newest[i].what, (int)r, (int)newest[i].expected);
    for (int asked = 0; asked < 2; ++asked) {
      const char *last = ncclGetLastError(asked ? NULL : comm);
      if (!last || !strstr(last, newest[i].names))
        FAIL("after %s, ncclGetLastError(%s) gives \"%s\", not the newest message", newest[i].what,
             asked ? "NULL" : "comm", last ? last : "(null)");
    }
  }
  if (deviceMode)
    return; /* the NULL buffers below are host calls */
  const int root = n - 1;
  const int32_t mine = rank + 100;
  int32_t got = -1, all[8];
  OK(ncclBroadcast(rank == root ? &mine : NULL, &got, 1, ncclInt32, root, comm, NULL));
  if (got != root + 100)
    FAIL("ncclBroadcast with a NULL sendbuff off the root gave %d", (int)got);
  got = -1;
  OK(ncclReduce(&mine, rank == root ? &got : NULL, 1, ncclInt32, ncclSum, root, comm, NULL));
  if (rank == root && got != n * 100 + n * (n - 1) / 2)
    FAIL("ncclReduce with NULL recvbuffs off the root gave %d", (int)got);
  OK(ncclGather(&mine, rank == root ? all : NULL, 1, ncclInt32, root, comm, NULL));
  for (int r = 0; rank == root && r < n; ++r)
    if (all[r] != r + 100)
      FAIL("ncclGather with NULL recvbuffs off the root: element %d is %d", r, (int)all[r]);
  for (int r = 0; r < n; ++r)
    all[r] = 200 + r;
  got = -1;
  OK(ncclScatter(rank == root ? all : NULL, &got, 1, ncclInt32, root, comm, NULL));
  if (got != 200 + rank)
    FAIL("ncclScatter with a NULL sendbuff off the root gave %d", (int)got);
}

/*===--- driver -----------------------------------------------------------===*/

static ncclComm_t init(int rank, int n, int idFd[2]) {
  ncclUniqueId id;
  if (rank == 0) {
    OK(ncclGetUniqueId(&id));
    for (int i = 1; i < n; ++i)
      if (write(idFd[1], &id, sizeof id) != sizeof id)
        FAIL("cannot pass the id");
  } else if (read(idFd[0], &id, sizeof id) != sizeof id) {
    FAIL("cannot read the id");
  }
  int devices = 1;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1)
    devices = 1;
  cudaSetDevice(deviceMode ? rank % devices : rank); /* the stand-in has 8 */
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRank(&comm, n, id, rank);
  if (r != ncclSuccess || !comm) {
    FAIL("ncclCommInitRank -> %d: %s", (int)r, ncclGetLastError(NULL));
    exit(1);
  }
  return comm;
}

static void conformance(int rank, int n, int idFd[2]) {
  ncclComm_t comm = init(rank, n, idFd);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  const size_t hostCounts[] = {0, 1, 7, 13, 1031, 65537};
  const size_t deviceCounts[] = {0, 1, 13, 1031, 16411};
  const ncclDataType_t deviceTypes[] = {ncclInt8, ncclUint32, ncclInt64, ncclFloat16, ncclFloat32,
                                        ncclFloat64, ncclBfloat16, ncclFloat8e4m3};
  if (deviceMode) {
    matrix(comm, rank, n, deviceCounts, 5, deviceTypes, 8);
  } else {
    matrix(comm, rank, n, hostCounts, 6, AllTypes, NumTypes);
    /* `huge`: a count past the algorithms' larger chunks and pipelines (a
     * prime), float32 sums, in place and out of place, for the collectives
     * that pipeline (each call costs as much as a hundred others here) */
    const enum Kind hugeKinds[] = {AllReduce, ReduceScatter, AllGather, Broadcast, Reduce};
    for (int k = 0; huge && k < 5; ++k)
      for (int inPlace = 0; inPlace < 2; ++inPlace) {
        Call c = {hugeKinds[k], ncclFloat32, ncclSum, 1, 1048573, n - 1, inPlace};
        runCall(&c, comm, rank, n);
      }
  }
  preMulSum(comm, rank, n);
  groups(comm, rank, n);
  ungroupedDeviceP2P(comm, rank, n);
  arguments(comm, rank, n);

  /* A split: rank 0 passes NCCL_SPLIT_NOCOLOR and gets NULL; the others,
   * keyed backwards, are numbered backwards. */
  ncclComm_t sub = (ncclComm_t)(uintptr_t)1;
  OK(ncclCommSplit(comm, rank == 0 ? NCCL_SPLIT_NOCOLOR : 1, n - rank, &sub, NULL));
  const size_t subCounts[] = {0, 1, 13, 1031};
  const ncclDataType_t subTypes[] = {ncclUint8, ncclInt32, ncclFloat16, ncclFloat64};
  if (rank == 0) {
    if (sub != NULL)
      FAIL("ncclCommSplit with NCCL_SPLIT_NOCOLOR gave a communicator");
  } else if (sub) {
    int subRank = -1, subCount = -1;
    OK(ncclCommUserRank(sub, &subRank));
    OK(ncclCommCount(sub, &subCount));
    if (subRank != n - 1 - rank || subCount != n - 1)
      FAIL("split: rank %d of %d, expected %d of %d", subRank, subCount, n - 1 - rank, n - 1);
    matrix(sub, subRank, subCount, subCounts, 4, subTypes, 4);
    groups(sub, subRank, subCount);
    OK(ncclCommDestroy(sub));
  } else {
    FAIL("ncclCommSplit gave no communicator to rank %d", rank);
  }

  /* A communicator of one rank: NCCL copies (and ncclAvg divides by 1). */
  ncclComm_t alone = NULL;
  OK(ncclCommSplit(comm, rank, 0, &alone, NULL));
  if (alone) {
    const size_t aloneCounts[] = {0, 7, 1031};
    const ncclDataType_t aloneTypes[] = {ncclInt8, ncclFloat32, ncclUint64};
    matrix(alone, 0, 1, aloneCounts, 3, aloneTypes, 3);
    OK(ncclCommDestroy(alone));
  }

  if (underneath == Standin) {
    /* Nothing but fp8 and PreMulSum calls (and send/recv on device memory)
     * went underneath. */
    const char *calls = standinCalls();
    for (const char *line = calls; *line;) {
      const char *eol = strchr(line, '\n');
      const int len = (int)(eol ? eol - line : (long)strlen(line));
      const char *typeAt = strstr(line, " type="), *opAt = strstr(line, " op=");
      const int collective = !strncmp(line, "ncclAllReduce ", 14) || !strncmp(line, "ncclBroadcast ", 14) ||
                             !strncmp(line, "ncclReduce ", 11) || !strncmp(line, "ncclAllGather ", 14) ||
                             !strncmp(line, "ncclReduceScatter ", 18) || !strncmp(line, "ncclAlltoAll ", 13) ||
                             !strncmp(line, "ncclGather ", 11) || !strncmp(line, "ncclScatter ", 12) ||
                             (!deviceMode && (!strncmp(line, "ncclSend ", 9) ||
                                              !strncmp(line, "ncclRecv ", 9)));
      if (collective && typeAt && typeAt < line + len) {
        const int type = atoi(typeAt + 6);
        const int op = opAt && opAt < line + len ? atoi(opAt + 4) : 0;
        if (type != ncclFloat8e4m3 && type != ncclFloat8e5m2 && op < ncclNumOps) {
          FAIL("a call Coll serves reached the real NCCL: %.*s", len, line);
          break;
        }
      }
      line += len + (eol ? 1 : 0);
    }
  }
  OK(ncclCommFinalize(comm));
  OK(ncclCommDestroy(comm));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (rank == 0)
    printf("rank 0: %ld calls checked in %.1f s\n", callsMade,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
}

/*===--- a failed call never breaks the job -------------------------------===*/

/* A call Coll serves fails on purpose (`how`): `watchdog`, the last rank
 * comes to it three watchdog periods late (COLL_WATCHDOG_MS), so the others
 * stop at their watchdog and it meets their stop; `mismatch`, rank 0 passes
 * another count than the others. The call must fail on every rank with one
 * of NCCL's errors. Then, with a real NCCL underneath (the stand-in with
 * COLL_STANDIN_COMPUTE=1, which computes), 100 calls of every kind must be
 * right, on the real NCCL, and the communicator's async error ncclSuccess;
 * without one, every later call fails with the failed call's error, which
 * the async error reports. `late`: a reduce that rank 1 finishes while the
 * others fail it (below). `died`: the last rank exits before the call;
 * every later call goes to the real NCCL (the stand-in, which does not
 * compute, records them). */
static void failure(int rank, int n, int idFd[2], const char *how) {
  ncclComm_t comm = init(rank, n, idFd);
  for (int i = 0; i < 3; ++i) { /* Coll serves these */
    Call c = {AllReduce, ncclInt32, ncclSum, 1, 1031, 0, i % 2};
    runCall(&c, comm, rank, n);
  }
  const int before = countOf(standinCalls(), "ncclAllReduce rank=");
  int32_t hostIn[16] = {0}, hostOut[16];
  int32_t *in = hostIn, *out = hostOut;
  if (deviceMode) { /* the planted call on device buffers too */
    CUDA(cudaMalloc((void **)&in, sizeof hostIn));
    CUDA(cudaMalloc((void **)&out, sizeof hostOut));
    CUDA(cudaMemcpy(in, hostIn, sizeof hostIn, cudaMemcpyHostToDevice));
  }
  ncclResult_t r;
  if (!strcmp(how, "watchdog")) {
    const char *ms = getenv("COLL_WATCHDOG_MS");
    if (rank == n - 1)
      usleep((useconds_t)(3 * (ms ? atoi(ms) : 5000)) * 1000u);
    r = ncclAllReduce(in, out, 16, ncclInt32, ncclSum, comm, NULL);
  } else if (!strcmp(how, "late")) {
    /* A reduce to rank 0 with the last rank late: rank 0 stops at its
     * watchdog, the last rank meets the stop (or, where rank 1's watchdog
     * in the next call fired first, finishes the reduce; below), and rank 1 (a leaf of the
     * binomial tree, n >= 3) has sent its part and returned: it meets the
     * stop at its next call. The ranks are then a call apart: they agree,
     * and the next call fails on ranks 0 and n-1 too, so that the calls
     * after it are in step again. */
    const char *ms = getenv("COLL_WATCHDOG_MS");
    if (rank == n - 1)
      usleep((useconds_t)(3 * (ms ? atoi(ms) : 5000)) * 1000u);
    r = ncclReduce(in, out, 16, ncclInt32, ncclSum, 0, comm, NULL);
    const ncclResult_t next = ncclAllReduce(in, out, 16, ncclInt32, ncclSum, comm, NULL);
    if (rank == 1 && r != ncclSuccess)
      FAIL("rank 1 (a leaf) should have finished the reduce: %d (%s)", (int)r,
           ncclGetLastError(comm));
    if (next == ncclSuccess)
      FAIL("the call after the failed reduce succeeded on rank %d: the ranks are out of step",
           rank);
    if (rank == 1) {
      r = next; /* its failed call */
    } else if (r == ncclSuccess && rank == n - 1) {
      /* Rank 1's watchdog, in the next call, may fire before rank 0's in
       * the reduce (a loaded machine): then the failure recorded is the
       * next call's, and the late rank, behind it, completes the reduce as
       * a leaf (its part sent) as rank 1 did, and fails the next call with
       * the others. Either way the ranks are in step after it. */
      r = next;
    } else if (r == ncclSuccess) {
      FAIL("the failed reduce succeeded on rank %d", rank);
    }
    printf("rank %d: the reduce returned %d, the next call %d: %s\n", rank, (int)r, (int)next,
           ncclGetLastError(comm));
  } else if (!strcmp(how, "died")) {
    /* Before the call the others make, once they are done with the calls
     * before it: a rank still finishing the third call when the death is
     * seen may fail that call instead (the death is announced at once),
     * which a loaded machine made happen once in the whole suite's run. */
    if (rank == n - 1) {
      usleep(300 * 1000);
      _exit(0);
    }
    r = ncclAllReduce(in, out, 16, ncclInt32, ncclSum, comm, NULL);
  } else {
    r = ncclAllReduce(in, out, rank == 0 ? 15 : 16, ncclInt32, ncclSum, comm, NULL);
  }
  if (strcmp(how, "late") && strcmp(how, "died")) {
    /* A rank may finish the call the others fail (on the emulated device
     * the late rank finds its peers' data already sent): its next call
     * fails instead, and the others', by the ranks' agreement; where every
     * rank failed the call, the next one runs on the real NCCL. */
    const ncclResult_t next = ncclAllReduce(in, out, 16, ncclInt32, ncclSum, comm, NULL);
    if (r == ncclSuccess) {
      printf("rank %d: finished the call the others failed; the next one returned %d\n", rank,
             (int)next);
      r = next;
    }
  }
  const char *why = ncclGetLastError(comm);
  if (r != ncclRemoteError && r != ncclInvalidUsage && r != ncclInternalError)
    FAIL("the planted failure (%s) returned %d (%s), not one of NCCL's errors", how, (int)r, why);
  /* (Then the ranks' agreement is an allreduce on the real NCCL, and so,
   * where every rank failed the call, is the next call.) */
  if (!strcmp(how, "died") && countOf(standinCalls(), "ncclAllReduce rank=") != before)
    FAIL("the planted failure (%s) reached the real NCCL", how);
  if (rank == 0)
    printf("rank 0: the planted failure (%s) returned %s: %s\n", how, ncclGetErrorString(r), why);
  if (deviceMode) {
    cudaFree(in);
    cudaFree(out);
  }
  const ncclResult_t first = r;
  ncclResult_t async = ncclInternalError;
  if (!strcmp(how, "died")) {
    /* The real NCCL takes every later call and meets the dead peer as it
     * would without Coll (the stand-in, which does not compute, returns). */
    for (int kind = AllReduce; kind <= Scatter; ++kind) {
      Call c = {(enum Kind)kind, ncclInt32, ncclSum, 1, 7, 0, kind == Bcast};
      c.seed = nextSeed++;
      prepare(&c, rank, n, 0);
      const enum Kind real = kind == Bcast ? Broadcast : (enum Kind)kind;
      const int reached = countOf(standinCalls(), KindNames[real]);
      OK(issue(&c, comm));
      if (countOf(standinCalls(), KindNames[real]) != reached + 1)
        FAIL("%s after a peer died did not go to the real NCCL", KindNames[kind]);
      release(&c);
    }
    OK(ncclCommGetAsyncError(comm, &async));
    if (async != ncclSuccess)
      FAIL("ncclCommGetAsyncError gave %d: the real NCCL's is the communicator's", (int)async);
    OK(ncclCommAbort(comm));
    return;
  }
  if (underneath == None) {
    for (int i = 0; i < 10; ++i) {
      Call c = {(enum Kind)(i % (Scatter + 1)), ncclFloat32, ncclSum, 1, 7, 0, 0};
      c.seed = nextSeed++;
      prepare(&c, rank, n, 0);
      r = issue(&c, comm);
      if (r != first || !strstr(ncclGetLastError(comm), "there is no real NCCL to take its calls"))
        FAIL("%s after the failure without a real NCCL: %d (%s), expected %d", KindNames[c.kind],
             (int)r, ncclGetLastError(comm), (int)first);
      verify(&c); /* nothing touched */
      release(&c);
    }
    OK(ncclCommGetAsyncError(comm, &async));
    if (async != first)
      FAIL("ncclCommGetAsyncError gave %d after the failure, expected %d", (int)async, (int)first);
    OK(ncclCommDestroy(comm));
    return;
  }
  const ncclDataType_t types[] = {ncclInt8,  ncclUint8,   ncclInt32,   ncclUint32, ncclInt64,
                                  ncclUint64, ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16};
  const long calls = callsMade;
  for (int i = 0; i < 100; ++i) {
    if (i % 10 == 0) /* the first: the ranks agree at its ncclGroupEnd */
      groups(comm, rank, n);
    for (int kind = AllReduce; kind <= Scatter; ++kind) {
      const int inPlace = kind == Bcast || (kind != AlltoAll && i % 2);
      Call c = {(enum Kind)kind, types[(i + kind) % 10], BuiltinOps[(i + kind) % 5], 1,
                1 + (size_t)(i * 37 + kind) % 1031, (i + kind) % n, inPlace};
      runCall(&c, comm, rank, n);
    }
  }
  if (countOf(standinCalls(), "ncclAllReduce rank=") < before + 100)
    FAIL("the calls after the failure did not go to the real NCCL (%d allreduces reached it)",
         countOf(standinCalls(), "ncclAllReduce rank=") - before);
  OK(ncclCommGetAsyncError(comm, &async));
  if (async != ncclSuccess)
    FAIL("ncclCommGetAsyncError gave %d after the communicator went to the real NCCL",
         (int)async);
  if (rank == 0)
    printf("rank 0: %ld calls right after the failure\n", callsMade - calls);
  OK(ncclCommFinalize(comm));
  OK(ncclCommDestroy(comm));
  /* One WARN named the failure (this rank's log: COLL_DEBUG_FILE, main). */
  char path[256], line[4096];
  snprintf(path, sizeof path, "%s.%d", getenv("COLL_CONFORMANCE_LOG"), (int)getpid());
  FILE *log = fopen(path, "r");
  int said = 0;
  while (log && fgets(line, sizeof line, log))
    said += strstr(line, "WARN Coll stops serving this communicator after its call #") != NULL;
  if (log)
    fclose(log);
  if (said != 1)
    FAIL("the log %s says %d times that Coll stops serving the communicator, not once", path,
         said);
}

/* failure-shrink: rank 1 kills itself (SIGKILL) in the middle of a stream
 * of allreduces Coll serves; each survivor's call fails with
 * ncclRemoteError within 2 s of the kill (the kill's CLOCK_MONOTONIC time
 * is in `killedAt`, a page the ranks share), ncclCommGetAsyncError says
 * so, and the survivors ncclCommRevoke and ncclCommShrink without it, with
 * or without a real NCCL: the new communicator is Coll's (no unique id),
 * numbered densely in the old order, and 100 calls of every kind on it are
 * checked byte for byte (docs/RUNTIME.md, "Lost ranks"). */
static volatile int64_t *killedAt;

static int64_t nowNs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void shrinkAfterLoss(int rank, int n, int idFd[2]) {
  const int victim = 1;
  ncclComm_t comm = init(rank, n, idFd);
  int32_t *in = NULL, *out = NULL;
  const size_t count = 4096;
  int32_t hostIn[4096];
  memset(hostIn, 0, sizeof hostIn);
  if (deviceMode) {
    CUDA(cudaMalloc((void **)&in, sizeof hostIn));
    CUDA(cudaMalloc((void **)&out, sizeof hostIn));
    CUDA(cudaMemcpy(in, hostIn, sizeof hostIn, cudaMemcpyHostToDevice));
  } else {
    in = malloc(sizeof hostIn);
    out = malloc(sizeof hostIn);
    memcpy(in, hostIn, sizeof hostIn);
  }
  ncclResult_t r = ncclSuccess;
  ncclResult_t async = ncclSuccess;
  for (int i = 0; r == ncclSuccess && async == ncclSuccess && i < 1000000; ++i) {
    if (rank == victim && i == 20) {
      *killedAt = nowNs();
      raise(SIGKILL);
    }
    r = ncclAllReduce(in, out, count, ncclInt32, ncclSum, comm, NULL);
    if (r == ncclSuccess && deviceMode) {
      /* Device calls return once enqueued: the stream ends (its kernel
       * stopped, where a peer died), and the communicator tells. */
      (void)cudaStreamSynchronize(NULL);
      OK(ncclCommGetAsyncError(comm, &async));
    }
  }
  if (r == ncclSuccess)
    r = async;
  const int64_t at = *killedAt;
  const double ms = at ? (double)(nowNs() - at) / 1e6 : -1.0;
  if (r != ncclRemoteError)
    FAIL("the call after rank %d died returned %d (%s), not ncclRemoteError", victim, (int)r,
         ncclGetLastError(comm));
  if (!at || ms > coll_test_scaled(2000))
    FAIL("the loss was seen %.1f ms after the kill (at most 2000 ms)", ms);
  if (!strstr(ncclGetLastError(comm), "rank 1"))
    FAIL("the error does not name rank 1: %s", ncclGetLastError(comm));
  /* With a real NCCL beside it, the communicator's state after a failed
   * call is the real one's (docs/DROPIN.md, "After a failed call"). */
  OK(ncclCommGetAsyncError(comm, &async));
  if (async != ncclRemoteError && !(underneath != None && async == ncclSuccess))
    FAIL("ncclCommGetAsyncError gave %d after the loss, not ncclRemoteError", (int)async);
  printf("rank %d: error %d %.1f ms after the kill: %s\n", rank, (int)r, ms,
         ncclGetLastError(comm));
  OK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
  int exclude[1] = {victim};
  ncclComm_t shrunk = NULL;
  const int64_t t0 = nowNs();
  OK(ncclCommShrink(comm, exclude, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT));
  const double shrinkMs = (double)(nowNs() - t0) / 1e6;
  int newRank = -1, newSize = -1;
  OK(ncclCommUserRank(shrunk, &newRank));
  OK(ncclCommCount(shrunk, &newSize));
  if (newSize != n - 1 || newRank != rank - (rank > victim))
    FAIL("shrink: rank %d of %d for rank %d of %d", newRank, newSize, rank, n);
  OK(ncclCommDestroy(comm));
  if (deviceMode) {
    cudaFree(in);
    cudaFree(out);
  } else {
    free(in);
    free(out);
  }
  printf("rank %d: shrunk to rank %d of %d in %.1f ms\n", rank, newRank, newSize, shrinkMs);
  const ncclDataType_t types[] = {ncclInt8,  ncclUint8,   ncclInt32,   ncclUint32, ncclInt64,
                                  ncclUint64, ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16};
  for (int i = 0; i < 100; ++i)
    for (int kind = AllReduce; kind <= Scatter; ++kind) {
      const int inPlace = kind == Bcast || (kind != AlltoAll && i % 2);
      Call c = {(enum Kind)kind, types[(i + kind) % 10], BuiltinOps[(i + kind) % 5], 1,
                1 + (size_t)(i * 37 + kind) % 1031, (i + kind) % newSize, inPlace};
      runCall(&c, shrunk, newRank, newSize);
    }
  if (newRank == 0)
    printf("rank 0: 100 calls of every kind right on the shrunk communicator\n");
  OK(ncclCommFinalize(shrunk));
  OK(ncclCommDestroy(shrunk));
}

static const char *failureKind; /* failure-KIND, else NULL */

static int rankMain(int r, int n, int idFd[2]) {
  myRank = r;
  if (deviceMode) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1)
      return 77;
  }
  if (failureKind && !strcmp(failureKind, "shrink"))
    shrinkAfterLoss(r, n, idFd);
  else if (failureKind)
    failure(r, n, idFd, failureKind);
  else
    conformance(r, n, idFd);
  if (failures == 0)
    printf("rank %d: ok\n", r);
  return failures ? 1 : 0;
}

int main(int argc, char **argv) {
  huge = argc == 5 && !strcmp(argv[4], "huge");
  if (argc != 4 && !huge) {
    fprintf(stderr, "usage: %s host|device|failure-{watchdog,mismatch,died,late,shrink} NRANKS "
                    "standin|none|real [huge]\n", argv[0]);
    return 2;
  }
  /* device-failure-KIND: a failure on device buffers */
  const char *mode = !strncmp(argv[1], "device-failure-", 15) ? argv[1] + 7 : argv[1];
  deviceMode = !strcmp(argv[1], "device") || mode != argv[1];
  const char *how = failureKind = !strncmp(mode, "failure-", 8) ? mode + 8 : NULL;
  int n = atoi(argv[2]);
  if (!strcmp(argv[3], "standin"))
    underneath = Standin;
  else if (!strcmp(argv[3], "none"))
    underneath = None;
  else if (!strcmp(argv[3], "real"))
    underneath = Real;
  else
    n = 0;
  if ((!deviceMode && !how && strcmp(argv[1], "host")) ||
      (how && strcmp(how, "watchdog") && strcmp(how, "mismatch") && strcmp(how, "died") &&
       strcmp(how, "late") && strcmp(how, "shrink")) ||
      n < 1 || n > 8) {
    fprintf(stderr, "usage: %s host|device|failure-{watchdog,mismatch,died,late,shrink} NRANKS(1-8) "
                    "standin|none|real [huge]\n", argv[0]);
    return 2;
  }
  /* Each rank's log in a file of its own, where `failure` counts the WARN
   * that names the failure. */
  char logs[128];
  snprintf(logs, sizeof logs, "/tmp/nccl-conformance-%d", (int)getpid());
  if (how) {
    char file[160];
    snprintf(file, sizeof file, "%s.%%p", logs);
    setenv("COLL_DEBUG_FILE", file, 1);
    setenv("COLL_CONFORMANCE_LOG", logs, 1);
    const char *level = getenv("COLL_DEBUG");
    if (!level || (strcasecmp(level, "INFO") && strcasecmp(level, "TRACE")))
      setenv("COLL_DEBUG", "WARN", 1); /* the WARN counted */
  }
  int skipped = 0;
  if (how && !strcmp(how, "shrink")) {
    killedAt = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (killedAt == MAP_FAILED)
      return 1;
    *killedAt = 0;
    forkVictim = 1; /* killed on purpose: SIGKILL is its pass */
  }
  int bad = forkRanks(n, 300, rankMain, &skipped);
  if (how) { /* shown, then removed */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "cat %s.* >&2; rm -f %s.*", logs, logs);
    if (system(cmd) != 0)
      ++bad;
  }
  if (shmLeftovers())
    ++bad;
  if (skipped == n) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  printf("conformance %s with %d ranks (%s underneath): %s\n", argv[1], n, argv[3],
         bad ? "FAILED" : "passed");
  return bad ? 1 : 0;
}
