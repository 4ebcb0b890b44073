"""One rank of a job whose last rank dies mid-call (tests/runtime/python/torch-check.sh kill).

Started N times with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (env://),
not under torchrun, whose agent would stop the others itself. Every rank
all-reduces in a loop; the last one kills itself (SIGKILL) 300 ms in. The
others must get an error from Coll within the watchdog period and print
"rank R: error after MS ms: MESSAGE"; a rank that is still in the loop
after 60 s prints "rank R: FAIL no error".
"""

import os
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist

import coll.torch  # noqa: F401

dist.init_process_group(backend="coll")
rank, n = dist.get_rank(), dist.get_world_size()
t = torch.ones(1 << 16)
dist.all_reduce(t)
start = time.monotonic()
if rank == n - 1:
    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
died_at = start + 0.3
try:
    while time.monotonic() - start < 60:
        dist.all_reduce(t)
        t.fill_(1)
except Exception as e:  # the error torch raises from the Work
    ms = int((time.monotonic() - died_at) * 1000)
    message = str(e).splitlines()[0] if str(e) else type(e).__name__
    print(f"rank {rank}: error after {ms} ms: {message}", flush=True)
    os._exit(0)
print(f"rank {rank}: FAIL no error", flush=True)
os._exit(1)
