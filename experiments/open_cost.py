#!/usr/bin/env python3
"""What an open costs a node under cmc, side by side with the same opens natively.

Every open/openat of a node is notified (so that /proc/self/limits can show the
emulated descriptor limit, docs/design.md "The descriptor limit"), and the C helper
answers each one whose path does not contain "limits" itself, with CONTINUE. This
measures that price: a C program opens and closes /dev/null N times, then blocks in
accept(). cmc checks a one-node model of it with N = 0 and N = OPENS (a launch each:
one state); the difference in wall time over OPENS is the cost of one open under cmc.
The same program run natively gives the cost of one open without cmc. Each figure is
the minimum of ROUNDS runs, the runs of both kinds interleaved.

    python3 experiments/open_cost.py [OPENS] [ROUNDS]
"""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGRAM = r"""
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    long n = atol(argv[1]);
    for (long i = 0; i < n; i++)
        close(open("/dev/null", O_RDONLY));
    if (argc > 2)
        return 0;                             /* natively: done */
    if (write(3, "{}\n", 3) != 3)
        return 1;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(7400) };
    bind(s, (struct sockaddr *)&sa, sizeof sa);
    listen(s, 1);
    for (;;)
        accept(s, NULL, NULL);
}
"""


def main() -> None:
    opens = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="open-cost-"))
    try:
        (tmp / "opens.c").write_text(PROGRAM)
        subprocess.run(["cc", "-O2", "-o", str(tmp / "opens"), str(tmp / "opens.c")], check=True)
        for n in (0, opens):
            (tmp / f"m{n}.model").write_text(f'node n = "{tmp}/opens {n}"\n')
        best = {"cmc 0": [], f"cmc {opens}": [], "native 0": [], f"native {opens}": []}
        for _ in range(rounds):
            for n in (0, opens):
                t = time.perf_counter()
                subprocess.run([sys.executable, "-m", "cmc", "--model-file", str(tmp / f"m{n}.model")],
                               cwd=tmp, stdout=subprocess.DEVNULL, check=True)
                best[f"cmc {n}"].append(time.perf_counter() - t)
                t = time.perf_counter()
                subprocess.run([str(tmp / "opens"), str(n), "native"], check=True)
                best[f"native {n}"].append(time.perf_counter() - t)
        m = {k: min(v) for k, v in best.items()}
        under = (m[f"cmc {opens}"] - m["cmc 0"]) / opens * 1e6
        native = (m[f"native {opens}"] - m["native 0"]) / opens * 1e6
        print(f"opens per run: {opens}; minimum of {rounds} runs each")
        for k, v in m.items():
            print(f"  {k:>14}: {v * 1000:8.1f} ms")
        print(f"one open+close: {under:.1f} us under cmc, {native:.2f} us natively "
              f"({under / native:.0f}x)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
