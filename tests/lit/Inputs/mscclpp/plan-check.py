#!/usr/bin/env python3
"""Checks a plan that collc --emit=mscclpp wrote against MSCCL++'s own rules.

    plan-check.py PLAN REFERENCE...

1. MSCCL++'s signal/wait check: the DSL of v0.10 (program.py,
   validate_signal_wait_pairing) counts, per (rank, peer, channel type), the
   signals a rank issues to the peer and the waits the peer performs for
   it, and refuses a program where the two differ. The same count is made
   here from the plan: an op's channel_ids index the tb's channels of the
   op's channel_type, which index the rank's channels of that type,
   flattened in order (each entry connects to its `connected_to` peers).
2. Keys and nesting: every object of the plan (the plan, a gpu, a
   threadblock, an op of each name, a buffer entry, a channel, a remote
   buffer, a semaphore, a tb's channel and remote-buffer lists) has only keys
   that the REFERENCE plans (written by MSCCL++'s DSL) use for objects of
   that kind, in the order they use them, and the values nest alike.

Prints one line per check and exits 1 when one fails."""
import json
import sys
from collections import defaultdict


def kind_of(path, obj):
    """The kind of a JSON object by where it lies."""
    if path == ():
        return "plan"
    last = path[-1]
    if last == "gpus":
        return "gpu"
    if last == "threadblocks":
        return "threadblock"
    if last == "ops":
        return "op:" + obj.get("name", "?")
    if last in ("src_buff", "dst_buff"):
        return "buffer:" + ("remote" if "buffer_id" in obj else "local")
    if last == "channels":
        return "tb-channels" if len(path) >= 2 and path[-2] == "threadblocks" else "channel"
    return last


def walk(value, path, out):
    if isinstance(value, dict):
        out.append((kind_of(path, value), list(value.keys()), path))
        for k, v in value.items():
            walk(v, path + (k,), out)
    elif isinstance(value, list):
        for v in value:
            walk(v, path, out)


def reference_orders(files):
    orders = defaultdict(list)
    for f in files:
        with open(f) as fh:
            objs = []
            walk(json.load(fh), (), objs)
        for kind, keys, _ in objs:
            if keys not in orders[kind]:
                orders[kind].append(keys)
    return orders


def keys_ok(plan, orders):
    objs = []
    walk(plan, (), objs)
    bad = []
    for kind, keys, path in objs:
        refs = orders.get(kind)
        if not refs:
            bad.append(f"{'.'.join(path) or 'plan'}: no reference object of kind {kind}")
            continue
        known = set(k for r in refs for k in r)
        extra = [k for k in keys if k not in known]
        if extra:
            bad.append(f"{kind}: keys {extra} not in the reference plans")
            continue
        # Some reference object lists these keys in this relative order.
        if not any([k for k in r if k in keys] == keys for r in refs):
            bad.append(f"{kind}: keys {keys} in an order no reference plan uses")
    return sorted(set(bad))


def peers_of(gpu, tb, ctype):
    flat = [p for c in gpu["channels"] if c["channel_type"] == ctype for p in c["connected_to"]]
    ids = [i for c in tb.get("channels", []) if c["channel_type"] == ctype for i in c["channel_ids"]]
    return [flat[i] for i in ids]


def signal_wait(plan):
    signals, waits = defaultdict(int), defaultdict(int)

    def ops_of(ops):
        for op in ops:
            yield op
            yield from ops_of(op.get("ops", []))

    for gpu in plan["gpus"]:
        rank = gpu["id"]
        for tb in gpu["threadblocks"]:
            for op in ops_of(tb["ops"]):
                name, ctype = op["name"], op.get("channel_type")
                if name in ("signal", "rlxsignal", "wait", "rlxwait"):
                    peers = peers_of(gpu, tb, ctype)
                    for i in op["channel_ids"]:
                        if name.endswith("signal"):
                            signals[(rank, peers[i], ctype)] += 1
                        else:
                            waits[(rank, peers[i], ctype)] += 1
    bad = []
    for src, dst, t in sorted(set(signals) | {(d, s, t) for (s, d, t) in waits}):
        if signals[(src, dst, t)] != waits[(dst, src, t)]:
            bad.append(f"Signal/Wait mismatch on {t}: rank {src} issues {signals[(src, dst, t)]} "
                       f"signal(s) to rank {dst}, but rank {dst} performs "
                       f"{waits[(dst, src, t)]} wait(s) for rank {src}")
    return bad, sum(signals.values())


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as fh:
        plan = json.load(fh)
    failed = False
    bad, count = signal_wait(plan)
    for line in bad:
        print(line)
    print(f"signal/wait pairing: {'ok' if not bad else 'FAILED'} ({count} signals)")
    failed |= bool(bad)
    bad = keys_ok(plan, reference_orders(argv[2:]))
    for line in bad:
        print(line)
    print(f"keys and nesting: {'ok' if not bad else 'FAILED'}")
    failed |= bool(bad)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
