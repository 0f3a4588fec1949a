"""What the linearizability checker (cmc/lang/linearizable.py) costs on histories of
2 to 12 operations, as a search would hand it one per world.

Histories are made from sequential runs of a store of one register (the hard case:
no partitioning by key helps), every operation's interval widened around the moment
it took effect by up to W time units (W = 30: with operations 10 apart, each overlaps
about five others), a quarter of the replies lost (pending). For each size: the
median and the largest time of one check over the same 200 seeded histories, for
the history as made (linearizable) and with one stale read appended (not: the
search must exhaust every order before it says so), and the ratio of the two.

    python3 experiments/lin_cost.py [--histories N]

Times are process CPU time (time.process_time), so a noisy machine moves them less;
the ratio is measured side by side, in the same loop.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from cmc.lang.linearizable import Op, linearizable  # noqa: E402


def history(n: int, rnd: random.Random, width: int = 30) -> list[Op]:
    value = None
    ops = []
    for i in range(n):
        moment = 10 * i + 5
        invoke, complete = moment - rnd.randint(1, width), moment + rnd.randint(1, width)
        if rnd.random() < 0.25:
            complete = None
        if rnd.random() < 0.5:
            value = i
            ops.append(Op("write", None, value, invoke, complete))
        else:
            ops.append(Op("read", None, value, invoke, complete))
    return ops


def timed(ops) -> tuple[bool, float]:
    t0 = time.process_time()
    ok = linearizable(ops)
    return ok, time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--histories", type=int, default=200)
    args = ap.parse_args()
    print(f"{'ops':>4} {'ok median µs':>13} {'ok max µs':>10} {'stale median µs':>16} "
          f"{'stale max µs':>13} {'stale/ok':>9}")
    for n in range(2, 13):
        rnd = random.Random(n)
        good, bad = [], []
        for _ in range(args.histories):
            ops = history(n, rnd)
            ok, dt = timed(ops)
            assert ok, ops
            good.append(dt)
            end = 10 * n + 100
            # a read of a value that was overwritten before it began: never linearizable
            stale = ops + [Op("write", None, "last", end, end + 1),
                           Op("read", None, "gone", end + 2, end + 3)]
            ok, dt = timed(stale)
            assert not ok
            bad.append(dt)
        gm, bm = statistics.median(good), statistics.median(bad)
        print(f"{n:>4} {gm * 1e6:>13.1f} {max(good) * 1e6:>10.1f} {bm * 1e6:>16.1f} "
              f"{max(bad) * 1e6:>13.1f} {bm / gm:>9.2f}")


if __name__ == "__main__":
    main()
