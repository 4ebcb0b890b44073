/*===- mpi_conformance_check.c - the MPI drop-in against Open MPI ----------===*
 *
 * A plain MPI program, run with libcoll_mpi.so preloaded: every call the
 * interposer serves is made twice on the same inputs, through MPI_* (the
 * interposer: Coll where it applies) and through PMPI_* (Open MPI itself),
 * and every byte of every buffer the call touches or must leave alone is
 * compared, with the result codes. Each buffer has guard bytes before and
 * after it; what a call must not write (recvbuf at a reduce's non-roots,
 * recvbuf past an in-place reduce_scatter_block's result, the send buffer)
 * starts as a known pattern. The inputs make every reduction exact in any
 * order (floats are small multiples of 1/2), so that any difference is one.
 *
 * Mode "calls" (default): every collective the interposer serves x every
 * predefined datatype and op it accepts (and some it does not, which must
 * fall back and agree) x in place and out of place x counts 0, 1, odd,
 * prime and large x roots 0, middle and last, on communicators from
 * MPI_Comm_dup and MPI_Comm_split used alternately, and one freed and made
 * again between calls; derived datatypes, with gaps and without, also
 * different ones on different ranks with the same type signature; and
 * erroneous calls, whose error classes and error handler calls must be
 * Open MPI's. A difference prints the call, its arguments and the first
 * differing byte.
 *
 * Mode "fault": a planted failure on one call (the last rank enters it
 * later than the watchdog period, COLL_WATCHDOG_MS, which the test sets
 * small), which must return an error on every rank; then 100 calls of every
 * kind, each compared with Open MPI as above, which must all be right (Coll
 * has retired from the communicator, and Open MPI runs them).
 *
 * Errors return (MPI_ERRORS_RETURN). Prints "rank R: ok N checks" when
 * everything held.
 *
 *===----------------------------------------------------------------------===*/
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum Call { ALLREDUCE, REDUCE, REDUCE_SCATTER_BLOCK, ALLGATHER, ALLTOALL, BCAST };
static const char *callNames[] = {"MPI_Allreduce", "MPI_Reduce", "MPI_Reduce_scatter_block",
                                  "MPI_Allgather", "MPI_Alltoall", "MPI_Bcast"};

/* How to fill an element so that every reduction of it is exact. */
enum Kind { INTEGER, REAL, BOOL, PAIR_INT, PAIR_DOUBLE_INT, COMPLEX };

typedef struct {
  MPI_Datatype type;
  const char *name;
  enum Kind kind;
} Type;
/* A predefined datatype, named as written. */
#define NAMED(t, kind) {t, #t, kind}

typedef struct {
  enum Call call;
  const Type *type;  /* the (send) datatype */
  const Type *rtype; /* allgather/alltoall: the receive datatype (NULL: type) */
  MPI_Op op;
  const char *opName;
  int count;  /* elements: of the buffer (allreduce, reduce, bcast), of a block (others) */
  int rcount; /* allgather/alltoall: receive elements per block (with rtype) */
  int root;
  int inPlace;
  MPI_Comm comm;
  const char *commName;
} Case;

#define GUARD 64
static const unsigned char GuardByte = 0xA5, UntouchedByte = 0x5A;

static int worldRank, checks, failures;
static unsigned seed = 1;

static void fail(const Case *c, const char *what) {
  ++failures;
  fprintf(stderr,
          "rank %d: FAIL %s(%s, type %s%s%s, op %s, count %d, rcount %d, root %d, %s): %s\n",
          worldRank, callNames[c->call], c->commName, c->type->name, c->rtype ? "/" : "",
          c->rtype ? c->rtype->name : "", c->opName ? c->opName : "-", c->count, c->rcount,
          c->root, c->inPlace ? "MPI_IN_PLACE" : "out of place", what);
}

