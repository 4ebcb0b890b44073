#!/usr/bin/env python3
"""Writes the algorithms collbench's documented benchmarks run (docs/PERFORMANCE.md).

  send_2ranks_simple.xml            broadcast from rank 0 to rank 1 over one
                                    Simple connection, in place: one send, one
                                    receive, nothing else
  allpairs_allreduce_8ranks_ll.xml  all-pairs allreduce on 8 ranks, LL, the same
                                    program as tests/support allPairsAllReduce
  ring_allreduce_8ranks_simple_8ch.xml
                                    ring allreduce on 8 ranks, Simple, 8 channels
                                    (8 independent rings, each over 1/8 of the data)

Run it from this folder; the output is deterministic.
"""


def step(s, kind, sb, so, db, do, cnt=1, dep=(-1, -1), hasdep=False):
    return (f'      <step s="{s}" type="{kind}" srcbuf="{sb}" srcoff="{so}" dstbuf="{db}" '
            f'dstoff="{do}" cnt="{cnt}" depid="{dep[0]}" deps="{dep[1]}" '
            f'hasdep="{int(hasdep)}"/>')


def algo(name, proto, nchannels, nchunks, coll, inplace, outofplace, gpus):
    lines = [f'<algo name="{name}" proto="{proto}" nchannels="{nchannels}" '
             f'nchunksperloop="{nchunks}" ngpus="{len(gpus)}" coll="{coll}" '
             f'inplace="{int(inplace)}" outofplace="{int(outofplace)}" minBytes="0" '
             f'maxBytes="0">']
    for g, (chunks, tbs) in enumerate(gpus):
        lines.append(f'  <gpu id="{g}" i_chunks="{chunks[0]}" o_chunks="{chunks[1]}" '
                     f's_chunks="{chunks[2]}">')
        for t, (send, recv, chan, steps) in enumerate(tbs):
            lines.append(f'    <tb id="{t}" send="{send}" recv="{recv}" chan="{chan}">')
            lines += [step(i, *args) for i, args in enumerate(steps)]
            lines.append('    </tb>')
        lines.append('  </gpu>')
    lines.append('</algo>')
    return '\n'.join(lines) + '\n'


def send_2ranks():
    return algo('send_2ranks', 'Simple', 1, 1, 'broadcast', True, False, [
        ((1, 1, 0), [(1, -1, 0, [('s', 'i', 0, 'o', 0)])]),
        ((1, 1, 0), [(-1, 0, 0, [('r', 'o', 0, 'o', 0)])]),
    ])


def allpairs_allreduce(n):
    gpus = []
    for r in range(n):
        peers = [p for p in range(n) if p != r]
        tb_of = {p: i for i, p in enumerate(peers)}
        local = len(peers)
        local_steps = [('cpy', 'i', r, 'o', r)]
        for p in peers[:-1]:  # nops carry all dependencies but the last
            local_steps.append(('nop', 'i', 0, 'o', 0, 0, (tb_of[p], 1)))
        for i in range(len(peers)):
            p = peers[-1] if i == 0 else peers[i - 1]
            dep = (tb_of[p], 1) if i == 0 else (-1, -1)
            local_steps.append(('re', 's', p, 'o', r, 1, dep, i == len(peers) - 1))
        last = len(local_steps) - 1
        tbs = [(p, p, 0, [('s', 'i', p, 's', r),
                          ('r', 's', p, 's', p, 1, (-1, -1), True),
                          ('s', 'o', r, 'o', r, 1, (local, last)),
                          ('r', 'o', p, 'o', p)]) for p in peers]
        tbs.append((-1, -1, 0, local_steps))
        gpus.append(((n, n, n), tbs))
    return algo('allpairs_allreduce', 'LL', 1, n, 'allreduce', True, True, gpus)


def ring_allreduce(n, channels):
    gpus = []
    for r in range(n):
        tbs = []
        for ch in range(channels):
            steps = []
            for k in range(2 * n - 1):
                off = ch * n + (r - k - 1) % n
                kind = ('s' if k == 0 else 'rrs' if k < n - 1 else 'rrcs' if k == n - 1
                        else 'rcs' if k < 2 * n - 2 else 'r')
                steps.append((kind, 'i' if k < n else 'o', off, 'o', off))
            tbs.append(((r + 1) % n, (r - 1) % n, ch, steps))
        gpus.append(((n * channels, n * channels, 0), tbs))
    return algo('ring_allreduce', 'Simple', channels, n * channels, 'allreduce', True, True, gpus)


for name, text in [('send_2ranks_simple.xml', send_2ranks()),
                   ('allpairs_allreduce_8ranks_ll.xml', allpairs_allreduce(8)),
                   ('ring_allreduce_8ranks_simple_8ch.xml', ring_allreduce(8, 8))]:
    with open(name, 'w') as f:
        f.write(text)
