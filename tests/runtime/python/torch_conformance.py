"""coll.torch against gloo, call by call, under torchrun.

    torchrun --nproc_per_node N tests/runtime/python/torch_conformance.py [cpu|cuda] [failure]

The default group is "coll"; a gloo group spans the same ranks. Every call
the backend takes (every c10d operation it registers, each form torch's
Python API reaches it by) runs on both groups from the same inputs: every
dtype torch has, every ReduceOp (AVG and PREMUL_SUM included), contiguous
tensors, contiguous views into a larger tensor and strided views, with
async_op=False and with async_op=True and wait(), and the coalesced forms.
After each call every byte of every tensor it was given is compared, the
whole storage under each view included (what the call must leave alone),
and so are the errors: where gloo raises, coll must raise the same type
with the same message. A difference prints the call, its arguments and the
first differing element, and the run fails. dist.split_group's groups are
checked the same way against the gloo group's split. Point-to-point as
gloo defines it (issue 68): tags received out of order, receives posted
before sends and after them at 7 elements and at 4 MiB, and a receive from
any source for a message from every peer.

failure: a planted failure first (one all-reduce of mismatched sizes, which
Coll serves and refuses), which must raise Coll's error on every rank; then
100 rounds of one call of every kind as above (through float32, int32 and
bool, the ops and the layouts), each equal to gloo's (the group runs them on gloo from then on; the wrapper
checks the one warning).

cuda: the same on CUDA tensors (rank r on GPU r mod the GPU count); the
wrapper skips it where torch sees no GPU.

Prints "rank R: ok N calls" (N calls compared).
"""

import datetime
import os
import sys

import torch
import torch.distributed as dist

import coll.torch  # noqa: F401  registers "coll"

args = sys.argv[1:]
device = "cuda" if "cuda" in args else "cpu"
# A hang fails the run within a minute (gloo's timeout), with the call traced.
TIMEOUT = datetime.timedelta(seconds=60)
TRACE = os.environ.get("COLL_CONFORMANCE_TRACE") == "1"
dist.init_process_group(backend="coll", timeout=TIMEOUT)
rank, n = dist.get_rank(), dist.get_world_size()
if device == "cuda":
    torch.cuda.set_device(rank % torch.cuda.device_count())
    device = f"cuda:{torch.cuda.current_device()}"
COLL = dist.group.WORLD
GLOO = dist.new_group(backend="gloo", timeout=TIMEOUT)
compared = 0
failures = 0

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128,
          torch.complex32, torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn,
          torch.float8_e5m2]
OPS = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX,
       dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR, dist.ReduceOp.AVG, "PREMUL_SUM"]
# Contiguous tensors; contiguous views at an offset into a larger tensor;
# strided views (every other element). A view's base is filled with a mark
# first, which the call must leave as it is.
LAYOUTS = ["contiguous", "offset", "strided"]


def op_of(op):
    """A fresh ReduceOp (PREMUL_SUM's carries its factor)."""
    return dist._make_nccl_premul_sum(2.0) if op == "PREMUL_SUM" else op


def op_name(op):
    return op if isinstance(op, str) else str(op).split(".")[-1]


def tensor(count, dtype, layout, seed):
    """`count` small whole values (exact in every dtype and every sum order)
    in the layout; the same on both groups for the same seed."""
    g = torch.Generator().manual_seed(seed * 1009 + rank * 7919 + count)
    unsigned = dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64, torch.bool)
    lo, hi = (0, 2) if dtype == torch.bool else (0, 4) if unsigned else (-3, 4)
    v = torch.randint(lo, hi, (count,), generator=g).to(torch.float64)
    if dtype.is_complex:
        v = torch.complex(v, torch.randint(-3, 4, (count,), generator=g).to(torch.float64))
    v = v.to(dtype)
    mark = torch.full((1,), 1 if dtype == torch.bool else 5, dtype=torch.float64).to(dtype)
    if layout == "contiguous":
        t = v
    elif layout == "offset":
        t = mark.repeat(count + 5)[3:3 + count]
    else:
        t = mark.repeat(2 * count + 1)[1::2]
    if layout != "contiguous":
        t.copy_(v)
    if device == "cpu":
        return t
    moved = (t._base if t._base is not None else t).to(device)
    return moved.as_strided(t.size(), t.stride(), t.storage_offset())