/* Deterministic bytes: the same on every run of a case (xorshift). */
static uint32_t nextRandom(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

/* n elements of `t` (extent `ext`) at p, from stream `s`: integers any bits,
 * reals in {-2, -1, -1/2, 1/2, 1, 2, 3} (sums and products exact), bools 0
 * or 1, pairs (value, index). */
static void fillElements(unsigned char *p, const Type *t, MPI_Aint ext, size_t n, uint32_t s) {
  static const double reals[] = {-2, -1, -0.5, 0.5, 1, 2, 3};
  int size = 0;
  MPI_Type_size(t->type, &size);
  for (size_t i = 0; i < n; ++i) {
    unsigned char *e = p + i * (size_t)ext;
    for (int b = 0; b < size; ++b)
      e[b] = (unsigned char)nextRandom(&s);
    double r = reals[nextRandom(&s) % 7];
    switch (t->kind) {
    case INTEGER:
      break;
    case BOOL:
      e[0] = (unsigned char)(nextRandom(&s) & 1);
      break;
    case REAL:
      if (t->type == MPI_FLOAT) {
        float f = (float)r;
        memcpy(e, &f, sizeof f);
      } else if (t->type == MPI_DOUBLE) {
        memcpy(e, &r, sizeof r);
      } else { /* long double: its padding stays as filled */
        long double l = r;
        memcpy(e, &l, 10);
      }
      break;
    case COMPLEX: {
      double re = reals[nextRandom(&s) % 7];
      memcpy(e, &r, sizeof r);
      memcpy(e + sizeof r, &re, sizeof re);
      break;
    }
    case PAIR_INT: {
      int v[2] = {(int)(nextRandom(&s) % 5), (int)(nextRandom(&s) % 100)};
      memcpy(e, v, sizeof v);
      break;
    }
    case PAIR_DOUBLE_INT: {
      int idx = (int)(nextRandom(&s) % 100);
      memcpy(e, &r, sizeof r);
      memcpy(e + sizeof r, &idx, sizeof idx);
      break;
    }
    }
  }
}

/* One side of a run: a buffer of `bytes` between two guards. */
typedef struct {
  unsigned char *mem;
  size_t bytes;
} Buf;

static Buf makeBuf(size_t bytes) {
  Buf b = {malloc(bytes + 2 * GUARD), bytes};
  if (!b.mem)
    MPI_Abort(MPI_COMM_WORLD, 2);
  memset(b.mem, GuardByte, GUARD);
  memset(b.mem + GUARD, UntouchedByte, bytes);
  memset(b.mem + GUARD + bytes, GuardByte, GUARD);
  return b;
}
static unsigned char *data(Buf b) { return b.mem + GUARD; }

/* Compares the Coll run's buffer with Open MPI's, guards included; says the
 * first differing byte. */
static void compare(const Case *c, const char *which, Buf coll, Buf ref) {
  ++checks;
  size_t all = coll.bytes + 2 * GUARD;
  for (size_t i = 0; i < all; ++i) {
    if (coll.mem[i] == ref.mem[i] && (i >= GUARD && i < GUARD + coll.bytes ? 1
                                                                         : coll.mem[i] == GuardByte))
      continue;
    char what[256];
    long off = (long)i - GUARD;
    snprintf(what, sizeof what,
             "%s differs at byte %ld of %zu%s: 0x%02x through the interposer, 0x%02x by Open MPI",
             which, off, coll.bytes,
             off < 0 ? " (the guard before it)"
                     : (size_t)off >= coll.bytes ? " (the guard after it)" : "",
             coll.mem[i], ref.mem[i]);
    fail(c, what);
    return;
  }
}

static int typeSize(MPI_Datatype t) {
  int s = 0;
  MPI_Type_size(t, &s);
  return s;
}
static MPI_Aint typeExtent(MPI_Datatype t) {
  MPI_Aint lb = 0, ext = 0;
  MPI_Type_get_extent(t, &lb, &ext);
  return ext;
}

static int issue(const Case *c, int viaPmpi, void *send, void *recv) {
  const Type *rt = c->rtype ? c->rtype : c->type;
  switch (c->call) {
  case ALLREDUCE:
    return viaPmpi ? PMPI_Allreduce(send, recv, c->count, c->type->type, c->op, c->comm)
                   : MPI_Allreduce(send, recv, c->count, c->type->type, c->op, c->comm);
  case REDUCE:
    return viaPmpi
               ? PMPI_Reduce(send, recv, c->count, c->type->type, c->op, c->root, c->comm)
               : MPI_Reduce(send, recv, c->count, c->type->type, c->op, c->root, c->comm);
  case REDUCE_SCATTER_BLOCK:
    return viaPmpi
               ? PMPI_Reduce_scatter_block(send, recv, c->count, c->type->type, c->op, c->comm)
               : MPI_Reduce_scatter_block(send, recv, c->count, c->type->type, c->op, c->comm);
  case ALLGATHER:
    return viaPmpi ? PMPI_Allgather(send, c->count, c->type->type, recv, c->rcount, rt->type,
                                    c->comm)
                   : MPI_Allgather(send, c->count, c->type->type, recv, c->rcount, rt->type,
                                   c->comm);
  case ALLTOALL:
    return viaPmpi ? PMPI_Alltoall(send, c->count, c->type->type, recv, c->rcount, rt->type,
                                   c->comm)
                   : MPI_Alltoall(send, c->count, c->type->type, recv, c->rcount, rt->type,
                                  c->comm);
  case BCAST:
    return viaPmpi ? PMPI_Bcast(recv, c->count, c->type->type, c->root, c->comm)
                   : MPI_Bcast(recv, c->count, c->type->type, c->root, c->comm);
  }
  return MPI_ERR_OTHER;
}

/* Runs case c through the interposer and through Open MPI and compares. */
static void runCase(const Case *c) {
  int rank = 0, size = 0;
  MPI_Comm_rank(c->comm, &rank);
  MPI_Comm_size(c->comm, &size);
  const Type *rt = c->rtype ? c->rtype : c->type;
  const MPI_Aint ext = typeExtent(c->type->type), rext = typeExtent(rt->type);
  const size_t n = (size_t)size, count = (size_t)c->count, rcount = (size_t)c->rcount;
  /* Elements (of the send type) in the send buffer and (of the receive
   * type) in the receive buffer. */
  size_t sendElems = 0, recvElems = 0;
  switch (c->call) {
  case ALLREDUCE: sendElems = recvElems = count; break;
  case REDUCE: sendElems = recvElems = count; break;
  case REDUCE_SCATTER_BLOCK: sendElems = count * n; recvElems = c->inPlace ? count * n : count; break;
  case ALLGATHER: sendElems = count; recvElems = rcount * n; break;
  case ALLTOALL: sendElems = count * n; recvElems = rcount * n; break;
  case BCAST: recvElems = count; break;
  }
  /* (MPI_IN_PLACE at a reduce's root only: the other ranks send.) */
  const int sendUsed =
      c->call != BCAST && (!c->inPlace || (c->call == REDUCE && rank != c->root));
  Buf s[2], r[2];
  for (int k = 0; k < 2; ++k) {
    s[k] = makeBuf(sendUsed ? sendElems * (size_t)ext : 0);
    r[k] = makeBuf(recvElems * (size_t)(c->call == REDUCE_SCATTER_BLOCK || c->call == ALLREDUCE ||
                                                c->call == REDUCE || c->call == BCAST
                                            ? ext
                                            : rext));
  }
  /* The inputs of this case on this rank. */
  const uint32_t stream = seed * 2654435761u ^ (uint32_t)(rank + 1) * 40503u;
  ++seed;
  Buf in = sendUsed ? s[0] : r[0];
  switch (c->call) {
  case ALLREDUCE:
  case REDUCE_SCATTER_BLOCK:
  case ALLTOALL:
    fillElements(data(in), c->type, ext, c->call == ALLREDUCE ? count : sendElems, stream | 1);
    break;
  case REDUCE:
    /* In place: only the root's input is in recvbuf. */
    if (c->inPlace && rank != c->root)
      in = s[0];
    fillElements(data(in), c->type, ext, count, stream | 1);
    break;
  case ALLGATHER:
    /* In place: this rank's block of recvbuf. */
    fillElements(data(in) + (c->inPlace ? (size_t)rank * rcount * (size_t)rext : 0), c->type,
                 ext, count, stream | 1);
    break;
  case BCAST:
    if (rank == c->root)
      fillElements(data(in), c->type, ext, count, stream | 1);
    break;
  }
  memcpy(s[1].mem, s[0].mem, s[0].bytes + 2 * GUARD);
  memcpy(r[1].mem, r[0].mem, r[0].bytes + 2 * GUARD);
  /* Zero counts pass NULL where a program may. */
  for (int k = 0; k < 2; ++k) {
    void *send = c->inPlace ? MPI_IN_PLACE : sendUsed && sendElems ? data(s[k]) : NULL;
    if (c->call == REDUCE && c->inPlace && rank != c->root)
      send = sendElems ? data(s[k]) : NULL;
    void *recv = recvElems ? data(r[k]) : NULL;
    if (c->call == REDUCE && c->inPlace && rank != c->root)
      recv = NULL; /* not significant there */
    int rc = issue(c, k, send, recv);
    static int codes[2];
    codes[k] = rc;
    if (k == 1 && codes[0] != codes[1]) {
      char what[128];
      snprintf(what, sizeof what, "returned %d through the interposer and %d by Open MPI",
               codes[0], codes[1]);
      fail(c, what);
    }
  }
  compare(c, "the send buffer", s[0], s[1]);
  compare(c, "the receive buffer", r[0], r[1]);
  for (int k = 0; k < 2; ++k) {
    free(s[k].mem);
    free(r[k].mem);
  }
}

/*===--- The datatypes and ops ----------------------------------------===*/

static Type reduced[] = {
    NAMED(MPI_FLOAT, REAL),           NAMED(MPI_DOUBLE, REAL),
    NAMED(MPI_INT, INTEGER),          NAMED(MPI_INT32_T, INTEGER),
    NAMED(MPI_UNSIGNED, INTEGER),     NAMED(MPI_UINT32_T, INTEGER),
    NAMED(MPI_LONG, INTEGER),         NAMED(MPI_LONG_LONG, INTEGER),
    NAMED(MPI_INT64_T, INTEGER),      NAMED(MPI_UNSIGNED_LONG, INTEGER),
    NAMED(MPI_UNSIGNED_LONG_LONG, INTEGER), NAMED(MPI_UINT64_T, INTEGER),
    NAMED(MPI_INT8_T, INTEGER),       NAMED(MPI_UINT8_T, INTEGER),
    NAMED(MPI_SIGNED_CHAR, INTEGER),  NAMED(MPI_UNSIGNED_CHAR, INTEGER),
    /* Not reduced by Coll: these fall back. */
    NAMED(MPI_SHORT, INTEGER),        NAMED(MPI_UNSIGNED_SHORT, INTEGER),
    NAMED(MPI_INT16_T, INTEGER),      NAMED(MPI_LONG_DOUBLE, REAL),
};
enum { NumReduced = sizeof reduced / sizeof reduced[0] };

/* A user-defined op: element-wise sum of ints (commutative) and a
 * non-commutative one (a - b folded left to right: order matters). */
static void userSum(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  for (int i = 0; i < *len; ++i)
    ((int *)inout)[i] += ((int *)in)[i];
}
static void userFirst(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  for (int i = 0; i < *len; ++i)
    ((int *)inout)[i] = ((int *)in)[i] * 3 + ((int *)inout)[i];
}

/*===--- The sweep ----------------------------------------------------===*/

static MPI_Comm comms[2];
static const char *commNames[2];
static int turn;

/* The next of the two communicators, used alternately. */
static void useNext(Case *c) {
  c->comm = comms[turn];
  c->commName = commNames[turn];
  turn ^= 1;
}

static void reductions(void) {
  struct {
    MPI_Op op;
    const char *name;
  } ops[] = {{MPI_SUM, "MPI_SUM"}, {MPI_PROD, "MPI_PROD"}, {MPI_MIN, "MPI_MIN"},
             {MPI_MAX, "MPI_MAX"}};
  /* 67: past the count from which Open MPI's vectorized ops run. */
  const int counts[] = {0, 1, 7, 13, 67};
  const enum Call calls[] = {ALLREDUCE, REDUCE, REDUCE_SCATTER_BLOCK};
  for (int t = 0; t < NumReduced; ++t)
    for (int o = 0; o < 4; ++o)
      for (int k = 0; k < 3; ++k)
        for (int ci = 0; ci < 5; ++ci)
          for (int inPlace = 0; inPlace < 2; ++inPlace) {
            Case c = {calls[k], &reduced[t], NULL, ops[o].op, ops[o].name, counts[ci], 0, 0,
                      inPlace, 0, 0};
            useNext(&c);
            int size = 0;
            MPI_Comm_size(c.comm, &size);
            if (c.call == REDUCE) {
              /* roots 0, middle and last, in turn */
              c.root = (t + o + ci) % 3 == 0 ? 0 : (t + o + ci) % 3 == 1 ? size / 2 : size - 1;
            }
            runCase(&c);
          }
}

/* Ops and types Coll does not reduce, which go to Open MPI. */
static void fallbackReductions(void) {
  MPI_Op user, userNc;
  MPI_Op_create(userSum, 1, &user);
  MPI_Op_create(userFirst, 0, &userNc);
  static Type intT = NAMED(MPI_INT, INTEGER), boolT = NAMED(MPI_C_BOOL, BOOL),
              pairT = NAMED(MPI_2INT, PAIR_INT), dpairT = NAMED(MPI_DOUBLE_INT, PAIR_DOUBLE_INT),
              cplxT = NAMED(MPI_C_DOUBLE_COMPLEX, COMPLEX), contigT = {0, "contiguous(2, MPI_INT)", INTEGER},
              charT = NAMED(MPI_UNSIGNED_CHAR, INTEGER);
  MPI_Type_contiguous(2, MPI_INT, &contigT.type);
  MPI_Type_commit(&contigT.type);
  struct {
    const Type *type;
    MPI_Op op;
    const char *name;
  } mixes[] = {
      {&intT, MPI_BAND, "MPI_BAND"},     {&intT, MPI_BOR, "MPI_BOR"},
      {&intT, MPI_BXOR, "MPI_BXOR"},     {&intT, MPI_LAND, "MPI_LAND"},
      {&intT, MPI_LOR, "MPI_LOR"},       {&intT, MPI_LXOR, "MPI_LXOR"},
      {&charT, MPI_BAND, "MPI_BAND"},    {&boolT, MPI_LAND, "MPI_LAND"},
      {&boolT, MPI_LOR, "MPI_LOR"},      {&pairT, MPI_MAXLOC, "MPI_MAXLOC"},
      {&pairT, MPI_MINLOC, "MPI_MINLOC"}, {&dpairT, MPI_MAXLOC, "MPI_MAXLOC"},
      {&cplxT, MPI_SUM, "MPI_SUM"},      {&intT, user, "a user op"},
      {&intT, userNc, "a non-commutative user op"}, {&contigT, MPI_SUM, "MPI_SUM"},
  };
  const int counts[] = {0, 1, 13, 67};
  const enum Call calls[] = {ALLREDUCE, REDUCE, REDUCE_SCATTER_BLOCK};
  for (size_t m = 0; m < sizeof mixes / sizeof mixes[0]; ++m)
    for (int k = 0; k < 3; ++k)
      for (int ci = 0; ci < 4; ++ci)
        for (int inPlace = 0; inPlace < 2; ++inPlace) {
          Case c = {calls[k], mixes[m].type, NULL, mixes[m].op, mixes[m].name, counts[ci], 0, 0,
                    inPlace, 0, 0};
          useNext(&c);
          int size = 0;
          MPI_Comm_size(c.comm, &size);
          c.root = c.call == REDUCE ? (int)(m + (size_t)ci) % size : 0;
          runCase(&c);
        }
  MPI_Op_free(&user);
  MPI_Op_free(&userNc);
  MPI_Type_free(&contigT.type);
}

/* Allgather, alltoall and bcast: every kind of datatype (Coll moves
 * predefined ones as bytes; derived ones go to Open MPI). */
static void dataMovement(void) {
  static Type byteT = NAMED(MPI_BYTE, INTEGER), charT = NAMED(MPI_CHAR, INTEGER),
              intT = NAMED(MPI_INT, INTEGER), dblT = NAMED(MPI_DOUBLE, REAL),
              shortT = NAMED(MPI_SHORT, INTEGER), ldT = NAMED(MPI_LONG_DOUBLE, REAL),
              boolT = NAMED(MPI_C_BOOL, BOOL), pairT = NAMED(MPI_2INT, PAIR_INT),
              contigT = {0, "contiguous(3, MPI_INT)", INTEGER},
              vecT = {0, "vector(2, 1, 2, MPI_INT)", INTEGER},
              resizedT = {0, "MPI_INT resized to 8 bytes", INTEGER};
  MPI_Type_contiguous(3, MPI_INT, &contigT.type);
  MPI_Type_commit(&contigT.type);
  /* Gaps inside an element and between elements: they must stay as they were. */
  MPI_Type_vector(2, 1, 2, MPI_INT, &vecT.type);
  MPI_Type_commit(&vecT.type);
  MPI_Type_create_resized(MPI_INT, 0, 8, &resizedT.type);
  MPI_Type_commit(&resizedT.type);
  const Type *types[] = {&byteT, &charT, &intT, &dblT, &shortT, &ldT,
                         &boolT, &pairT, &contigT, &vecT, &resizedT};
  const int counts[] = {0, 1, 7, 13, 1021};
  const enum Call calls[] = {ALLGATHER, ALLTOALL, BCAST};
  for (size_t t = 0; t < sizeof types / sizeof types[0]; ++t)
    for (int k = 0; k < 3; ++k)
      for (int ci = 0; ci < 5; ++ci)
        for (int inPlace = 0; inPlace < 2; ++inPlace) {
          if (calls[k] == BCAST && inPlace)
            continue; /* in place by definition */
          Case c = {calls[k], types[t], NULL, 0, NULL, counts[ci], counts[ci], 0, inPlace, 0, 0};
          useNext(&c);
          int size = 0;
          MPI_Comm_size(c.comm, &size);
          if (c.call == BCAST)
            for (int root = 0; root < size; ++root) {
              c.root = root;
              runCase(&c);
            }
          else
            runCase(&c);
        }
  /* Send and receive types that differ with the same bytes. */
  const struct {
    const Type *s, *r;
    int scount, rcount;
  } pairs[] = {{&intT, &byteT, 5, 20}, {&byteT, &intT, 28, 7}, {&contigT, &intT, 3, 9},
               {&intT, &contigT, 9, 3}, {&intT, &vecT, 4, 2}};
  for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; ++p)
    for (int k = 0; k < 2; ++k) {
      Case c = {calls[k], pairs[p].s, pairs[p].r, 0, NULL, pairs[p].scount, pairs[p].rcount, 0, 0,
                0, 0};
      useNext(&c);
      runCase(&c);
    }
  MPI_Type_free(&contigT.type);
  MPI_Type_free(&vecT.type);
  MPI_Type_free(&resizedT.type);
}

