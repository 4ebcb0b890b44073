"""A torch.distributed program on the "coll" backend, run under torchrun.

    torchrun --nproc_per_node N tests/runtime/python/torch_check.py MODE...   (collectives, ddp, tuning, cuda)

collectives: every collective coll.torch serves, at sizes 0, 1, odd and up
to 2.4 MB, in fp32, bf16 and int32, each result checked against the closed
form and against gloo on the same inputs; async_op=True; send/recv; calls
that must fall back (an unsupported dtype, unequal all-to-all splits).
ddp: a DistributedDataParallel model trained for a few steps on "coll" and
on "gloo" from the same start ends with the same parameters, identical on
every rank. tuning: small all-reduces go to gloo by a tuning rule, large
ones to Coll (the wrapper checks the log). cuda: the collectives on CUDA
tensors (rank r on GPU r mod the GPU count: ranks may share one), each
checked against the closed form; an async call issued on a side stream;
the ddp training on the GPU. Prints "rank R: ok N checks".
"""

import gc
import glob
import os
import sys

import torch
import torch.distributed as dist

import coll.torch  # noqa: F401  registers "coll"

modes = sys.argv[1:]
dist.init_process_group(backend="coll")
rank, n = dist.get_rank(), dist.get_world_size()
gloo = dist.new_group(backend="gloo")
checks = 0


def check(what, got, want, exact=True):
    global checks
    checks += 1
    ok = torch.equal(got, want) if exact else torch.allclose(got.double(), want.double(),
                                                            rtol=1e-3, atol=1e-3)
    if not ok:
        diff = (got.double() - want.double()).abs().reshape(-1)
        i = int(diff.argmax()) if diff.numel() else 0
        print(f"rank {rank}: FAIL {what}: element {i} is {got.reshape(-1)[i].item()}, "
              f"expected {want.reshape(-1)[i].item()}", flush=True)
        sys.exit(1)


def values(r, count, dtype, prod=False):
    i = torch.arange(count, dtype=torch.int64)
    v = ((r + i) % 2 + 1) if prod else ((r * 7 + i * 3) % 5 + 1)
    return v.to(dtype)


def both(fn, *tensors):
    """Runs fn(group, *copies) on coll and on gloo; returns both copies."""
    a = [t.clone() for t in tensors]
    b = [t.clone() for t in tensors]
    fn(None, *a)
    fn(gloo, *b)
    return a, b


# The reduce ops with how each combines the ranks' tensors (PRODUCT: below).
REDUCE_OPS = [(dist.ReduceOp.SUM, lambda xs: sum(xs)),
              (dist.ReduceOp.PRODUCT, None),
              (dist.ReduceOp.MIN, lambda xs: torch.stack(xs).min(0).values),
              (dist.ReduceOp.MAX, lambda xs: torch.stack(xs).max(0).values)]


