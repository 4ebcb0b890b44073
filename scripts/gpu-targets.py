#!/usr/bin/env python3
"""Issues 27's, 28's and 66's GPU targets, read from a report of gpu-check.sh.

    gpu-targets.py REPORT

gpu-check.sh runs it on its own report at the end (scripts/gpu-stage.sh
stages it beside gpu-check.sh). It prints one Markdown table, a row per
reading of each target: which step of the report gave it, the figure (a
ratio of the same run, or the slope of the step-cost benchmark in us per
step) and whether it meets the target. Readings of a staged comparison
build (the steps ending in -compare) are listed too, marked so, and never
decide a verdict. A step that is not in the report (left out by --steps or
--skip), did not run (--budget), failed or was cut short, or printed no row
for the target, says so in place of a figure: a figure nobody measured is
not a figure.

The targets (docs/CUDA.md, "Step costs"; docs/performance/gpu.md):
  - the 8-rank 8 KiB allreduce, the built-in choice for device calls (the LL
    all-pairs), at most 1.3 x the one-launch `exchange` reference;
  - the 2-rank 1 KiB allreduce, the device rule's LL ring, at most 1.5 x
    the d2d copy;
  - a step that waits for nothing (`local`), at most 0.3 us per step;
  - a step that waits on another tb (`hop`), at most 0.6 us per step;
  - one Simple connection at the default slot size, at least 0.9 x the
    one-block copy reference's bandwidth (its time at most 1/0.9 of Coll's
    over the reference's: t/block <= 1.111);
and issue 28's, for the direct two-shot allreduce of 8 ranks on windows
(docs/performance/gpu.md, "Direct steps against issue 28's GPU targets"):
  - at 1 GiB, at least 0.8 x the bandwidth of the one-launch `reduce`
    reference (t/reduce <= 1.25);
  - from 1 to 16 MiB, at least 2 x the bus bandwidth of the FIFO ring of
    the same run (its time over the ring's <= 0.5, size by size and mode by
    mode, from two steps);
  - at 8 KiB, at most 1.2 x the one-launch `exchange` reference;
and issue 66's, item 3 in GPU time: the direct programs at the memory floor
(docs/CUDA.md, "Traffic": counted on the emulation at 8 ranks, two-shot
1.06, allgather 0.89, reduce-scatter 1.00 x the reference kernel's bytes),
timed at 8 ranks and 1 GiB as the runtime compiles them (one lane; the
bench-floor-*-1G steps, every mode the program has):
  - the direct two-shot allreduce at most 1.15 x the one-launch `reduce`
    reference, the reference kernel of the count itself (t/reduce <= 1.15,
    at least 0.87 x its bandwidth);
  - the direct allgather and the direct reduce-scatter at most 1.1 x a
    reference kernel that moves each input and output once. collbench has
    no kernel reference for these collectives: the one it prints beside
    them is `d2d`, a copy of the row's size S (the larger side: a rank's
    output of the allgather, its input of the reduce-scatter), S read and
    S written. The reference kernel's bytes are 4N(N+1) per element of
    the count S/4N, (N+1) S in all, (N+1)/2 = 4.5 copies at 8 ranks; so
    the bound is t/d2d <= 1.1 x 4.5 = 4.95. That assumes the reference
    kernel would move its bytes at the copy's rate, which no run has
    checked (the two-shot's 1 GiB step times `reduce`, 2N S bytes, and
    d2d side by side: their ratio against N says how far a kernel's rate
    is from the copy's).
Item 4 of issue 66 (copy engines) has steps (bench-copy-engine-*) and no row:
no target is set for it yet; its first GPU figures are recorded, not judged.
Exit status: 0 when the report was read (whatever the verdicts), 2 when it
could not be."""
import re
import sys