/* Sizes where Coll's larger algorithms run (a few MiB in all). */
static void large(void) {
  static Type fT = NAMED(MPI_FLOAT, REAL), iT = NAMED(MPI_INT, INTEGER),
              bT = NAMED(MPI_BYTE, INTEGER), dT = NAMED(MPI_DOUBLE, REAL);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int big = 1 << 20; /* elements of a buffer: 4 MiB of floats */
  const int prime = 65521;
  for (int inPlace = 0; inPlace < 2; ++inPlace) {
    Case cases[] = {
        {ALLREDUCE, &fT, NULL, MPI_SUM, "MPI_SUM", big, 0, 0, inPlace, 0, 0},
        {ALLREDUCE, &iT, NULL, MPI_MAX, "MPI_MAX", prime, 0, 0, inPlace, 0, 0},
        {REDUCE, &dT, NULL, MPI_SUM, "MPI_SUM", prime, 0, size - 1, inPlace, 0, 0},
        {REDUCE, &iT, NULL, MPI_PROD, "MPI_PROD", big / 4, 0, size / 2, inPlace, 0, 0},
        {REDUCE_SCATTER_BLOCK, &fT, NULL, MPI_SUM, "MPI_SUM", big / 4, 0, 0, inPlace, 0, 0},
        {REDUCE_SCATTER_BLOCK, &iT, NULL, MPI_MIN, "MPI_MIN", prime, 0, 0, inPlace, 0, 0},
        {ALLGATHER, &bT, NULL, 0, NULL, big / 2 + 1, big / 2 + 1, 0, inPlace, 0, 0},
        {ALLTOALL, &iT, NULL, 0, NULL, prime, prime, 0, inPlace, 0, 0},
        {BCAST, &bT, NULL, 0, NULL, 4 * big + 3, 0, size - 1, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
      if (cases[i].call == BCAST && inPlace)
        continue;
      useNext(&cases[i]);
      runCase(&cases[i]);
    }
  }
}

/* Data movement where ranks pass different datatypes with the same type
 * signature, as MPI allows (MPICH's bcast test: MTest datatypes, one on the
 * root, another elsewhere): each rank's send and receive (type, count) is
 * its own; every byte is compared with Open MPI's. */
typedef struct {
  MPI_Datatype type;
  int count; /* per block (allgather, alltoall) or of the buffer (bcast) */
} Side;
static void mixedAcrossRanks(enum Call call, const char *what, Side send, Side recv, int root,
                             MPI_Comm comm) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const size_t n = (size_t)size;
  const MPI_Aint sext = typeExtent(send.type), rext = typeExtent(recv.type);
  const size_t sendElems = call == ALLTOALL ? (size_t)send.count * n : (size_t)send.count;
  const size_t recvElems = call == BCAST ? (size_t)recv.count : (size_t)recv.count * n;
  Buf s[2], r[2];
  Type filled = {send.type, what, INTEGER};
  for (int k = 0; k < 2; ++k) {
    s[k] = makeBuf(call == BCAST ? 0 : sendElems * (size_t)sext);
    r[k] = makeBuf(recvElems * (size_t)rext);
  }
  const uint32_t stream = seed++ * 2654435761u ^ (uint32_t)(rank + 1) * 40503u;
  if (call != BCAST)
    fillElements(data(s[0]), &filled, sext, sendElems, stream | 1);
  else if (rank == root) {
    filled.type = recv.type;
    fillElements(data(r[0]), &filled, rext, recvElems, stream | 1);
  }
  memcpy(s[1].mem, s[0].mem, s[0].bytes + 2 * GUARD);
  memcpy(r[1].mem, r[0].mem, r[0].bytes + 2 * GUARD);
  int rc[2];
  for (int k = 0; k < 2; ++k) {
    void *sb = data(s[k]), *rb = data(r[k]);
    switch (call) {
    case ALLGATHER:
      rc[k] = k ? PMPI_Allgather(sb, send.count, send.type, rb, recv.count, recv.type, comm)
                : MPI_Allgather(sb, send.count, send.type, rb, recv.count, recv.type, comm);
      break;
    case ALLTOALL:
      rc[k] = k ? PMPI_Alltoall(sb, send.count, send.type, rb, recv.count, recv.type, comm)
                : MPI_Alltoall(sb, send.count, send.type, rb, recv.count, recv.type, comm);
      break;
    default:
      rc[k] = k ? PMPI_Bcast(rb, recv.count, recv.type, root, comm)
                : MPI_Bcast(rb, recv.count, recv.type, root, comm);
      break;
    }
  }
  Type named = {recv.type, what, INTEGER};
  Case c = {call, &named, NULL, 0, NULL, send.count, recv.count, root, 0, comm, "MPI_COMM_WORLD"};
  ++checks;
  if (rc[0] != rc[1]) {
    char text[128];
    snprintf(text, sizeof text, "returned %d through the interposer and %d by Open MPI", rc[0],
             rc[1]);
    fail(&c, text);
  }
  compare(&c, "the send buffer", s[0], s[1]);
  compare(&c, "the receive buffer", r[0], r[1]);
  for (int k = 0; k < 2; ++k) {
    free(s[k].mem);
    free(r[k].mem);
  }
}

