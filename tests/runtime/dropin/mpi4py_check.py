"""An mpi4py + NumPy program run with libcoll_mpi.so preloaded.

It knows nothing of Coll: it calls mpi4py's buffer collectives, which call
Open MPI's C functions, which the preloaded interposer serves or passes on.
Every result is checked against the collective's definition computed with
NumPy (exact for integers and copies, a reduction-order tolerance for
floats). Prints "rank R: ok N checks" or "rank R: FAIL ...".
"""

import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, n = comm.Get_rank(), comm.Get_size()
checks = 0
failures = []


def expect(what, got, want, exact=True):
    global checks
    checks += 1
    if exact:
        ok = np.array_equal(got, want)
    else:
        ok = np.allclose(got, want, rtol=1e-5, atol=1e-5)
    if not ok:
        bad = np.flatnonzero(~np.isclose(got, want) if not exact else got != want)
        i = int(bad[0]) if bad.size else 0
        failures.append(f"{what}: element {i} is {got.flat[i]}, expected {want.flat[i]}")


def data(r, count, dtype, salt=0):
    i = np.arange(count, dtype=np.int64)
    v = ((r + 1) * 37 + i * 11 + salt) % 29 - 14
    return v.astype(dtype)


for count in (0, 1, 5, 1000, 70000, 300000):
    for dtype, mpitype, exact in ((np.float32, MPI.FLOAT, False), (np.int32, MPI.INT, True),
                                  (np.float64, MPI.DOUBLE, False), (np.int64, MPI.INT64_T, True)):
        name = np.dtype(dtype).name
        allin = [data(r, count, dtype) for r in range(n)]
        # Allreduce: sum and max, out of place and in place.
        recv = np.empty(count, dtype)
        comm.Allreduce([allin[rank], mpitype], [recv, mpitype], op=MPI.SUM)
        expect(f"Allreduce {name} sum {count}", recv, np.sum(allin, axis=0, dtype=dtype), exact)
        buf = allin[rank].copy()
        comm.Allreduce(MPI.IN_PLACE, [buf, mpitype], op=MPI.MAX)
        expect(f"Allreduce {name} max in place {count}", buf, np.max(allin, axis=0), True)
        # Reduce (min) to the last rank.
        recv = np.zeros(count, dtype)
        comm.Reduce([allin[rank], mpitype], [recv, mpitype], op=MPI.MIN, root=n - 1)
        if rank == n - 1:
            expect(f"Reduce {name} min {count}", recv, np.min(allin, axis=0), True)
    # Copies and block collectives in int32 and float32.
    for dtype in (np.int32, np.float32):
        name = np.dtype(dtype).name
        mine = data(rank, count, dtype, 3)
        out = np.empty(count * n, dtype)
        comm.Allgather(mine, out)
        expect(f"Allgather {name} {count}", out,
               np.concatenate([data(r, count, dtype, 3) for r in range(n)]), True)
        send = data(rank, count * n, dtype, 5)
        comm.Alltoall(send, out)
        want = np.concatenate([data(r, count * n, dtype, 5)[rank * count:(rank + 1) * count]
                               for r in range(n)])
        expect(f"Alltoall {name} {count}", out, want, True)
        block = np.empty(count, dtype)
        comm.Reduce_scatter_block(send, block, op=MPI.SUM)
        total = np.sum([data(r, count * n, dtype, 5) for r in range(n)], axis=0, dtype=dtype)
        expect(f"Reduce_scatter_block {name} {count}", block,
               total[rank * count:(rank + 1) * count], np.dtype(dtype).kind == "i")
        b = data(0, count, dtype, 7) if rank == 0 else np.zeros(count, dtype)
        comm.Bcast(b, root=0)
        expect(f"Bcast {name} {count}", b, data(0, count, dtype, 7), True)

# Calls that must fall back: MAXLOC on pairs, and a user-defined op.
pairs = np.array([[(rank * 5 + i) % 7, rank] for i in range(50)], dtype=np.int32)
out = np.empty_like(pairs)
comm.Allreduce([pairs, MPI.TWOINT], [out, MPI.TWOINT], op=MPI.MAXLOC)
allp = [np.array([[(r * 5 + i) % 7, r] for i in range(50)], dtype=np.int32) for r in range(n)]
want = np.array([max((allp[r][i][0], -r) for r in range(n)) for i in range(50)])
expect("Allreduce MAXLOC values", out[:, 0], want[:, 0].astype(np.int32), True)
expect("Allreduce MAXLOC ranks", out[:, 1], (-want[:, 1]).astype(np.int32), True)


def mysum(a, b, datatype):
    np.frombuffer(b, dtype=np.int32)[:] += np.frombuffer(a, dtype=np.int32)


op = MPI.Op.Create(mysum, commute=True)
v = data(rank, 100, np.int32, 9)
r = np.empty_like(v)
comm.Allreduce([v, MPI.INT], [r, MPI.INT], op=op)
op.Free()
expect("Allreduce with a user op", r, np.sum([data(q, 100, np.int32, 9) for q in range(n)],
                                              axis=0, dtype=np.int32), True)

if failures:
    for f in failures[:10]:
        print(f"rank {rank}: FAIL {f}")
    print(f"rank {rank}: FAIL {len(failures)} of {checks} checks")
    sys.stdout.flush()
    sys.exit(1)
print(f"rank {rank}: ok {checks} checks")
