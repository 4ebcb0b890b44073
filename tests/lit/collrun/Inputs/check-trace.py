"""Checks the structure of a Coll timeline (Chrome trace JSON) and prints a summary.

usage: check-trace.py FILE STEPS  -- fails unless FILE has exactly STEPS step slices.
"""
import json
import sys

events = json.load(open(sys.argv[1]))["traceEvents"]
names = {}
steps = calls = 0
for e in events:
    assert e["ph"] in ("M", "X"), e
    if e["ph"] == "M":
        if e["name"] == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
        continue
    for key in ("name", "cat", "pid", "tid", "ts", "dur"):
        assert key in e, (key, e)
    assert e["dur"] >= 0, e
    assert (e["pid"], e["tid"]) in names, ("unnamed track", e)
    if e["cat"] == "step":
        steps += 1
    elif e["cat"] == "call":
        calls += 1
ranks = len({pid for pid, _ in names})
print(f"ranks {ranks}, tracks {len(names)}, steps {steps}, calls {calls}")
sys.exit(0 if steps == int(sys.argv[2]) else 1)