static void differentTypesAcrossRanks(void) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* Two ints: with a gap between them, contiguous, and as two MPI_INTs;
   * three MPI_SHORTs with gaps against three contiguous. */
  MPI_Datatype gapped, pair, shorts;
  MPI_Type_vector(2, 1, 2, MPI_INT, &gapped);
  MPI_Type_commit(&gapped);
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  MPI_Type_create_resized(MPI_SHORT, 0, 6, &shorts);
  MPI_Type_commit(&shorts);
  for (int k = 1; k <= 1025; k += 512) {
    for (int root = 0; root < size; root += size > 2 ? size - 1 : 1) {
      /* The root's type has gaps; the others' does not (or is another). */
      Side bcastSide = rank == root ? (Side){gapped, k}
                                    : rank % 2 ? (Side){pair, k} : (Side){MPI_INT, 2 * k};
      mixedAcrossRanks(BCAST, "vector(2, 1, 2, MPI_INT) at the root, others contiguous",
                       bcastSide, bcastSide, root, MPI_COMM_WORLD);
    }
    Side send = rank == 0 ? (Side){gapped, k} : (Side){MPI_INT, 2 * k};
    Side recv = rank == size - 1 ? (Side){pair, k} : (Side){MPI_INT, 2 * k};
    mixedAcrossRanks(ALLGATHER, "vector/MPI_INT/contiguous by rank", send, recv, 0,
                     MPI_COMM_WORLD);
    mixedAcrossRanks(ALLTOALL, "vector/MPI_INT/contiguous by rank", send, recv, 0,
                     MPI_COMM_WORLD);
    Side sh = rank == 1 ? (Side){shorts, 3 * k} : (Side){MPI_SHORT, 3 * k};
    mixedAcrossRanks(ALLGATHER, "MPI_SHORT resized to 6 bytes on rank 1", sh, sh, 0,
                     MPI_COMM_WORLD);
  }
  MPI_Type_free(&gapped);
  MPI_Type_free(&pair);
  MPI_Type_free(&shorts);
}