def tensors(obj):
    """The tensors of a nested argument structure, in order."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in tensors(o)]
    if isinstance(obj, dict):
        return [t for k in sorted(obj) for t in tensors(obj[k])]
    return []


def storage_bytes(t):
    """Every byte of the storage under `t` (the view and what lies around it)."""
    if t.is_sparse:
        t = t.coalesce().to_dense()
    s = t.untyped_storage()
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(s).cpu().clone()


def describe(kwargs):
    return ", ".join(f"{k}={v}" for k, v in kwargs.items())


def report(call, kwargs, what):
    global failures
    failures += 1
    if failures <= int(os.environ.get("COLL_CONFORMANCE_SHOW", "20")):
        print(f"rank {rank}: DIFFERENCE {call}({describe(kwargs)}): {what}", flush=True)


def first_difference(t, a, b):
    """Where the bytes `a` and `b` of `t`'s storage first differ: the
    element, inside the view or outside it, and its two values."""
    size = t.element_size()
    i = int((a != b).nonzero()[0]) if a.numel() == b.numel() else min(a.numel(), b.numel())
    elem = i // size
    where = f"storage element {elem}, outside the view"
    if t.numel():
        # The storage offset of every index of the view.
        offs = torch.full(t.shape, t.storage_offset(), dtype=torch.int64)
        for d, (sz, st) in enumerate(zip(t.shape, t.stride())):
            shape = [1] * t.dim()
            shape[d] = sz
            offs = offs + (torch.arange(sz) * st).view(shape)
        hit = (offs == elem).nonzero()
        if len(hit):
            where = f"element {tuple(int(x) for x in hit[0])}"
    value = lambda raw: raw[elem * size:(elem + 1) * size].view(t.dtype).tolist() \
        if raw.numel() >= (elem + 1) * size else "(none)"  # noqa: E731
    return f"{where}: gloo {value(a)}, coll {value(b)}"


def sequence_number(group):
    """_get_sequence_number_for_group(): one more per call, as gloo counts."""
    return group._get_sequence_number_for_group()


def conform(call, fn, make, **kwargs):
    """Runs fn(group, *make()) on gloo and on coll; compares every byte the
    arguments hold afterwards, and the errors."""
    global compared
    compared += 1
    if TRACE:
        print(f"rank {rank}: {call}({describe(kwargs)})", flush=True)
    outcome = {}
    for name, group in (("gloo", GLOO), ("coll", COLL)):
        made = make()
        before = sequence_number(group)
        try:
            work = fn(group, *made)
            for w in (work if isinstance(work, list) else [work]):
                if hasattr(w, "wait"):
                    w.wait()
            error = None
        except Exception as e:  # noqa: BLE001  every error is compared
            error = (type(e).__name__, str(e).split("\n")[0])
        outcome[name] = (made, error, sequence_number(group) - before)
        if device != "cpu":
            torch.cuda.synchronize()
    (ga, ge, gs), (ca, ce, cs) = outcome["gloo"], outcome["coll"]
    if gs != cs:  # torch's flight recorder and desync checks read it
        report(call, kwargs, f"the group's sequence number went up by {gs} on gloo, {cs} on coll")
        return
    if ge != ce:
        report(call, kwargs, f"gloo raised {ge}, coll raised {ce}")
        return
    if ge is not None and TRACE:
        print(f"rank {rank}: both raised {ge}", flush=True)
    if ge is not None:
        # What a call that raised left in its tensors is not the same from
        # one gloo call to the next (reduce_scatter's AVG of integers, on two
        # gloo groups), so only the error is compared.
        return
    for i, (gt, ct) in enumerate(zip(tensors(ga), tensors(ca))):
        gb, cb = storage_bytes(gt), storage_bytes(ct)
        if gb.numel() != cb.numel() or not torch.equal(gb, cb):
            report(call, kwargs, f"tensor {i} ({tuple(gt.shape)} {gt.dtype}), "
                   + first_difference(gt.cpu(), gb, cb))
            return


def both_ways(call, fn, make, **kwargs):
    """conform() with async_op=False and with async_op=True and wait()."""
    for asynchronous in (False, True):
        conform(call, lambda g, *a: fn(g, asynchronous, *a), make, async_op=asynchronous,
                **kwargs)


# -- the calls ---------------------------------------------------------------

def reductions(count, dtypes, ops, layouts, seed):
    roots = sorted({0, n - 1})
    for dtype in dtypes:
        for op in ops:
            for layout in layouts:
                kw = dict(count=count, dtype=dtype, op=op_name(op), layout=layout)
                mk = lambda: (tensor(count, dtype, layout, seed),)  # noqa: E731
                both_ways("all_reduce", lambda g, a, t: dist.all_reduce(
                    t, op=op_of(op), group=g, async_op=a), mk, **kw)
                for root in roots:
                    both_ways("reduce", lambda g, a, t: dist.reduce(
                        t, dst=root, op=op_of(op), group=g, async_op=a), mk, dst=root, **kw)
                both_ways("reduce_scatter_tensor", lambda g, a, o, i: dist.reduce_scatter_tensor(
                    o, i, op=op_of(op), group=g, async_op=a),
                    lambda: (tensor(count, dtype, layout, seed + 1),
                             tensor(count * n, dtype, layout, seed)), **kw)
                both_ways("reduce_scatter", lambda g, a, o, i: dist.reduce_scatter(
                    o, i, op=op_of(op), group=g, async_op=a),
                    lambda: (tensor(count, dtype, layout, seed + 1),
                             [tensor(count, dtype, layout, seed + 2 + r) for r in range(n)]), **kw)
                conform("all_reduce_coalesced", lambda g, ts: dist.all_reduce_coalesced(
                    ts, op=op_of(op), group=g),
                    lambda: ([tensor(count, dtype, layout, seed),
                              tensor(count + 2, dtype, layout, seed + 1)],), **kw)
                conform("_coalescing_manager(all_reduce)", coalesced_all_reduce(op),
                        lambda: ([tensor(count, dtype, layout, seed),
                                  tensor(count + 1, dtype, layout, seed + 1)],), **kw)
                conform("_coalescing_manager(reduce_scatter_tensor)",
                        coalesced_reduce_scatter(op),
                        lambda: ([tensor(count, dtype, layout, seed + 1),
                                  tensor(count + 1, dtype, layout, seed + 2)],
                                 [tensor(count * n, dtype, layout, seed + 3),
                                  tensor((count + 1) * n, dtype, layout, seed + 4)]), **kw)


def coalesced_all_reduce(op):
    def run(g, ts):
        with dist._coalescing_manager(group=g, async_ops=True) as cm:
            for t in ts:
                dist.all_reduce(t, op=op_of(op), group=g)
        cm.wait()
    return run


def coalesced_reduce_scatter(op):
    def run(g, outs, ins):
        with dist._coalescing_manager(group=g, async_ops=True) as cm:
            for o, i in zip(outs, ins):
                dist.reduce_scatter_tensor(o, i, op=op_of(op), group=g)
        cm.wait()
    return run


def coalesced_all_gather(g, outs, ins):
    with dist._coalescing_manager(group=g, async_ops=True) as cm:
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i, group=g)
    cm.wait()


def movements(count, dtypes, layouts, seed):
    roots = sorted({0, n - 1})
    for dtype in dtypes:
        for layout in layouts:
            kw = dict(count=count, dtype=dtype, layout=layout)
            t = lambda c, s: tensor(c, dtype, layout, s)  # noqa: E731
            for root in roots:
                both_ways("broadcast", lambda g, a, x: dist.broadcast(
                    x, src=root, group=g, async_op=a), lambda: (t(count, seed),), src=root, **kw)
                both_ways("gather", lambda g, a, x, out: dist.gather(
                    x, out if rank == root else None, dst=root, group=g, async_op=a),
                    lambda: (t(count, seed), [t(count, seed + 1 + r) for r in range(n)]),
                    dst=root, **kw)
                both_ways("scatter", lambda g, a, x, ins: dist.scatter(
                    x, ins if rank == root else None, src=root, group=g, async_op=a),
                    lambda: (t(count, seed), [t(count, seed + 1 + r) for r in range(n)]),
                    src=root, **kw)
            both_ways("all_gather", lambda g, a, outs, x: dist.all_gather(
                outs, x, group=g, async_op=a),
                lambda: ([t(count, seed + 1 + r) for r in range(n)], t(count, seed)), **kw)
            both_ways("all_gather_into_tensor", lambda g, a, out, x: dist.all_gather_into_tensor(
                out, x, group=g, async_op=a), lambda: (t(count * n, seed + 1), t(count, seed)),
                **kw)
            both_ways("all_to_all_single", lambda g, a, out, x: dist.all_to_all_single(
                out, x, group=g, async_op=a), lambda: (t(count * n, seed + 1), t(count * n, seed)),
                **kw)
            # Unequal splits: rank r sends r + j + 1 elements to rank j.
            ins = [rank + j + 1 for j in range(n)]
            outs = [j + rank + 1 for j in range(n)]
            both_ways("all_to_all_single", lambda g, a, out, x: dist.all_to_all_single(
                out, x, outs, ins, group=g, async_op=a),
                lambda: (t(sum(outs), seed + 1), t(sum(ins), seed)), splits=ins, **kw)
            both_ways("all_to_all", lambda g, a, o, i: dist.all_to_all(o, i, group=g, async_op=a),
                      lambda: ([t(count, seed + 1 + r) for r in range(n)],
                               [t(count, seed + 10 + r) for r in range(n)]), **kw)
            conform("all_gather_coalesced", lambda g, outs, ins: dist.all_gather_coalesced(
                outs, ins, group=g),
                lambda: ([[t(count, seed + 1 + r), t(count + 1, seed + 20 + r)] for r in range(n)],
                         [t(count, seed), t(count + 1, seed + 30)]), **kw)
            conform("_coalescing_manager(all_gather_into_tensor)", coalesced_all_gather,
                    lambda: ([t(count * n, seed + 1), t((count + 1) * n, seed + 2)],
                             [t(count, seed + 3), t(count + 1, seed + 4)]), **kw)
            point_to_point(count, dtype, layout, seed)


def point_to_point(count, dtype, layout, seed):
    """Around the ring: send to the next rank, receive from the one before
    (isend/irecv, then send/recv ordered by rank parity, then batch_isend_irecv)."""
    if n < 2 or count == 0:  # an empty send never completes on gloo itself
        return
    kw = dict(count=count, dtype=dtype, layout=layout)
    nxt, prev = (rank + 1) % n, (rank - 1) % n
    mk = lambda: (tensor(count, dtype, layout, seed), tensor(count, dtype, layout, seed + 1))  # noqa

    def isend_irecv(g, s, r):
        return [dist.isend(s, dst=nxt, group=g), dist.irecv(r, src=prev, group=g)]

    def send_recv(g, s, r):
        if rank % 2 == 0:
            dist.send(s, dst=nxt, group=g)
            dist.recv(r, src=prev, group=g)
        else:
            dist.recv(r, src=prev, group=g)
            dist.send(s, dst=nxt, group=g)

    def any_source(g, s, r):
        # The last rank sends to rank 0, which receives from any source and
        # must be told the sender.
        if rank == 0:
            got = dist.recv(r, group=g)
            assert got == n - 1, f"recv from any source names rank {got}, not {n - 1}"
        if rank == n - 1:
            dist.send(s, dst=0, group=g)

    def batch(g, s, r):
        ops = [dist.P2POp(dist.isend, s, nxt, group=g), dist.P2POp(dist.irecv, r, prev, group=g)]
        return dist.batch_isend_irecv(ops)

    conform("isend/irecv", isend_irecv, mk, **kw)
    conform("send/recv", send_recv, mk, **kw)
    conform("recv (any source)", any_source, mk, **kw)
    conform("batch_isend_irecv", batch, mk, **kw)


def point_to_point_orders(seed):
    """Issue 68's cases, each at 7 elements and at 4 MiB (1M floats): the
    ring with every rank's receive posted before its send, and with sends
    first; two messages to one peer received in the other order of their
    tags; an isend whose Work is dropped unwaited (coll only); a receive from
    any source on rank 0 for a message from every other rank. gloo gives each at every size, so coll must too."""
    global compared
    if n < 2:
        return
    nxt, prev = (rank + 1) % n, (rank - 1) % n
    for count in (7, 1 << 20):
        kw = dict(count=count, dtype=torch.float32)
        mk = lambda: (tensor(count, torch.float32, "contiguous", seed),  # noqa: E731
                      tensor(count, torch.float32, "contiguous", seed + 1))

        def receives_first(g, s, r):
            return [dist.irecv(r, src=prev, group=g), dist.isend(s, dst=nxt, group=g)]

        def sends_first(g, s, r):
            return [dist.isend(s, dst=nxt, group=g), dist.irecv(r, src=prev, group=g)]

        def batch_receives_first(g, s, r):
            return dist.batch_isend_irecv([dist.P2POp(dist.irecv, r, prev, group=g),
                                           dist.P2POp(dist.isend, s, nxt, group=g)])

        conform("irecv then isend around the ring", receives_first, mk, **kw)
        conform("isend then irecv around the ring", sends_first, mk, **kw)
        conform("batch_isend_irecv, receives first", batch_receives_first, mk, **kw)

        def tags_swapped(g, a, b):
            # Rank 0 sends a with tag 1, then b with tag 2; rank 1 receives
            # tag 2 first (into b), then tag 1 (into a).
            if rank == 0:
                return [dist.isend(a, dst=1, group=g, tag=1), dist.isend(b, dst=1, group=g, tag=2)]
            if rank == 1:
                return [dist.irecv(b, src=0, group=g, tag=2), dist.irecv(a, src=0, group=g, tag=1)]
            return []

        conform("tags received out of order", tags_swapped, mk, **kw)

        # An isend whose Work is let go unwaited, then the receive: on coll
        # only, as gloo's send may be cancelled with its Work (it timed out
        # so at 7 floats): the message arrives whole.
        compared += 1
        dist.isend(torch.full((count,), float(rank), device=device), dst=nxt, group=COLL)
        r = torch.empty(count, dtype=torch.float32, device=device)
        dist.recv(r, src=prev, group=COLL)
        if not torch.equal(r, torch.full((count,), float(prev), device=device)):
            report("isend never waited for, then recv", dict(group="coll", **kw),
                   f"rank {prev}'s message differs")

        # Any source: the order in which messages arrive is not fixed, so each
        # group is checked on its own: every peer's message is received once,
        # into the receive that reports its rank, whole.
        for name, group in (("gloo", GLOO), ("coll", COLL)):
            compared += 1
            if rank == 0:
                got = {}
                for _ in range(n - 1):
                    r = torch.empty(count, dtype=torch.float32, device=device)
                    src = dist.recv(r, group=group)
                    got[src] = r
                for src in range(1, n):
                    want = torch.full((count,), float(src), device=device)
                    if src not in got or not torch.equal(got[src], want):
                        report("recv (any source) from every peer", dict(group=name, **kw),
                               f"sources {sorted(got)}, rank {src}'s message "
                               + ("missing" if src not in got else "differs"))
                        break
            else:
                dist.send(torch.full((count,), float(rank), device=device), dst=0, group=group)


def the_rest(seed):
    """Calls without dtypes: barrier, monitored_barrier; sparse all_reduce;
    the single-tensor forms of torch's newer API."""
    conform("barrier", lambda g: dist.barrier(group=g), lambda: ())
    conform("barrier(async_op=True)", lambda g: dist.barrier(group=g, async_op=True), lambda: ())
    if device == "cpu":
        conform("monitored_barrier", lambda g: dist.monitored_barrier(group=g), lambda: ())
    for layout in LAYOUTS:
        kw = dict(dtype=torch.float32, layout=layout)
        t = lambda c, s: tensor(c, torch.float32, layout, s)  # noqa: E731
        conform("all_gather_single", lambda g, o, i: dist.all_gather_single(o, i, group=g),
                lambda: (t(3 * n, seed), t(3, seed + 1)), **kw)
        conform("reduce_scatter_single", lambda g, o, i: dist.reduce_scatter_single(o, i, group=g),
                lambda: (t(3, seed), t(3 * n, seed + 1)), **kw)
        conform("gather_single", lambda g, o, i: dist.gather_single(o, i, dst=0, group=g),
                lambda: (t(3 * n, seed), t(3, seed + 1)), **kw)
        conform("gather_into_tensor", lambda g, o, i: dist.gather_into_tensor(
            o, i, dst=0, group=g), lambda: (t(3 * n, seed), t(3, seed + 1)), **kw)
    def sparse():
        i = torch.tensor([[0, 2, rank % 3]])
        v = torch.tensor([1.0, 2.0, float(rank)])
        return (torch.sparse_coo_tensor(i, v, (4,)).to(device),)
    conform("all_reduce (sparse)", lambda g, s: dist.all_reduce(s, group=g), sparse)


