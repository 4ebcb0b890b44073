#!/usr/bin/env python3
"""The issue time of one warp along a path through a kernel's SASS.

    scripts/cuda-sass-path.py SASS RANGE... [--repeat N] [--latency OP=CYCLES] [-v]

SASS is `cuobjdump -sass -fun NAME CUBIN` of one kernel (docs/CUDA.md,
"Step paths", says where the cubins and cuobjdump are). Each RANGE is
`START-END`, hex addresses as cuobjdump prints them, both included: the
instructions the path runs, in order (a taken branch ends one range, its
target starts the next). The path is run `--repeat` times, as a loop's body
is, and the last run's time is printed: the cost of one more trip.

The model is of one warp alone on its scheduler, which is what a step of the
persistent kernel is (issue 27: every warp of a block runs the step's path,
one per scheduler, and nothing hides its latencies):

  * an instruction issues when the one before it has issued and waited out
    the stall count its control bits give (what ptxas schedules for the
    fixed-latency results: a predicate's path to its branch, an IMAD's
    result), and when every scoreboard it waits on is released;
  * an instruction with variable latency (shared, local, constant and
    global loads, special registers, barriers) releases its write
    scoreboard after the latency of the table below, its read scoreboard
    (its sources may be overwritten) after at most READ_RELEASE cycles.

The latencies are assumptions, not measurements: what published
microbenchmarks give for Hopper (shared memory ~30 cycles, L1 ~35, L2 ~270
for a hit on the near partition), with a global load taken as an L2 hit,
which a step's 1 KiB of a call of a few KiB is. They are overridable
(--latency 'LD\\.E\\.128=600' for data from HBM). Not modelled: other warps,
memory bandwidth, instruction-cache misses, the branch unit's own delays
beyond the stall counts. So the figure is a lower bound on a step's path,
which compares two builds of the same path well, and which a lent GPU's
slopes (tests/benchmarks/step-cost.py) calibrate: docs/performance/gpu.md.
"""
import argparse
import re
import sys

READ_RELEASE = 20

# First match wins: (regex on the opcode, cycles until the write scoreboard
# is released).
LATENCIES = [
    (r"LDS", 30),
    (r"LDSM", 30),
    (r"LDL", 35),
    (r"U?LDC", 15),
    (r"S2U?R", 25),
    (r"LDG", 270),
    (r"LD\.E\.128", 270),
    (r"LD\..*STRONG", 270),
    (r"LD\b", 35),  # generic loads of the step tables: shared memory
    (r"LD\.", 35),
    (r"ATOM", 270),
    (r"MEMBAR", 270),
    (r"BAR", 20),
    (r"ST", 10),
    (r"RED", 10),
]

LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s*/\* (0x[0-9a-f]{16}) \*/")
HIGH = re.compile(r"^\s*/\* (0x[0-9a-f]{16}) \*/\s*$")


class Instruction:
    def __init__(self, addr, text, high):
        self.addr = addr
        self.text = text
        # Volta and later: bits 105-125 of the 128-bit instruction are its
        # control: stall (4), yield (1), write scoreboard (3), read
        # scoreboard (3), scoreboards waited on (6 bits), reuse (4).
        ctl = high >> 41
        self.stall = ctl & 0xF
        self.write = (ctl >> 5) & 7
        self.read = (ctl >> 8) & 7
        self.wait = (ctl >> 11) & 0x3F
        words = text.split()
        self.opcode = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]


def parse(text):
    lines = text.splitlines()
    out = {}
    for i, line in enumerate(lines):
        m = LINE.search(line)
        if not m:
            continue
        h = HIGH.match(lines[i + 1]) if i + 1 < len(lines) else None
        if not h:
            raise SystemExit(f"cuda-sass-path: no control word after the instruction at {m.group(1)}")
        addr = int(m.group(1), 16)
        out[addr] = Instruction(addr, m.group(2), int(h.group(1), 16))
    return out


def latency(ins, table):
    for pattern, cycles in table:
        if re.match(pattern, ins.opcode):
            return cycles
    raise SystemExit(f"cuda-sass-path: no latency for {ins.opcode} (at {ins.addr:x}), "
                     f"which sets a scoreboard: give one with --latency")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sass", help="cuobjdump -sass of one kernel ('-': standard input)")
    ap.add_argument("ranges", nargs="+", metavar="RANGE", help="START-END, hex, both included")
    ap.add_argument("--repeat", type=int, default=3, help="runs of the path (default 3)")
    ap.add_argument("--latency", action="append", default=[], metavar="OP=CYCLES",
                    help="an opcode's latency (a regex), before the table's")
    ap.add_argument("--ghz", type=float, default=1.98, help="the clock (default: H200's 1.98)")
    ap.add_argument("-v", "--verbose", action="store_true", help="list the last run")
    a = ap.parse_args()
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    table = []
    for spec in a.latency:
        op, _, cycles = spec.partition("=")
        if not op or not cycles.isdigit():
            ap.error(f"--latency {spec}: expected OP=CYCLES")
        table.append((op, int(cycles)))
    table += LATENCIES

    text = sys.stdin.read() if a.sass == "-" else open(a.sass).read()
    code = parse(text)
    if not code:
        raise SystemExit("cuda-sass-path: no instructions with control words in the input "
                         "(expected cuobjdump -sass)")
    addrs = sorted(code)
    path = []
    for r in a.ranges:
        m = re.fullmatch(r"(?:0x)?([0-9a-fA-F]+)-(?:0x)?([0-9a-fA-F]+)", r)
        if not m:
            ap.error(f"range {r}: expected START-END in hex")
        start, end = int(m.group(1), 16), int(m.group(2), 16)
        if start not in code or end not in code or end < start:
            ap.error(f"range {r}: both ends must be instructions of the kernel, in order")
        path += [code[x] for x in addrs if start <= x <= end]

    t = 0
    ready = [0] * 6
    lines = []
    for run in range(a.repeat):
        begin = t
        lines = []
        for ins in path:
            issue = t
            for b in range(6):
                if ins.wait >> b & 1:
                    issue = max(issue, ready[b])
            if ins.write != 7 or ins.read != 7:
                cycles = latency(ins, table)
                if ins.write != 7:
                    ready[ins.write] = issue + cycles
                if ins.read != 7:
                    ready[ins.read] = issue + min(cycles, READ_RELEASE)
            lines.append(f"{ins.addr:6x} {issue - begin:6d}  stall {ins.stall:2d}  {ins.text}")
            t = issue + max(ins.stall, 1)
        cycles = t - begin
    if a.verbose:
        print("\n".join(lines))
    print(f"{len(path)} instructions, {cycles} cycles, {cycles / a.ghz / 1000:.3f} us at "
          f"{a.ghz:g} GHz (run {a.repeat} of {a.repeat})")


if __name__ == "__main__":
    main()