/* A duplicate freed between calls and made again, and MPI_COMM_WORLD. */
static void freedBetweenCalls(void) {
  static Type iT = NAMED(MPI_INT, INTEGER);
  for (int round = 0; round < 3; ++round) {
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    Case cs[] = {
        {ALLREDUCE, &iT, NULL, MPI_SUM, "MPI_SUM", 7 + round, 0, 0, round & 1, dup, "a fresh dup"},
        {REDUCE_SCATTER_BLOCK, &iT, NULL, MPI_SUM, "MPI_SUM", 5, 0, 0, 1, dup, "a fresh dup"},
        {BCAST, &iT, NULL, 0, NULL, 11, 0, round % 2, 0, dup, "a fresh dup"},
        {ALLGATHER, &iT, NULL, 0, NULL, 3, 3, 0, 0, MPI_COMM_WORLD, "MPI_COMM_WORLD"},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; ++i)
      runCase(&cs[i]);
    MPI_Comm_free(&dup);
  }
}

/*===--- Erroneous calls ---------------------------------------------===*/

/* Error handler invocations, by communicator (MPI_COMM_WORLD gets those
 * of calls on MPI_COMM_NULL). */
static int handled;
static void countingHandler(MPI_Comm *comm, int *code, ...) {
  (void)comm;
  (void)code;
  ++handled;
}

