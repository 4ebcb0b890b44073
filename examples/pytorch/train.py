"""DistributedDataParallel training on Coll's collectives.

    PYTHONPATH=PREFIX/lib/python torchrun --nproc_per_node 4 train.py --backend coll
    COLL_DEBUG=INFO torchrun ... --backend coll      # which algorithm served each call
    torchrun --nproc_per_node 4 train.py --backend gloo   # the same run on gloo, to compare

Each rank trains the same small model on its own random batches; DDP
averages the gradients with an all-reduce on the chosen backend. At the
end rank 0 prints the loss and a checksum of the parameters, which is the
same for "coll" and "gloo" up to reduction-order rounding.
"""

import argparse

import torch
import torch.distributed as dist

import coll.torch  # noqa: F401  (registers the "coll" backend)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="coll")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    dist.init_process_group(backend=args.backend)
    rank = dist.get_rank()
    torch.manual_seed(0)  # the same initial model on every rank
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(1000 + rank)  # each rank its own data
    for step in range(args.steps):
        x = torch.randn(32, 64, generator=data)
        y = torch.randint(0, 10, (32,), generator=data)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        if rank == 0 and (step % 5 == 0 or step == args.steps - 1):
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
    checksum = sum(p.detach().double().sum().item() for p in model.parameters())
    if rank == 0:
        print(f"backend {args.backend}: parameter checksum {checksum:.6f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
