"""One rank of a job whose last rank dies mid-call (tests/runtime/python/torch-check.sh kill).

    torch_kill.py [DELAY_S [LIMIT_S]]

Started N times with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (env://),
not under torchrun, whose agent would stop the others itself. Every rank
all-reduces in a loop; the last one kills itself (SIGKILL) DELAY_S (0.3)
seconds in. The others must get an error from Coll within the watchdog
period and print "rank R: error after MS ms: MESSAGE"; a rank that is still
in the loop after LIMIT_S (60) seconds prints "rank R: FAIL no error".
torch-check.sh passes both, scaled by COLL_TEST_TIME_SCALE.
"""

import os
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist

import coll.torch  # noqa: F401

delay = float(sys.argv[1]) if len(sys.argv) > 1 else 0.3
limit = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0

dist.init_process_group(backend="coll")
rank, n = dist.get_rank(), dist.get_world_size()
t = torch.ones(1 << 16)
dist.all_reduce(t)
start = time.monotonic()
if rank == n - 1:
    threading.Timer(delay, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
died_at = start + delay
try:
    while time.monotonic() - start < limit:
        dist.all_reduce(t)
        t.fill_(1)
except Exception as e:  # the error torch raises from the Work
    ms = int((time.monotonic() - died_at) * 1000)
    message = str(e).splitlines()[0] if str(e) else type(e).__name__
    print(f"rank {rank}: error after {ms} ms: {message}", flush=True)
    os._exit(0)
print(f"rank {rank}: FAIL no error", flush=True)
os._exit(1)