/* One erroneous call, made through the interposer and through Open MPI:
 * the same error class, and the handler called as often. */
typedef int (*ErrorCall)(int viaPmpi, MPI_Comm comm, int *buf, int *other);
static void compareError(const char *what, ErrorCall call) {
  int buf[2][64], other[2][64];
  int rc[2], calls[2], cls[2];
  for (int k = 0; k < 2; ++k) {
    for (int i = 0; i < 64; ++i)
      buf[k][i] = other[k][i] = i;
    handled = 0;
    rc[k] = call(k, comms[0], buf[k], other[k]);
    calls[k] = handled;
    MPI_Error_class(rc[k], &cls[k]);
  }
  ++checks;
  if (cls[0] != cls[1] || calls[0] != calls[1]) {
    ++failures;
    fprintf(stderr,
            "rank %d: FAIL %s on %s: error class %d and %d error handler calls through the "
            "interposer, class %d and %d calls by Open MPI\n",
            worldRank, what, commNames[0], cls[0], calls[0], cls[1], calls[1]);
  } else if (memcmp(buf[0], buf[1], sizeof buf[0]) || memcmp(other[0], other[1], sizeof other[0])) {
    ++failures;
    fprintf(stderr, "rank %d: FAIL %s on %s: the buffers differ from Open MPI's\n", worldRank,
            what, commNames[0]);
  }
}

#define ERROR_CASE(name, expr)                                                                 \
  static int name(int viaPmpi, MPI_Comm comm, int *buf, int *other) {                          \
    int size = 0;                                                                              \
    MPI_Comm_size(comm, &size);                                                                \
    (void)buf, (void)other, (void)size;                                                        \
    return viaPmpi ? P##expr : expr;                                                           \
  }
