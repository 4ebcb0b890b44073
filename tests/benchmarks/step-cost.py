#!/usr/bin/env python3
"""The step-cost benchmark (docs/BENCHMARKS.md, docs/CUDA.md "Step costs").

Programs of K steps on one tb, for K from 1 to 64, timed per call; the slope
of time against K is what one step costs, the intercept what the launch
costs. Two programs (tests/benchmarks/step-cost/):

  local  K local copies on the one tb of a one-rank program: steps that need
         no ordering (nothing waits for them, they wait for nothing);
  hop    one chunk bounced K times between two ranks: each step waits for the
         step just before it on the other rank's tb, through a connection.

Each step moves --step-bytes (default 1K; 4 moves almost nothing).

With collbench (a GPU), each program's floor is timed in the same run: its
reference of K steps (collbench's `steps` for local: one block copying the
message in K steps, a block barrier each; `hops` for hop: two blocks
bouncing it K times as LL words), beside the first protocol's call of the
same K. Its slope is printed as a row of its own, and each protocol's slope
over it in a last column (x floor). --no-floor leaves it out (a plugin of an
earlier build, through COLL_CUDA_PLUGIN, does not know these references).

  step-cost.py compile --collc BIN --out DIR [--ks 1,2,...]
      compile every program x protocol x K into DIR (here, where collc is)
  step-cost.py run --tool BIN [--tool-arg ARG]... --dir DIR [--step-bytes B]...
      time them with BIN (collbench on a GPU; collrun --backend cuda-emu or
      host elsewhere, where the times mean nothing but the script runs) and
      print, per program, protocol and step size, the time per K and the
      least-squares slope (us per step), intercept and r^2.

Exit status: 0 every run verified its result; 1 a run failed or a result was
wrong; 2 bad usage or missing files.
"""

import argparse
import os
import re
import subprocess
import sys

PROGRAMS = {
    # name: (source, mode, bytes of a call for K steps of B bytes)
    "local": ("local.coll", "outofplace", lambda k, b: k * b),
    "hop": ("hop.coll", "inplace", lambda k, b: b),
}
# Each program's floor: collbench's reference of K steps of the same bytes.
FLOORS = {"local": "steps", "hop": "hops"}
PROTOCOLS = ["Simple", "LL", "LL128"]
DEFAULT_KS = [1, 2, 4, 8, 16, 32, 64]


def parse_sizes(text):
    out = []
    for part in text.split(","):
        m = re.fullmatch(r"(\d+)([KkMm]?)", part.strip())
        if not m:
            raise argparse.ArgumentTypeError(f"bad size '{part}' (e.g. 1K, 4)")
        scale = {"": 1, "k": 1024, "m": 1024 * 1024}[m.group(2).lower()]
        out.append(int(m.group(1)) * scale)
    return out


def parse_ks(text):
    try:
        ks = sorted({int(k) for k in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad --ks '{text}' (e.g. 1,2,4)")
    if not ks or ks[0] < 1:
        raise argparse.ArgumentTypeError("--ks: every K must be at least 1")
    return ks


def xml_name(program, protocol, k):
    return f"{program}-{protocol}-K{k}.xml"


def compile_all(args):
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "step-cost")
    os.makedirs(args.out, exist_ok=True)
    for program, (source, _, _) in PROGRAMS.items():
        for protocol in PROTOCOLS:
            for k in args.ks:
                out = os.path.join(args.out, xml_name(program, protocol, k))
                cmd = [args.collc, os.path.join(src, source), "-D", f"K={k}", "--protocol",
                       protocol, "-o", out]
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    sys.stderr.write(f"step-cost: {' '.join(cmd)} failed:\n{r.stderr}")
                    return 1
    print(f"step-cost: compiled {len(PROGRAMS) * len(PROTOCOLS) * len(args.ks)} programs "
          f"into {args.out}")
    return 0


def fit(points):
    """Least squares t = a + b k: (slope b, intercept a, r^2)."""
    n = len(points)
    sx = sum(k for k, _ in points)
    sy = sum(t for _, t in points)
    sxx = sum(k * k for k, _ in points)
    sxy = sum(k * t for k, t in points)
    den = n * sxx - sx * sx
    if n < 2 or den == 0:
        return None
    b = (n * sxy - sx * sy) / den
    a = (sy - b * sx) / n
    mean = sy / n
    ss_tot = sum((t - mean) ** 2 for _, t in points)
    ss_res = sum((t - a - b * k) ** 2 for k, t in points)
    r2 = 1 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return b, a, r2


ROW = re.compile(r"^\s+(in-place|out-of-place)\s+(\d+)\s+\S+\s+\S+\s+\S+\s+([0-9.]+)\s")
# collbench's line for a reference: name, bytes, three dashes, time (us).
REFERENCE_ROW = re.compile(r"^\s+(\S+)\s+(\d+)\s+-\s+-\s+-\s+([0-9.]+)\s")


def time_one(args, path, mode, size, floor=None, k=None):
    """The median time (us) the tool reports for one call, and that of the
    reference `floor` of K = k if asked for (else None), or an error string."""
    cmd = [args.tool, path, "--size", str(size), "--mode", mode, "--iters", str(args.iters)]
    if args.warmup is not None:
        cmd += ["--warmup", str(args.warmup)]
    if floor:
        cmd += ["--references", floor, "--reference-steps", str(k)]
    elif args.floor:
        cmd += ["--references", "none"]
    cmd += args.tool_arg
    r = subprocess.run(cmd, capture_output=True, text=True)
    lines = r.stdout.splitlines()
    times = [float(m.group(3)) for m in map(ROW.match, lines) if m]
    refs = [float(m.group(3)) for m in map(REFERENCE_ROW.match, lines)
            if m and m.group(1) == floor]
    if r.returncode != 0 or len(times) != 1 or (floor and len(refs) != 1):
        return None, None, f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout}{r.stderr}"
    return times[0], refs[0] if floor else None, None