def split_groups(seed):
    """dist.split_group of "coll" and of the gloo group: the same groups, the
    same results, compared as above between the two children."""
    global COLL, GLOO
    halves = [list(range(0, n, 2)), list(range(1, n, 2))] if n > 1 else [[0]]
    halves = [h[::-1] for h in halves if h]  # ranks in a new order
    c = dist.split_group(COLL, split_ranks=halves)
    g = dist.split_group(GLOO, split_ranks=halves)
    if c.size() != g.size() or c.rank() != g.rank():
        report("split_group", dict(split_ranks=halves),
               f"gloo gives rank {g.rank()} of {g.size()}, coll rank {c.rank()} of {c.size()}")
        return
    saved = COLL, GLOO
    COLL, GLOO = c, g
    try:
        for dtype in (torch.float32, torch.int64):
            t = lambda cnt, s: tensor(cnt, dtype, "strided", s)  # noqa: E731
            kw = dict(dtype=dtype, split_ranks=halves)
            conform("all_reduce on split_group", lambda grp, x: dist.all_reduce(x, group=grp),
                    lambda: (t(7, seed),), **kw)
            conform("all_gather_into_tensor on split_group",
                    lambda grp, o, i: dist.all_gather_into_tensor(o, i, group=grp),
                    lambda: (t(7 * c.size(), seed), t(7, seed + 1)), **kw)
            conform("broadcast on split_group", lambda grp, x: dist.broadcast(
                x, group_src=0, group=grp), lambda: (t(5, seed),), **kw)
    finally:
        COLL, GLOO = saved