def collectives():
    for count in (0, 1, 7, 1000, 600001):
        for dtype in (torch.float32, torch.bfloat16, torch.int32):
            tag = f"{dtype} x {count}"
            for op, combine in REDUCE_OPS:
                prod = op == dist.ReduceOp.PRODUCT
                mine = values(rank, count, dtype, prod)
                allv = [values(r, count, dtype, prod) for r in range(n)]
                want = torch.stack(allv).prod(0).to(dtype) if prod else combine(allv).to(dtype)
                (a,), (b,) = both(lambda g, t: dist.all_reduce(t, op=op, group=g), mine)
                check(f"all_reduce {op} {tag}", a, want)
                check(f"all_reduce {op} {tag} against gloo", a, b)
            if dtype != torch.int32:
                t = values(rank, count, dtype)
                dist.all_reduce(t, op=dist.ReduceOp.AVG)
                want = (sum(values(r, count, torch.float64) for r in range(n)) / n).to(dtype)
                check(f"all_reduce AVG {tag}", t, want, exact=False)
            # all_gather (list) and all_gather_into_tensor
            mine = values(rank, count, dtype)
            outs = [torch.empty(count, dtype=dtype) for _ in range(n)]
            dist.all_gather(outs, mine)
            for r in range(n):
                check(f"all_gather {tag} block {r}", outs[r], values(r, count, dtype))
            out = torch.empty(n * count, dtype=dtype)
            dist.all_gather_into_tensor(out, mine)
            check(f"all_gather_into_tensor {tag}", out,
                  torch.cat([values(r, count, dtype) for r in range(n)]))
            # reduce_scatter_tensor
            big = values(rank, n * count, dtype)
            out = torch.empty(count, dtype=dtype)
            dist.reduce_scatter_tensor(out, big)
            total = sum(values(r, n * count, dtype) for r in range(n)).to(dtype)
            check(f"reduce_scatter_tensor {tag}", out, total[rank * count:(rank + 1) * count])
            (a, _), (b, _) = both(lambda g, o, i: dist.reduce_scatter_tensor(o, i, group=g),
                                  out, big)
            check(f"reduce_scatter_tensor {tag} against gloo", a, b)
            # all_to_all_single, equal splits
            out = torch.empty(n * count, dtype=dtype)
            dist.all_to_all_single(out, big)
            want = torch.cat([values(r, n * count, dtype)[rank * count:(rank + 1) * count]
                              for r in range(n)])
            check(f"all_to_all_single {tag}", out, want)
            # broadcast and reduce from the last rank
            root = n - 1
            t = values(root, count, dtype) if rank == root else torch.zeros(count, dtype=dtype)
            dist.broadcast(t, src=root)
            check(f"broadcast {tag}", t, values(root, count, dtype))
            t = values(rank, count, dtype)
            dist.reduce(t, dst=root)
            if rank == root:
                check(f"reduce {tag}", t,
                      sum(values(r, count, dtype) for r in range(n)).to(dtype))
    # The list forms, gather and scatter, the coalesced all-reduce.
    for dtype in (torch.float32, torch.int32):
        count = 1001
        root = n - 1
        mine = values(rank, count, dtype)
        outs = [torch.empty(count, dtype=dtype) for _ in range(n)] if rank == root else None
        dist.gather(mine, outs, dst=root)
        if rank == root:
            for r in range(n):
                check(f"gather {dtype} block {r}", outs[r], values(r, count, dtype))
        out = torch.empty(count, dtype=dtype)
        ins = [values(root, count, dtype) + r for r in range(n)] if rank == root else None
        dist.scatter(out, ins, src=root)
        check(f"scatter {dtype}", out, values(root, count, dtype) + rank)
        ins = [values(rank, count, dtype) + r for r in range(n)]
        dist.reduce_scatter(out, ins)
        check(f"reduce_scatter (list) {dtype}", out,
              (sum(values(q, count, dtype) for q in range(n)) + n * rank).to(dtype))
        outs = [torch.empty(count, dtype=dtype) for _ in range(n)]
        dist.all_to_all(outs, [values(rank, count, dtype) + r for r in range(n)])
        for r in range(n):
            check(f"all_to_all (list) {dtype} block {r}", outs[r], values(r, count, dtype) + rank)
        ts = [values(rank, 10, dtype), values(rank, 3000, dtype)]
        dist.all_reduce_coalesced(ts)
        check(f"all_reduce_coalesced {dtype}", ts[1],
              sum(values(q, 3000, dtype) for q in range(n)).to(dtype))
    # async_op: the Work waits for real.
    t = torch.ones(1 << 18)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    check("all_reduce async_op", t, torch.full((1 << 18,), float(n)))
    fut = dist.all_reduce(t, async_op=True).get_future()
    fut.wait()
    check("all_reduce async_op future", t, torch.full((1 << 18,), float(n * n)))
    dist.barrier()
    # send/recv around a ring: even ranks send first, odd ranks receive first
    # (torch refuses a send to oneself, so not on one rank).
    if n > 1:
        out = torch.zeros(5000)
        mine = torch.full((5000,), float(rank))
        if rank % 2 == 0:
            dist.send(mine, (rank + 1) % n)
            dist.recv(out, (rank - 1) % n)
        else:
            dist.recv(out, (rank - 1) % n)
            dist.send(mine, (rank + 1) % n)
        check("send/recv", out, torch.full((5000,), float((rank - 1) % n)))
    # Must fall back, still right: bool tensors, unequal all-to-all splits.
    flags = torch.tensor([rank % 2 == 0, True])
    dist.all_reduce(flags, op=dist.ReduceOp.MAX)
    check("all_reduce of bool (gloo)", flags, torch.tensor([True, True]))
    sizes = [r + 1 for r in range(n)]  # rank r sends r+1 elements to every peer
    inp = torch.full((sum([rank + 1] * n),), float(rank))
    out = torch.empty(sum(sizes))
    dist.all_to_all_single(out, inp, output_split_sizes=sizes, input_split_sizes=[rank + 1] * n)
    check("all_to_all_single with unequal splits (gloo)", out,
          torch.cat([torch.full((r + 1,), float(r)) for r in range(n)]))