ERROR_CASE(allreduceNullType, MPI_Allreduce(buf, other, 4, MPI_DATATYPE_NULL, MPI_SUM, comm))
ERROR_CASE(allreduceNullOp, MPI_Allreduce(buf, other, 4, MPI_INT, MPI_OP_NULL, comm))
ERROR_CASE(allreduceNegative, MPI_Allreduce(buf, other, -1, MPI_INT, MPI_SUM, comm))
ERROR_CASE(allreduceNullComm, MPI_Allreduce(buf, other, 4, MPI_INT, MPI_SUM, MPI_COMM_NULL))
ERROR_CASE(allreduceAliased, MPI_Allreduce(buf, buf, 4, MPI_INT, MPI_SUM, comm))
ERROR_CASE(reduceAliased, MPI_Reduce(buf, buf, 4, MPI_INT, MPI_SUM, 0, comm))
ERROR_CASE(rsbAliased, MPI_Reduce_scatter_block(buf, buf, 2, MPI_INT, MPI_SUM, comm))
ERROR_CASE(reduceRootLow, MPI_Reduce(buf, other, 4, MPI_INT, MPI_SUM, -1, comm))
ERROR_CASE(reduceRootHigh, MPI_Reduce(buf, other, 4, MPI_INT, MPI_SUM, size, comm))
ERROR_CASE(reduceNullType, MPI_Reduce(buf, other, 4, MPI_DATATYPE_NULL, MPI_SUM, 0, comm))
ERROR_CASE(reduceNullComm, MPI_Reduce(buf, other, 4, MPI_INT, MPI_SUM, 0, MPI_COMM_NULL))
ERROR_CASE(rsbNegative, MPI_Reduce_scatter_block(buf, other, -1, MPI_INT, MPI_SUM, comm))
ERROR_CASE(rsbNullOp, MPI_Reduce_scatter_block(buf, other, 2, MPI_INT, MPI_OP_NULL, comm))
ERROR_CASE(rsbNullType, MPI_Reduce_scatter_block(buf, other, 2, MPI_DATATYPE_NULL, MPI_SUM, comm))
ERROR_CASE(allgatherNegative, MPI_Allgather(buf, -1, MPI_INT, other, 2, MPI_INT, comm))
ERROR_CASE(allgatherNegativeNothing, MPI_Allgather(buf, -1, MPI_INT, other, 0, MPI_INT, comm))
ERROR_CASE(allgatherNullType, MPI_Allgather(buf, 2, MPI_INT, other, 2, MPI_DATATYPE_NULL, comm))
ERROR_CASE(alltoallNegative, MPI_Alltoall(buf, 2, MPI_INT, other, -1, MPI_INT, comm))
ERROR_CASE(alltoallNullType, MPI_Alltoall(buf, 2, MPI_DATATYPE_NULL, other, 2, MPI_INT, comm))
ERROR_CASE(bcastRootHigh, MPI_Bcast(buf, 4, MPI_INT, size, comm))
ERROR_CASE(bcastNegative, MPI_Bcast(buf, -1, MPI_INT, 0, comm))
ERROR_CASE(bcastNullType, MPI_Bcast(buf, 4, MPI_DATATYPE_NULL, 0, comm))
ERROR_CASE(bcastNullComm, MPI_Bcast(buf, 4, MPI_INT, 0, MPI_COMM_NULL))

static MPI_Datatype uncommitted;
ERROR_CASE(bcastUncommitted, MPI_Bcast(buf, 2, uncommitted, 0, comm))

/* Erroneous arguments: Open MPI's checks and error handler, through the
 * interposer as without it (a program's error tests). Not here: NULL
 * buffers with a count, an aliased allgather, an allgather on MPI_COMM_NULL
 * (Open MPI 4.1 crashes or may),
 * an aliased alltoall (Open MPI runs it, with a result that depends on
 * its timing). */
