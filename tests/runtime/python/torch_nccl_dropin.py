"""PyTorch's own ProcessGroupNCCL over libcoll_nccl.so, under torchrun:

    LD_PRELOAD=libcoll_nccl.so python -m torch.distributed.run --nproc_per_node N \\
        tests/runtime/python/torch_nccl_dropin.py

(torch-nccl-dropin.sh runs it so.) Rank r uses CUDA device LOCAL_RANK modulo
the devices torch sees, so that ranks share a GPU where there are fewer. It
runs the collectives a training job uses on CUDA tensors, checks every
result, takes one DDP step and checks that the ranks' parameters agree, and
prints "rank R: ok".
"""

import os
import sys

import torch
import torch.distributed as dist


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    rank = int(os.environ["RANK"])
    n = int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    dev = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    base = torch.arange(1000, dtype=torch.float32, device=dev)

    x = base + rank
    dist.all_reduce(x)
    check(torch.equal(x, n * base + n * (n - 1) / 2), "all_reduce sum")
    x = base + rank
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    check(torch.equal(x, base + (n - 1)), "all_reduce max")

    gathered = torch.empty(n * 1000, device=dev)
    dist.all_gather_into_tensor(gathered, base + rank)
    for r in range(n):
        check(torch.equal(gathered[r * 1000:(r + 1) * 1000], base + r), f"all_gather part {r}")
    parts = [torch.empty(1000, device=dev) for _ in range(n)]
    dist.all_gather(parts, base + rank)
    check(all(torch.equal(parts[r], base + r) for r in range(n)), "all_gather list")

    out = torch.empty(100, device=dev)
    full = torch.arange(100 * n, dtype=torch.float32, device=dev) + rank
    dist.reduce_scatter_tensor(out, full)
    want = n * torch.arange(100 * rank, 100 * (rank + 1), dtype=torch.float32, device=dev) \
        + n * (n - 1) / 2
    check(torch.equal(out, want), "reduce_scatter")

    y = base + rank
    dist.broadcast(y, src=n - 1)
    check(torch.equal(y, base + (n - 1)), "broadcast")

    send = torch.arange(10 * n, dtype=torch.float32, device=dev) + 1000 * rank
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    for r in range(n):
        check(torch.equal(recv[r * 10:(r + 1) * 10],
                          torch.arange(10 * rank, 10 * (rank + 1), dtype=torch.float32,
                                       device=dev) + 1000 * r), f"all_to_all from {r}")

    # One DDP step: the gradients are all-reduced, so the parameters agree.
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 4).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    torch.manual_seed(100 + rank)
    loss = ddp(torch.randn(8, 16, device=dev)).square().sum()
    loss.backward()
    opt.step()
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    every = torch.empty(n * flat.numel(), device=dev)
    dist.all_gather_into_tensor(every, flat)
    for r in range(n):
        check(torch.equal(every[r * flat.numel():(r + 1) * flat.numel()], flat),
              f"DDP parameters differ from rank {r}'s")

    dist.barrier()
    torch.cuda.synchronize()
    dist.destroy_process_group()
    print(f"rank {rank}: ok", flush=True)


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"rank {os.environ.get('RANK')}: FAIL {e}", flush=True)
        sys.exit(1)