def run_all(args):
    ks = args.ks
    missing = [xml_name(p, q, k) for p in args.programs for q in args.protocols for k in ks
               if not os.path.isfile(os.path.join(args.dir, xml_name(p, q, k)))]
    if missing:
        sys.stderr.write(f"step-cost: not in {args.dir}: {', '.join(missing[:4])}"
                         f"{' ...' if len(missing) > 4 else ''} (step-cost.py compile first)\n")
        return 2
    failed = 0
    print(f"# step-cost: {args.tool} {' '.join(args.tool_arg)}, median of {args.iters} calls")
    if args.floor:
        print("# floor: collbench's reference of K steps of the same bytes, timed beside the "
              f"{args.protocols[0]} calls (steps for local, hops for hop); x floor: us/step over "
              "the floor's")
    print("# program  protocol  step-bytes  " + "  ".join(f"K={k:<6}" for k in ks) +
          "  us/step  intercept    r^2" + ("  x floor" if args.floor else ""))

    def row(program, label, step_bytes, points, is_floor=False, floor_slope=None):
        f = fit(points)
        cells = "  ".join(f"{dict(points).get(k, float('nan')):<8.1f}" for k in ks)
        tail = f"{f[0]:8.3f}  {f[1]:9.1f}  {f[2]:6.3f}" if f else "       -          -       -"
        if args.floor and not is_floor:
            tail += f"  {f[0] / floor_slope:7.2f}" if f and floor_slope else "        -"
        print(f"  {program:<7}  {label:<8}  {step_bytes:>10}  {cells}  {tail}", flush=True)
        return f

    # (program, step bytes): the floor's slope, once its row is printed.
    floor_slopes = {}
    for program in args.programs:
        _, mode, call_bytes = PROGRAMS[program]
        for protocol in args.protocols:
            for step_bytes in args.step_bytes:
                floor = FLOORS[program] if args.floor and protocol == args.protocols[0] else None
                points, floor_points = [], []
                for k in ks:
                    t, ref, err = time_one(
                        args, os.path.join(args.dir, xml_name(program, protocol, k)), mode,
                        call_bytes(k, step_bytes), floor, k)
                    if err:
                        sys.stderr.write(f"step-cost: {err}\n")
                        failed += 1
                        continue
                    points.append((k, t))
                    if floor:
                        floor_points.append((k, ref))
                if floor:
                    f = row(program, floor, step_bytes, floor_points, is_floor=True)
                    floor_slopes[(program, step_bytes)] = f[0] if f and f[0] > 0 else None
                row(program, protocol, step_bytes, points,
                    floor_slope=floor_slopes.get((program, step_bytes)))
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compile", help="compile the programs (here, with collc)")
    c.add_argument("--collc", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--ks", type=parse_ks, default=DEFAULT_KS)
    r = sub.add_parser("run", help="time them and fit the slope")
    r.add_argument("--tool", required=True, help="collbench (GPU), or collrun")
    r.add_argument("--tool-arg", action="append", default=[],
                   help="an argument for the tool (repeat), e.g. --tool-arg=--backend=cuda-emu")
    r.add_argument("--dir", required=True, help="where 'compile' put the programs")
    r.add_argument("--ks", type=parse_ks, default=DEFAULT_KS)
    r.add_argument("--programs", default="local,hop")
    r.add_argument("--protocols", default=",".join(PROTOCOLS))
    r.add_argument("--step-bytes", type=parse_sizes, default=[1024],
                   help="bytes one step moves (list: 1K,4)")
    r.add_argument("--iters", type=int, default=200)
    r.add_argument("--warmup", type=int, default=None,
                   help="untimed calls first (collbench's --warmup)")
    r.add_argument("--no-floor", dest="floor", action="store_false", default=None,
                   help="do not time the floors (collbench's steps and hops references)")
    args = parser.parse_args()
    if args.command == "compile":
        return compile_all(args)
    args.programs = args.programs.split(",")
    args.protocols = args.protocols.split(",")
    bad = [p for p in args.programs if p not in PROGRAMS] + \
          [q for q in args.protocols if q not in PROTOCOLS]
    if bad:
        parser.error(f"unknown program or protocol: {', '.join(bad)}")
    # The floors are collbench's references: timed by default with it.
    if args.floor is None:
        args.floor = os.path.basename(args.tool).startswith("collbench")
    return run_all(args)


if __name__ == "__main__":
    sys.exit(main())