def everything(seed, dtypes=DTYPES):
    main = [torch.float32, torch.int32]
    reductions(7, dtypes, OPS, LAYOUTS, seed)
    movements(7, dtypes, LAYOUTS, seed)
    for count in (0, 1, 3000, 20000):  # Coll's algorithms change with the size
        reductions(count, main, [dist.ReduceOp.SUM, dist.ReduceOp.AVG], ["contiguous", "strided"],
                   seed)
        movements(count, main, ["contiguous", "strided"], seed)
    the_rest(seed)
    point_to_point_orders(seed)
    split_groups(seed)


def planted(what, fn):
    """A call that must raise Coll's error on this rank."""
    global failures
    try:
        fn()
        print(f"rank {rank}: FAIL the planted {what} raised nothing", flush=True)
        failures += 1
    except dist.DistBackendError as e:
        print(f"rank {rank}: the planted {what} raised: {str(e).splitlines()[0]}", flush=True)


def rounds(count):
    """`count` rounds of one call of every kind (of both forms, sync and
    async, where it has two), through the dtypes, ops and layouts."""
    for i in range(count):
        dtype = [torch.float32, torch.int32, torch.bool][i % 3]
        layout = LAYOUTS[i % len(LAYOUTS)]
        reductions(7, [dtype], [OPS[i % len(OPS)]], [layout], 7 + i)
        movements(7, [dtype], [layout], 7 + i)
        the_rest(7 + i)


