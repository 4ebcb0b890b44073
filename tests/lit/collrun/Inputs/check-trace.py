"""Checks the structure of a Coll timeline (Chrome trace JSON) and prints a summary.

usage: check-trace.py FILE STEPS [--within-calls]
  Fails unless FILE has exactly STEPS step slices; with --within-calls, also
  unless every step and wait slice lies within a call slice of its rank.
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
if "--within-calls" in sys.argv[3:]:
    spans = {}
    for e in events:
        if e["ph"] == "X" and e["cat"] == "call":
            spans.setdefault(e["pid"], []).append((e["ts"], e["ts"] + e["dur"]))
    for e in events:
        if e["ph"] == "X" and e["cat"] in ("step", "wait"):
            begin, end = e["ts"], e["ts"] + e["dur"]
            # Microseconds with three decimals: allow the rounding.
            assert any(b - 0.002 <= begin and end <= f + 0.002 for b, f in spans.get(e["pid"], [])), \
                ("outside every call of its rank", e)
ranks = len({pid for pid, _ in names})
print(f"ranks {ranks}, tracks {len(names)}, steps {steps}, calls {calls}")
sys.exit(0 if steps == int(sys.argv[2]) else 1)
