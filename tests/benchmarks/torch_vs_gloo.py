"""A benchmark, not a test: torch.distributed on "coll" against "gloo" (and
"mpi" when the installed torch has it), in the same run, on the same CPU
tensors. "coll-direct" makes coll's calls on the group's backend object
itself (`group._get_backend(cpu).allreduce([t]).wait()`), past
torch.distributed's Python layer and the dispatcher: the difference to
"coll" is what torch adds to every call, whichever backend serves it.
"torch-floor" is torch's own no-op C++ backend ("fake", which returns at
once and moves nothing) called as "coll" is: what torch.distributed itself
costs per call, whichever backend serves it (torch attaches no flight
recorder hook to it, so the floor leaves out the hook's cost that "coll" and
other out-of-tree backends pay); its results are not checked and it has no
bandwidth.

    PYTHONPATH=runtime/python torchrun --nproc_per_node 2 \\
        tests/benchmarks/torch_vs_gloo.py [--max-bytes 64M] [--plot FILE.svg]
            [--op all_reduce,all_gather_into_tensor,reduce_scatter_tensor,pingpong,exchange]
            [--min-bytes 4n] [--factor 4]

For all_reduce, all_gather_into_tensor and reduce_scatter_tensor, from 4 B
to --max-bytes (nccl-tests' size: the larger buffer), it prints the time per call
(the slowest rank's average over as many calls as fit in about 0.2 s, after
as many warm-up calls as fit in about 0.05 s, at most 300) on each backend and the ratio coll/gloo. Results are checked once
per size. On a terminal, rank 0 shows on standard error the size running and
the time left, on one line that it clears before each row.

Point-to-point (--op pingpong,exchange; an even number of processes, rank
r paired with r^1), as OSU's osu_latency and osu_bibw: "pingpong" is one
round trip of dist.isend and dist.irecv, each waited for (the even rank
sends first), "exchange" each rank of a pair isend-ing to the other and
irecv-ing from it at once, both then waited for. "coll-direct" makes them
on the backend object (send, recv). Their bandwidth counts the bytes that
cross: twice the message per round trip, or per exchange. --plot draws the run with collplot (tools/collplot: $COLL_PLOT,
else on PATH, else build/bin beside this file's repository): time per call
and bus bandwidth against size, a line per collective for coll and dashed
ones for the other backends.
"""

import argparse
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist

import coll.torch  # noqa: F401


def parse_size(text):
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1].upper(), 1)
    return int(text[:-1] if scale > 1 else text) * scale


# nccl-tests' bus bandwidth factors, per collective, for n ranks.
BUS_FACTOR = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather_into_tensor": lambda n: (n - 1) / n,
    "reduce_scatter_tensor": lambda n: (n - 1) / n,
    "pingpong": lambda n: 2.0,
    "exchange": lambda n: 2.0,
}
POINT_TO_POINT = ("pingpong", "exchange")


def collplot():
    here = os.path.dirname(os.path.abspath(__file__))
    built = os.path.join(here, "..", "..", "build", "bin", "collplot")
    for candidate in (os.environ.get("COLL_PLOT"), shutil.which("collplot"), built):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise SystemExit("--plot needs collplot (tools/collplot): set COLL_PLOT, put it on PATH, "
                     "or build it in build/")


def write_plot(path, title, points):
    with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as tsv:
        for series, reference, size, seconds, busbw in points:
            tsv.write(f"{series}\t{int(reference)}\t{size}\t{seconds!r}\t{busbw!r}\n")
    try:
        subprocess.run([collplot(), tsv.name, "-o", path, "--title", title], check=True)
    finally:
        os.unlink(tsv.name)