# (title, the collbench steps that give a reading (the first in every
#  report, the others where a comparison was staged), the call's bytes, the
#  ratio column read, its upper bound).
COLLBENCH_TARGETS = [
    ("8-rank 8 KiB allreduce, LL all-pairs (the device rule): t/exchange <= 1.3",
     ["bench-ll-allpairs-8K", "bench-small-allpairs_allreduce_8ranks_ll-8K"],
     8192, "t/exchange", 1.3),
    ("2-rank 1 KiB allreduce, LL ring (the device rule): t/d2d <= 1.5",
     ["bench-ring-2ranks-1K-ll", "bench-small-ring_allreduce_2ranks_ll-1K"],
     1024, "t/d2d", 1.5),
    ("one Simple connection, 256 MiB: block bandwidth ratio >= 0.9 (t/block <= 1.111)",
     ["bench-simple-send-256M"], 256 << 20, "t/block", 1 / 0.9),
    ("issue 28: 8-rank 1 GiB direct two-shot: reduce bandwidth ratio >= 0.8 (t/reduce <= 1.25)",
     ["bench-direct-twoshot-1G"], 1 << 30, "t/reduce", 1 / 0.8),
    ("issue 28: 8-rank 8 KiB direct two-shot: t/exchange <= 1.2",
     ["bench-direct-twoshot-8ranks-8K"], 8192, "t/exchange", 1.2),
    ("issue 66: 8-rank 1 GiB direct two-shot at the floor: t/reduce <= 1.15",
     ["bench-floor-twoshot-8ranks-1G"], 1 << 30, "t/reduce", 1.15),
    ("issue 66: 8-rank 1 GiB direct allgather at the floor: t/d2d <= 4.95 (1.1 x 4.5 copies)",
     ["bench-floor-allgather-8ranks-1G"], 1 << 30, "t/d2d", 1.1 * (8 + 1) / 2),
    ("issue 66: 8-rank 1 GiB direct reduce-scatter at the floor: t/d2d <= 4.95 (1.1 x 4.5 copies)",
     ["bench-floor-reducescatter-8ranks-1G"], 1 << 30, "t/d2d", 1.1 * (8 + 1) / 2),
]
# (title, the step of the program, the step of the one it is compared with,
#  the sizes, the bound on the program's time over the other's at each size
#  and mode).
PAIR_TARGETS = [
    ("issue 28: 8-rank 1-16 MiB direct two-shot: ring busbw ratio >= 2 (t/t_ring <= 0.5)",
     "bench-direct-twoshot-8ranks-1M-16M", "bench-ring-8ranks-1M-16M",
     [1 << 20, 4 << 20, 16 << 20], 0.5),
]
STEP_COST_TARGETS = [
    ("a step that waits for nothing (local): <= 0.3 us per step", "local", 0.3),
    ("a step that waits on another tb (hop): <= 0.6 us per step", "hop", 0.6),
]
STEP_COST_STEPS = ["bench-step-cost", "bench-step-cost-again"]
PROTOCOLS = ["Simple", "LL", "LL128"]

BEGIN = re.compile(r"^== (\S+): (.*)$")
END = re.compile(r"^-- (\S+): exit (\d+), \d+ s$")
HEADER = re.compile(r"^# place\s")
ROW = re.compile(r"^\s+(in-place|out-of-place)\s+(\d+)\s+\d+\s+\S+\s+\S+\s+(.*)$")
STEP_HEADER = re.compile(r"^# program\s+protocol\s+step-bytes\s+(.*)$")


class Section:
    def __init__(self, name):
        self.name = name
        self.lines = []
        self.status = None  # None: never ended; 'not run'; or the exit code


def read_sections(path):
    sections = {}
    current = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            # A step's output is framed by its "== " and "-- " lines (a
            # step cut short by its timeout ends with its "-- " line too),
            # so a "== " line inside an open step is that step's output.
            m = BEGIN.match(line) if current is None else None
            if m:
                current = Section(m.group(1))
                if m.group(2).startswith("not run"):
                    current.status = "not run"
                    sections[current.name] = current
                    current = None
                else:
                    sections[current.name] = current
                continue
            m = END.match(line)
            if m and current and m.group(1) == current.name:
                current.status = int(m.group(2))
                current = None
                continue
            if current:
                current.lines.append(line)
    return sections


def collbench_times(section):
    """(place, bytes) -> the row's time in us, from collbench's table."""
    times = {}
    for line in section.lines:
        m = ROW.match(line)
        if m and "failed" not in m.group(3):
            times[(m.group(1), int(m.group(2)))] = float(m.group(3).split()[0])
    return times


def collbench_rows(section):
    """(place, bytes) -> {column: ratio} from collbench's table."""
    columns, rows = [], {}
    for line in section.lines:
        if HEADER.match(line):
            names = line[1:].split()
            columns = names[names.index("busbw") + 1:] if "busbw" in names else []
            continue
        m = ROW.match(line)
        if not m or "failed" in m.group(3):
            continue
        cells = m.group(3).split()
        ratios = cells[3:]  # time, algbw, busbw, then one per reference
        rows[(m.group(1), int(m.group(2)))] = {
            c: float(v) for c, v in zip(columns, ratios) if v != "-"}
    return rows


