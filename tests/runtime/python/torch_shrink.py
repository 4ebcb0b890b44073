"""A DDP training loop that loses a rank (tests/runtime/python/torch-check.sh shrink).

    torch_shrink.py BACKEND OUT_DIR [STEPS [KILL_STEP [VICTIM]]]
    torch_shrink.py compare OUT_DIR N [VICTIM]

Started N times with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (env://),
not under torchrun, whose agent would stop the others itself. Every rank
trains the same small model with DistributedDataParallel on CPU tensors,
on data of its own (seeded by rank and step), for STEPS (8) steps.

- BACKEND coll: at the top of step KILL_STEP (3) the rank VICTIM (2) kills
  itself (SIGKILL). The survivors' step fails (DDP's all-reduce raises
  Coll's error); they call dist.shrink_group([VICTIM]), which "coll"
  supports, wrap the model in a new DDP on the shrunk group, and run the
  step again and the rest.
- BACKEND gloo, the reference: a group of the survivors is made in advance
  (gloo cannot shrink); at step KILL_STEP the victim leaves and the
  survivors go on with a new DDP on that group.

Each survivor saves its parameters and prints "rank R: done"; `compare`
checks with torch.testing.assert_close that every survivor's parameters
after the coll run equal the gloo run's, and prints "shrink: N-1 survivors
match gloo".
"""

import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def model():
    torch.manual_seed(1234)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)


def train_step(ddp, opt, rank, step):
    x, y = batch(rank, step)
    opt.zero_grad(set_to_none=False)
    loss = torch.nn.functional.mse_loss(ddp(x), y)
    loss.backward()
    opt.step()


def run(backend, out, steps, kill_step, victim):
    if backend == "coll":
        import coll.torch  # noqa: F401
    dist.init_process_group(backend=backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    survivors_group = None
    if backend == "gloo":
        survivors_group = dist.new_group([r for r in range(n) if r != victim])
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    ddp = DDP(net)
    step = 0
    shrunk = False
    while step < steps:
        if step == kill_step and not shrunk:
            if rank == victim:
                if backend == "coll":
                    os.kill(os.getpid(), signal.SIGKILL)
                os._exit(0)
            if backend == "gloo":
                ddp = DDP(net, process_group=survivors_group)
                shrunk = True
        try:
            train_step(ddp, opt, rank, step)
        except Exception as e:  # the lost rank: Coll's error, raised by DDP
            if backend != "coll" or shrunk or step != kill_step:
                raise
            t0 = time.monotonic()
            message = str(e).splitlines()[0] if str(e) else type(e).__name__
            print(f"rank {rank}: step {step} failed: {message}", flush=True)
            group = dist.shrink_group([victim])
            print(f"rank {rank}: shrank to rank {dist.get_rank(group)} of "
                  f"{dist.get_world_size(group)} in {(time.monotonic() - t0) * 1000:.0f} ms",
                  flush=True)
            ddp = DDP(net, process_group=group)
            shrunk = True
            continue  # the step again, on the survivors
        step += 1
    if not shrunk:
        print(f"rank {rank}: FAIL the loop ended without losing rank {victim}", flush=True)
        os._exit(1)
    torch.save({k: v.detach().clone() for k, v in net.state_dict().items()},
               os.path.join(out, f"{backend}.{rank}.pt"))
    print(f"rank {rank}: done", flush=True)
    dist.destroy_process_group()


def compare(out, n, victim):
    for r in range(n):
        if r == victim:
            continue
        got = torch.load(os.path.join(out, f"coll.{r}.pt"))
        want = torch.load(os.path.join(out, f"gloo.{r}.pt"))
        for k in want:
            torch.testing.assert_close(got[k], want[k], msg=lambda m: f"rank {r} {k}: {m}")
    print(f"shrink: {n - 1} survivors match gloo", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "compare":
        compare(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 2)
    else:
        run(sys.argv[1], sys.argv[2],
            int(sys.argv[3]) if len(sys.argv) > 3 else 8,
            int(sys.argv[4]) if len(sys.argv) > 4 else 3,
            int(sys.argv[5]) if len(sys.argv) > 5 else 2)
