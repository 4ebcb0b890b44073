"""Prints the longest tb of a Coll timeline (collrun --trace): the steps a tb
executes per call, where a fused `re` group is one step, as the runtimes run
it.

usage: longest-tb.py FILE
  Counts the step slices of the first pipeline iteration of each tb track,
  divided by the calls of its rank, and prints
  "longest tb: STEPS steps (rank R tb T: NAMES)" for the first longest one.
"""
import json
import sys

events = json.load(open(sys.argv[1]))["traceEvents"]
tracks = {}
calls = {}
for e in events:
    if e["ph"] != "X":
        continue
    if e["cat"] == "call":
        calls[e["pid"]] = calls.get(e["pid"], 0) + 1
    elif e["cat"] == "step" and e["args"]["iteration"] == 0:
        tracks.setdefault((e["pid"], e["tid"]), []).append(e)
best = None
for (pid, tid), steps in sorted(tracks.items()):
    n = calls[pid]
    assert len(steps) % n == 0, ("steps not a multiple of the calls", pid, tid)
    count = len(steps) // n
    if best is None or count > best[0]:
        first = sorted(steps, key=lambda e: e["ts"])[:count]
        best = (count, pid, tid, " ".join(e["name"] for e in first))
count, pid, tid, names = best
# Track 0 of a rank is the rank's own; tb t is track t + 1.
print(f"longest tb: {count} steps (rank {pid} tb {tid - 1}: {names})")