static void errors(void) {
  MPI_Errhandler counting;
  MPI_Comm_create_errhandler(countingHandler, &counting);
  MPI_Comm_set_errhandler(comms[0], counting);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, counting);
  MPI_Type_contiguous(2, MPI_INT, &uncommitted);
  const struct {
    const char *what;
    ErrorCall call;
  } cases[] = {
      {"MPI_Allreduce of MPI_DATATYPE_NULL", allreduceNullType},
      {"MPI_Allreduce with MPI_OP_NULL", allreduceNullOp},
      {"MPI_Allreduce of count -1", allreduceNegative},
      {"MPI_Allreduce on MPI_COMM_NULL", allreduceNullComm},
      {"MPI_Allreduce with sendbuf == recvbuf", allreduceAliased},
      {"MPI_Reduce with sendbuf == recvbuf at the root", reduceAliased},
      {"MPI_Reduce_scatter_block with sendbuf == recvbuf", rsbAliased},
      {"MPI_Reduce to root -1", reduceRootLow},
      {"MPI_Reduce to root size", reduceRootHigh},
      {"MPI_Reduce of MPI_DATATYPE_NULL", reduceNullType},
      {"MPI_Reduce on MPI_COMM_NULL", reduceNullComm},
      {"MPI_Reduce_scatter_block of count -1", rsbNegative},
      {"MPI_Reduce_scatter_block with MPI_OP_NULL", rsbNullOp},
      {"MPI_Reduce_scatter_block of MPI_DATATYPE_NULL", rsbNullType},
      {"MPI_Allgather of sendcount -1", allgatherNegative},
      {"MPI_Allgather of sendcount -1 into recvcount 0", allgatherNegativeNothing},
      {"MPI_Allgather into MPI_DATATYPE_NULL", allgatherNullType},
      {"MPI_Alltoall of recvcount -1", alltoallNegative},
      {"MPI_Alltoall of MPI_DATATYPE_NULL", alltoallNullType},
      {"MPI_Bcast from root size", bcastRootHigh},
      {"MPI_Bcast of count -1", bcastNegative},
      {"MPI_Bcast of MPI_DATATYPE_NULL", bcastNullType},
      {"MPI_Bcast on MPI_COMM_NULL", bcastNullComm},
      {"MPI_Bcast of an uncommitted datatype", bcastUncommitted},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    compareError(cases[i].what, cases[i].call);
  MPI_Type_free(&uncommitted);
  MPI_Comm_set_errhandler(comms[0], MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Errhandler_free(&counting);
}

/* Every kind of call once, compared (the fault mode's later calls). */
static void everyKind(int i, MPI_Comm comm, const char *commName) {
  static Type iT = NAMED(MPI_INT, INTEGER), fT = NAMED(MPI_FLOAT, REAL),
              bT = NAMED(MPI_BYTE, INTEGER);
  int size = 0;
  MPI_Comm_size(comm, &size);
  Case cs[] = {
      {ALLREDUCE, &fT, NULL, MPI_SUM, "MPI_SUM", 1 + i % 37, 0, 0, i & 1, 0, 0},
      {REDUCE, &iT, NULL, MPI_MAX, "MPI_MAX", 5 + i, 0, i % size, i & 1, 0, 0},
      {REDUCE_SCATTER_BLOCK, &iT, NULL, MPI_SUM, "MPI_SUM", 3 + i % 5, 0, 0, i & 1, 0, 0},
      {ALLGATHER, &bT, NULL, 0, NULL, 9 + i, 9 + i, 0, i & 1, 0, 0},
      {ALLTOALL, &iT, NULL, 0, NULL, 2 + i % 3, 2 + i % 3, 0, i & 1, 0, 0},
      {BCAST, &bT, NULL, 0, NULL, 100 + i, 0, (i + 1) % size, 0, 0, 0},
  };
  for (size_t k = 0; k < sizeof cs / sizeof cs[0]; ++k) {
    cs[k].comm = comm;
    cs[k].commName = commName;
    runCase(&cs[k]);
  }
}

/* A call that must have failed on Coll: MPI_ERR_OTHER. */
static void expectFailed(int rc, const char *what) {
  ++checks;
  int cls = MPI_SUCCESS;
  if (rc != MPI_SUCCESS)
    MPI_Error_class(rc, &cls);
  if (cls != MPI_ERR_OTHER) {
    fprintf(stderr, "rank %d: FAIL %s returned class %d, not MPI_ERR_OTHER\n", worldRank, what,
            cls);
    ++failures;
  }
}

/* Planted failures, each on a communicator of its own, every rank's call
 * compared with Open MPI's after it (COLL_WATCHDOG_MS, which the test sets,
 * bounds how long a call waits on Coll):
 *   - a late rank: the last rank enters an allreduce two watchdog periods
 *     late; the others' watchdog stops it, and every rank's call fails,
 *     the late one's at once;
 *   - a rank behind: the last rank is as late for a broadcast, which the
 *     root completes without waiting for it, and the allreduce after it;
 *     the others' allreduce stops at the watchdog; the late rank's
 *     broadcast must still succeed (its peers completed it) and its
 *     allreduce fail at once.
 * Then 100 calls of every kind on each communicator, which Open MPI runs. */
static void fault(void) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *ms = getenv("COLL_WATCHDOG_MS");
  long watchdog = ms ? atol(ms) : 0;
  if (watchdog <= 0 || watchdog > 60000) {
    fprintf(stderr, "rank %d: FAIL the fault mode needs COLL_WATCHDOG_MS (1..60000)\n", worldRank);
    ++failures;
    return;
  }
  const useconds_t late = (useconds_t)(watchdog * 1000 * 2 + 500000);
  float x[64], y[64];
  for (int i = 0; i < 64; ++i)
    x[i] = (float)(rank + i);
  int words[16];

  MPI_Comm comm = comms[0];
  for (int i = 0; i < 3; ++i)
    everyKind(i, comm, commNames[0]); /* on Coll */
  MPI_Allreduce(x, y, 64, MPI_FLOAT, MPI_SUM, comm); /* the program the failure stops */
  if (rank == size - 1)
    usleep(late);
  expectFailed(MPI_Allreduce(x, y, 64, MPI_FLOAT, MPI_SUM, comm),
               "the allreduce a rank was late for");
  for (int i = 0; i < 100; ++i)
    everyKind(i, comm, commNames[0]);

  MPI_Comm behind;
  MPI_Comm_dup(MPI_COMM_WORLD, &behind);
  MPI_Comm_set_errhandler(behind, MPI_ERRORS_RETURN);
  const char *behindName = "a second dup of MPI_COMM_WORLD";
  for (int i = 0; i < 3; ++i)
    everyKind(i, behind, behindName);
  for (int i = 0; i < 16; ++i)
    words[i] = rank == 0 ? 1000 + i : -1;
  MPI_Bcast(words, 16, MPI_INT, 0, behind);
  MPI_Allreduce(x, y, 64, MPI_FLOAT, MPI_SUM, behind);
  for (int i = 0; i < 16; ++i)
    words[i] = rank == 0 ? 2000 + i : -1;
  if (rank == size - 1)
    usleep(late);
  int rc = MPI_Bcast(words, 16, MPI_INT, 0, behind);
  ++checks;
  int right = rc == MPI_SUCCESS;
  for (int i = 0; i < 16; ++i)
    right = right && words[i] == 2000 + i;
  if (!right) {
    fprintf(stderr, "rank %d: FAIL the broadcast a rank was late for: rc %d, word 0 %d\n",
            worldRank, rc, words[0]);
    ++failures;
  }
  expectFailed(MPI_Allreduce(x, y, 64, MPI_FLOAT, MPI_SUM, behind),
               "the allreduce after the broadcast a rank was late for");
  for (int i = 0; i < 100; ++i)
    everyKind(i, behind, behindName);
  MPI_Comm_free(&behind);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const char *mode = argc > 1 ? argv[1] : "calls";
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* Two communicators used alternately: a duplicate of MPI_COMM_WORLD and,
   * with more than 2 ranks, a split of it into two halves numbered
   * backwards (else a split of one color, also backwards). */
  MPI_Comm_dup(MPI_COMM_WORLD, &comms[0]);
  commNames[0] = "a dup of MPI_COMM_WORLD";
  MPI_Comm_split(MPI_COMM_WORLD, size > 2 ? worldRank % 2 : 0, -worldRank, &comms[1]);
  commNames[1] = size > 2 ? "a split of MPI_COMM_WORLD by rank parity, backwards"
                          : "a split of MPI_COMM_WORLD, backwards";
  for (int i = 0; i < 2; ++i)
    MPI_Comm_set_errhandler(comms[i], MPI_ERRORS_RETURN);
  if (strcmp(mode, "calls") == 0) {
    reductions();
    fallbackReductions();
    dataMovement();
    large();
    freedBetweenCalls();
    differentTypesAcrossRanks();
    errors();
  } else if (strcmp(mode, "fault") == 0) {
    fault();
  } else {
    fprintf(stderr, "usage: %s [calls|fault]\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  for (int i = 0; i < 2; ++i)
    MPI_Comm_free(&comms[i]);
  int total = 0;
  PMPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (failures == 0)
    printf("rank %d: ok %d checks\n", worldRank, checks);
  else
    fprintf(stderr, "rank %d: %d of %d checks failed\n", worldRank, failures, checks);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