if "failure" in args:
    # Mismatched sizes on one all-reduce Coll serves: Coll refuses the call on
    # every rank (a mismatch between the ranks' calls), and from then on the
    # group runs every call on gloo, agreed by all ranks before the next.
    planted("mismatch", lambda: dist.all_reduce(torch.ones(4 + (rank % 2), device=device)))
    rounds(100)
    split_groups(7)  # groups split from the one on gloo (each starts on Coll)
    # The watchdog, on a group of its own: rank 1 comes to the group's first
    # call two watchdog periods late; the others' calls stop at the watchdog,
    # and its own finds the communicator stopped.
    scale = float(os.environ.get("COLL_TEST_TIME_SCALE", "1"))
    watchdog_ms = int(2000 * scale)
    os.environ["COLL_WATCHDOG_MS"] = str(watchdog_ms)
    late = dist.new_group(backend="coll", timeout=TIMEOUT)
    del os.environ["COLL_WATCHDOG_MS"]
    if rank == 1:
        import time
        time.sleep(2 * watchdog_ms / 1000)
    planted("watchdog", lambda: dist.all_reduce(torch.ones(1000, device=device), group=late))
    COLL = late
    rounds(3)
    COLL = dist.group.WORLD
elif os.environ.get("COLL_CONFORMANCE_DTYPES"):  # a subset, to look into a difference
    everything(1, dtypes=[getattr(torch, d) for d in os.environ["COLL_CONFORMANCE_DTYPES"].split(",")])
else:
    everything(1)

dist.barrier()
dist.destroy_process_group()
if failures:
    print(f"rank {rank}: {failures} differences in {compared} calls", flush=True)
    sys.exit(1)
print(f"rank {rank}: ok {compared} calls", flush=True)