def step_cost_rows(section):
    """(program, protocol) -> us per step of the 1 KiB steps."""
    nks, rows = None, {}
    for line in section.lines:
        m = STEP_HEADER.match(line)
        if m:
            nks = sum(1 for t in m.group(1).split() if t.startswith("K="))
            continue
        if nks is None or not line.startswith("  "):
            continue
        cells = line.split()
        if len(cells) < 4 + nks or cells[2] != "1024":
            continue
        slope = cells[3 + nks]
        if slope != "-":
            rows[(cells[0], cells[1])] = float(slope)
    return rows


def status_of(sections, name):
    s = sections.get(name)
    if s is None:
        return "not in the report"
    if s.status == "not run":
        return "not run"
    if s.status is None:
        return "cut short"
    if s.status != 0:
        return f"failed (exit {s.status})"
    return None


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: gpu-targets.py REPORT\n")
        return 2
    try:
        sections = read_sections(argv[1])
    except OSError as e:
        sys.stderr.write(f"gpu-targets: {argv[1]}: {e.strerror}\n")
        return 2
    out = ["| target | step | reading | figure | verdict |", "|---|---|---|---|---|"]
    met = {}

    def add(title, step, reading, value, bound, compare, text=None, group=None):
        """A row; `group` names the verdict it counts for (the title)."""
        group = group or title
        if text is None:
            ok = value <= bound + 1e-9
            text = "met" if ok else "not met"
            if compare:
                text += " (comparison build)"
            else:
                met.setdefault(group, []).append(ok)
        elif not compare:
            met.setdefault(group, [])
        figure = "-" if value is None else f"{value:.3f}"
        out.append(f"| {title} | {step} | {reading} | {figure} | {text} |")

    for title, steps, size, column, bound in COLLBENCH_TARGETS:
        for base in steps:
            for step, compare in ((base, False), (base + "-compare", True)):
                # Only the first step of a target is always in a report; the
                # others and the comparisons where they were staged.
                if step not in sections and (compare or base != steps[0]):
                    continue
                why = status_of(sections, step)
                if why:
                    add(title, step, "-", None, bound, compare, why)
                    continue
                rows = collbench_rows(sections[step])
                found = [(place, r[column]) for (place, b), r in sorted(rows.items())
                         if b == size and column in r]
                if not found:
                    add(title, step, "-", None, bound, compare,
                        f"no row of {size} bytes with {column}")
                for place, value in found:
                    add(title, step, place, value, bound, compare)
    for title, step, other, sizes, bound in PAIR_TARGETS:
        why = status_of(sections, step) or status_of(sections, other)
        if why:
            add(title, f"{step} / {other}", "-", None, bound, False, why)
            continue
        mine, theirs = collbench_times(sections[step]), collbench_times(sections[other])
        for size in sizes:
            places = [p for (p, b) in sorted(mine) if b == size and (p, b) in theirs]
            if not places:
                add(title, f"{step} / {other}", f"{size} B", None, bound, False,
                    f"no row of {size} bytes in both")
            for place in places:
                add(title, f"{step} / {other}", f"{place}, {size} B",
                    mine[(place, size)] / theirs[(place, size)], bound, False)
    for title, program, bound in STEP_COST_TARGETS:
        steps = [(s, False) for s in STEP_COST_STEPS] + [("bench-step-cost-compare", True)]
        steps = [(s, c) for s, c in steps if s in sections or s == STEP_COST_STEPS[0]]
        # Each step's status, or its rows (read once for every protocol).
        read = {s: status_of(sections, s) or step_cost_rows(sections[s]) for s, _ in steps}
        for protocol in PROTOCOLS:
            group = f"{title}, {protocol}"
            for step, compare in steps:
                if isinstance(read[step], str):
                    add(title, step, protocol, None, bound, compare, read[step], group)
                    continue
                value = read[step].get((program, protocol))
                if value is None:
                    add(title, step, protocol, None, bound, compare, "no row", group)
                else:
                    add(title, step, protocol, value, bound, compare, group=group)
    print("Issues 27's, 28's and 66's GPU targets in this report (scripts/gpu-targets.py):")
    print()
    print("\n".join(out))
    print()
    for title, oks in met.items():
        if not oks:
            verdict = "no reading"
        elif all(oks):
            verdict = f"met in all {len(oks)} readings"
        else:
            verdict = f"met in {sum(oks)} of {len(oks)} readings"
        print(f"- {title}: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