class Progress:
    """tools/support/Progress.h's line in Python: on a terminal only (standard
    error), "torch-vs-gloo: WHAT (STEP/STEPS), about T left", rewritten with
    '\\r'; every size is timed for about as long, so each step weighs 1."""

    def __init__(self, steps):
        self.on = sys.stderr.isatty()
        self.steps, self.step, self.start = steps, 0, time.monotonic()
        self.width = shutil.get_terminal_size((80, 24)).columns if self.on else 80

    def show(self, what):
        if not self.on:
            return
        line = f"torch-vs-gloo: {what} ({self.step + 1}/{self.steps})"
        if self.step:
            left = (time.monotonic() - self.start) / self.step * (self.steps - self.step)
            t = int(left + 0.5)
            line += (", under 1 s left" if t < 1 else f", about {t} s left" if t < 60
                     else f", about {t // 60} min {t % 60} s left")
        self.step += 1
        sys.stderr.write("\r" + line[:self.width - 1] + "\033[K")
        sys.stderr.flush()

    def clear(self):
        if self.on:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-bytes", default="64M")
    ap.add_argument("--plot", metavar="FILE.svg")
    ap.add_argument("--op", default="all_reduce,all_gather_into_tensor,reduce_scatter_tensor")
    ap.add_argument("--min-bytes", help="the first size (default 4 B per process)")
    ap.add_argument("--factor", type=int, default=4, help="each size this times the last")
    args = ap.parse_args()
    collectives = tuple(args.op.split(","))
    for c in collectives:
        if c not in BUS_FACTOR:
            raise SystemExit(f"torch_vs_gloo.py: --op {c} is not one of {', '.join(BUS_FACTOR)}")
    if args.factor < 2:
        raise SystemExit("torch_vs_gloo.py: --factor takes a whole number from 2 up")
    if args.plot:
        collplot()  # missing: say so before the run
    points = []
    dist.init_process_group("coll")
    rank, n = dist.get_rank(), dist.get_world_size()
    # The same calls on the coll group's backend object itself, past
    # torch.distributed's Python layer and the dispatcher: what torch adds.
    direct = dist.group.WORLD._get_backend(torch.device("cpu"))
    groups = {"coll": None, "coll-direct": direct}
    groups["gloo"] = dist.new_group(backend="gloo")
    try:
        # Importing it registers torch's no-op backend "fake".
        importlib.import_module("torch.testing._internal.distributed.fake_pg")
        groups["torch-floor"] = dist.new_group(backend="fake")
    except Exception as e:  # a torch without it: no column
        if dist.get_rank() == 0:
            print(f"# no torch-floor column: {e}")
    if dist.is_mpi_available():
        try:
            groups["mpi"] = dist.new_group(backend="mpi")
        except Exception:
            pass

    def point_to_point(name, group, size):
        """A pingpong or an exchange with rank ^ 1 (see the module's doc)."""
        peer = rank ^ 1
        send, recv = torch.full((size // 4,), float(rank + 1)), torch.empty(size // 4)
        want = float((rank & ~1) + 1 if name == "pingpong" else peer + 1)
        if group is direct:
            def isend(t):
                return direct.send([t], peer, 0)

            def irecv(t):
                return direct.recv([t], peer, 0)
        else:
            def isend(t):
                return dist.isend(t, dst=peer, group=group)

            def irecv(t):
                return dist.irecv(t, src=peer, group=group)
        if name == "exchange":
            def call():
                works = [irecv(recv), isend(send)]
                for w in works:
                    w.wait()
        elif rank % 2 == 0:
            def call():
                isend(send).wait()
                irecv(recv).wait()
        else:
            def call():
                irecv(recv).wait()
                isend(recv).wait()
        return call, lambda: recv, want

    def run(name, group, size):
        """A call and its result, with the value every element must hold."""
        if name in POINT_TO_POINT:
            return point_to_point(name, group, size)
        want = 1.0 if name == "all_gather_into_tensor" else float(n)
        call, result = collective(name, group, size)
        return call, result, want

    def collective(name, group, size):
        if group is direct:
            if name == "all_reduce":
                t = torch.ones(size // 4)
                return lambda: direct.allreduce([t]).wait(), lambda: t
            if name == "all_gather_into_tensor":
                inp, out = torch.ones(size // 4 // n), torch.empty(size // 4 // n * n)
                return lambda: direct._allgather_base(out, inp).wait(), lambda: out
            inp, out = torch.ones(size // 4 // n * n), torch.empty(size // 4 // n)
            return lambda: direct._reduce_scatter_base(out, inp).wait(), lambda: out
        if name == "all_reduce":
            t = torch.ones(size // 4)
            return lambda: dist.all_reduce(t, group=group), lambda: t
        if name == "all_gather_into_tensor":
            inp, out = torch.ones(size // 4 // n), torch.empty(size // 4 // n * n)
            return lambda: dist.all_gather_into_tensor(out, inp, group=group), lambda: out
        inp, out = torch.ones(size // 4 // n * n), torch.empty(size // 4 // n)
        return lambda: dist.reduce_scatter_tensor(out, inp, group=group), lambda: out

    def seconds(call):
        for _ in range(3):
            call()
        dist.barrier()
        t0 = time.perf_counter()
        call()
        one = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(one, op=dist.ReduceOp.MAX, group=groups["gloo"])
        # Warm-up past the job's start (the first collective timed took
        # 2.5-10x longer in 2 of 9 runs after 3 calls, in none of 6 after
        # 300): the same count on every rank, from the agreed time.
        for _ in range(min(300, int(0.05 / max(one.item(), 1e-7)))):
            call()
        iters = max(5, min(2000, int(0.2 / max(one.item(), 1e-7))))
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            call()
        per = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
        dist.all_reduce(per, op=dist.ReduceOp.MAX, group=groups["gloo"])
        return per.item()

    top = parse_size(args.max_bytes)
    names = list(groups)
    if n % 2 and any(c in POINT_TO_POINT for c in collectives):
        raise SystemExit("torch_vs_gloo.py: pingpong and exchange pair the ranks: run an even "
                         "number of processes")
    sizes = []
    size = parse_size(args.min_bytes) if args.min_bytes else 4 * n
    while size <= top:
        sizes.append(size)
        size *= args.factor
    progress = Progress(len(collectives) * len(sizes)) if rank == 0 else None
    if rank == 0:
        print(f"# torch {torch.__version__}, {n} processes, fp32 CPU tensors; us per call, "
              "the slowest rank's average")
    for coll_name in collectives:
        if rank == 0:
            print(f"#\n# {coll_name:<24} {'size(B)':>10} " +
                  " ".join(f"{b + '(us)':>10}" for b in names) + f" {'coll/gloo':>10}")
        for size in sizes:
            if progress:
                sys.stdout.flush()
                progress.show(f"{coll_name} of {size} bytes")
            times = {}
            for b in names:
                call, result, want = run(coll_name, groups[b], size)
                call()
                if b != "torch-floor" and not torch.all(result() == want):
                    raise SystemExit(f"{b} {coll_name} of {size} B: wrong result")
                # all_reduce keeps accumulating in place while timed; the
                # values grow, which does not change the work done.
                times[b] = seconds(call)
            if rank == 0:
                progress.clear()
                print(f"  {coll_name:<24} {size:>10} " +
                      " ".join(f"{times[b] * 1e6:>10.1f}" for b in names) +
                      f" {times['coll'] / times['gloo']:>10.2f}", flush=True)
                for b in names:
                    # The floor moves nothing: no bandwidth (0 leaves it out).
                    busbw = (0.0 if b == "torch-floor" else
                             size / times[b] / 1e9 * BUS_FACTOR[coll_name](n))
                    points.append((f"{coll_name}, {b}", b != "coll", size, times[b], busbw))
    if rank == 0 and args.plot:
        write_plot(args.plot, f"torch.distributed: coll against {', '.join(names[1:])}, "
                   f"{n} processes, fp32 CPU tensors", points)
        print(f"# plot written to {args.plot}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
