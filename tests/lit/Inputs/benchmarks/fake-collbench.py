#!/usr/bin/env python3
"""A stand-in for collbench in tests/lit/benchmarks/step-cost.test: prints
collbench's rows for a step-cost program (PROGRAM-PROTOCOL-KN.xml) with
times that are straight lines in K, and for the reference it is asked for
with times that are straight lines in --reference-steps, so that the test
knows every slope step-cost.py must fit. It insists on the references the
script must ask for: the program's floor beside the first protocol's calls
(Simple here), none beside the others."""
import os
import re
import sys

SLOPES = {"Simple": 1.2, "LL": 0.9, "LL128": 1.5}
FLOORS = {"local": ("steps", 0.3), "hop": ("hops", 0.5)}

args = sys.argv[1:]
name = os.path.basename(args[0])
m = re.fullmatch(r"(local|hop)-(Simple|LL|LL128)-K(\d+)\.xml", name)
if not m:
    sys.exit(f"fake collbench: unexpected file {name}")
program, protocol, k = m.group(1), m.group(2), int(m.group(3))
opts = dict(zip(args[1::2], args[2::2]))
size = opts["--size"]
refs = opts.get("--references", "auto")
floor, per_step = FLOORS[program]
want = floor if protocol == "Simple" else "none"
if refs != want:
    sys.exit(f"fake collbench: {name}: --references {refs}, not {want}")
if refs != "none":
    steps = int(opts["--reference-steps"])
    print(f"  {floor:<12} {size:>12} {'-':>12} {'-':>6} {'-':>6} {2 + per_step * steps:10.1f} "
          f"{1.0:8.2f} {'-':>8}")
mode = "in-place" if opts["--mode"] == "inplace" else "out-of-place"
print(f"  {mode:<12} {size:>12} {size:>12} {'uint8':>6} {'sum':>6} "
      f"{3 + SLOPES[protocol] * k:10.1f} {1.0:8.2f} {1.0:8.2f} {0:8}")