def ddp(device=None):
    torch.manual_seed(1234)
    start = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4))
    results = []
    for group in (None, gloo):
        model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(),
                                    torch.nn.Linear(64, 4))
        model.load_state_dict(start.state_dict())
        model.to(device or "cpu")
        net = torch.nn.parallel.DistributedDataParallel(
            model, process_group=group, device_ids=[device] if device is not None else None)
        opt = torch.optim.SGD(net.parameters(), lr=0.05)
        gen = torch.Generator().manual_seed(100 + rank)
        for _ in range(5):
            x = torch.randn(16, 32, generator=gen).to(device or "cpu")
            y = torch.randn(16, 4, generator=gen).to(device or "cpu")
            opt.zero_grad()
            torch.nn.functional.mse_loss(net(x), y).backward()
            opt.step()
        results.append(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
    check("ddp: coll against gloo", results[0], results[1], exact=False)
    gathered = [torch.empty_like(results[0]) for _ in range(n)]
    dist.all_gather(gathered, results[0])
    for r in range(n):
        check(f"ddp: rank {r}'s parameters equal this rank's", gathered[r], results[0])


def cuda():
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    for count in (1, 1000, 600001):
        for dtype in (torch.float32, torch.bfloat16, torch.int32):
            tag = f"cuda {dtype} x {count}"
            for op, combine in REDUCE_OPS:
                prod = op == dist.ReduceOp.PRODUCT
                allv = [values(r, count, dtype, prod) for r in range(n)]
                want = torch.stack(allv).prod(0).to(dtype) if prod else combine(allv).to(dtype)
                t = values(rank, count, dtype, prod).to(dev)
                dist.all_reduce(t, op=op)
                check(f"all_reduce {op} {tag}", t.cpu(), want)
            if dtype != torch.int32:
                t = values(rank, count, dtype).to(dev)
                dist.all_reduce(t, op=dist.ReduceOp.AVG)
                want = (sum(values(r, count, torch.float64) for r in range(n)) / n).to(dtype)
                check(f"all_reduce AVG {tag}", t.cpu(), want, exact=False)
            mine = values(rank, count, dtype).to(dev)
            out = torch.empty(n * count, dtype=dtype, device=dev)
            dist.all_gather_into_tensor(out, mine)
            check(f"all_gather_into_tensor {tag}", out.cpu(),
                  torch.cat([values(r, count, dtype) for r in range(n)]))
            outs = [torch.empty(count, dtype=dtype, device=dev) for _ in range(n)]
            dist.all_gather(outs, mine)
            for r in range(n):
                check(f"all_gather {tag} block {r}", outs[r].cpu(), values(r, count, dtype))
            big = values(rank, n * count, dtype).to(dev)
            out = torch.empty(count, dtype=dtype, device=dev)
            dist.reduce_scatter_tensor(out, big)
            total = sum(values(r, n * count, dtype) for r in range(n)).to(dtype)
            check(f"reduce_scatter_tensor {tag}", out.cpu(), total[rank * count:(rank + 1) * count])
            out = torch.empty(n * count, dtype=dtype, device=dev)
            dist.all_to_all_single(out, big)
            want = torch.cat([values(r, n * count, dtype)[rank * count:(rank + 1) * count]
                              for r in range(n)])
            check(f"all_to_all_single {tag}", out.cpu(), want)
            root = n - 1
            t = (values(root, count, dtype) if rank == root
                 else torch.zeros(count, dtype=dtype)).to(dev)
            dist.broadcast(t, src=root)
            check(f"broadcast {tag}", t.cpu(), values(root, count, dtype))
            t = values(rank, count, dtype).to(dev)
            dist.reduce(t, dst=root)
            if rank == root:
                check(f"reduce {tag}", t.cpu(),
                      sum(values(r, count, dtype) for r in range(n)).to(dtype))
    # Issued on a side stream after work of that stream; wait() orders the
    # current stream after it.
    side = torch.cuda.Stream()
    t = torch.ones(1 << 20, device=dev)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        t.mul_(3)
        work = dist.all_reduce(t, async_op=True)
    work.wait()
    check("all_reduce async_op on a side stream", t.cpu(), torch.full((1 << 20,), 3.0 * n))
    ddp(dev)


def tuning():
    for count in (16, 256, 100000):  # 64 B and 1 KiB go to gloo, 400 KB to Coll
        t = torch.full((count,), float(rank))
        dist.all_reduce(t)
        check(f"all_reduce {count} under the tuning table", t,
              torch.full((count,), float(n * (n - 1) / 2)))


def threads_named(prefixes):
    """The names of this process's threads that start with one of `prefixes`."""
    names = []
    for task in glob.glob("/proc/self/task/*/comm"):
        try:
            with open(task) as f:
                name = f.read().strip()
        except OSError:  # the thread ended
            continue
        if name.startswith(prefixes):
            names.append(name)
    return names


for mode in modes:
    {"collectives": collectives, "ddp": ddp, "tuning": tuning, "cuda": cuda}[mode]()
backend = dist.group.WORLD._get_backend(torch.device("cpu"))
dist.destroy_process_group()
# A call that reaches coll's backend after destroy_process_group fails, and
# says why.
try:
    backend.allreduce([torch.ones(4)]).wait()
    print(f"rank {rank}: FAIL a call after destroy_process_group succeeded", flush=True)
    sys.exit(1)
except RuntimeError as e:
    check("a call after destroy_process_group fails",
          torch.tensor("shut down" in str(e)), torch.tensor(True))
# destroy_process_group ended the gloo backend underneath coll's, and with
# torch's own gloo group (this test's `gloo`, which the ddp objects of ddp()
# refer to in cycles) let go too, no gloo thread is left: none can be at work
# when the interpreter finalizes (a gloo worker that then drops a tensor may
# ask for the GIL, and Python ends it inside C++ code: std::terminate).
del backend, gloo
gc.collect()
left = threads_named(("gloo", "pt_gloo"))
check(f"gloo threads after destroy_process_group: {left}", torch.tensor(len(left)),
      torch.tensor(0))
print(f"rank {rank}: ok {checks} checks", flush=True)
