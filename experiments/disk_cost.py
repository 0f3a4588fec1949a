#!/usr/bin/env python3
"""What the page cache (docs/target-contract.md, "The disk") costs, side by side with
`disk off`.

1. Per call: a node (written and compiled here) that at its launch writes N records of
   64 bytes to a file of its directory, fsyncing after every K-th, then waits in accept.
   Its model has no action, so a run is one launch. Each of {N = 0, N = 2000} x {disk
   off, disk fsync, disk fsync partial} is run ROUNDS times, interleaved; the figure is
   the fastest run. Per write: (t(N) - t(0)) / N, beside the same under disk off (the
   write runs natively there, unseen); per fsync likewise with K = 1 against K = N.
2. Per state: the demos that write files (durlog, bgsave, appendkv) checked under
   `disk fsync` (their default) and `disk off`, interleaved; the figure is the fastest
   run's wall time over its states generated.

    python3 experiments/disk_cost.py [ROUNDS]
"""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
COUNTS = re.compile(r"^(\d+) states generated", re.M)
PROG = r"""
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int n = atoi(argv[1]), k = atoi(argv[2]);
    char rec[64];
    for (int i = 0; i < 64; i++) rec[i] = 'a' + i % 26;
    int fd = open("data", O_WRONLY | O_CREAT | O_APPEND, 0644);
    for (int i = 1; i <= n; i++) {
        if (write(fd, rec, sizeof rec) != sizeof rec) return 1;
        if (i % k == 0 && fsync(fd) < 0) return 1;
    }
    if (write(3, "{}\n", 3) != 3) return 1;
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(7980),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1)) return 1;
    accept(ls, 0, 0);
    return 0;
}
"""
N = 10000


def timed(args: list[str]) -> tuple[float, str]:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "cmc", *args], cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    took = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"cmc {' '.join(args)} failed:\n{p.stdout[-2000:]}")
    return took, p.stdout


def per_call(rounds: int, tmp: pathlib.Path) -> None:
    (tmp / "w.c").write_text(PROG)
    subprocess.run(["cc", "-O2", "-o", str(tmp / "w"), str(tmp / "w.c")], check=True)
    cases = {}
    for disk in ("off", "fsync", "fsync partial"):
        for n, k in ((0, 1), (N, N), (N, 1)):
            model = tmp / f"{disk.replace(' ', '-')}-{n}-{k}.model"
            model.write_text(f'node w = "{tmp}/w {n} {k}"\ndisk {disk}\n')
            cases[(disk, n, k)] = model
    best = {key: float("inf") for key in cases}
    for _ in range(rounds):
        for key, model in cases.items():
            best[key] = min(best[key], timed(["--model-file", str(model)])[0])
    print(f"Per call: a launch that makes {N} writes of 64 bytes (and 1 or {N} fsyncs), "
          f"fastest of {rounds}")
    print(f"{'disk':15} {'per write (us)':>15} {'per fsync (us)':>15}")
    for disk in ("off", "fsync", "fsync partial"):
        write_us = (best[(disk, N, N)] - best[(disk, 0, 1)]) / N * 1e6
        fsync_us = (best[(disk, N, 1)] - best[(disk, N, N)]) / (N - 1) * 1e6
        print(f"{disk:15} {write_us:15.1f} {fsync_us:15.1f}")
    print()


def per_state(rounds: int, tmp: pathlib.Path) -> None:
    subprocess.run(["make", "-s", "-C", str(ROOT / "demo")], check=True)
    runs = {}
    for name in ("durlog", "bgsave", "appendkv"):
        text = (ROOT / "models" / f"{name}.model").read_text()
        text = "\n".join(line for line in text.splitlines() if not line.startswith("disk "))
        for disk in ("off", "fsync"):
            path = ROOT / "models" / f".cost-{name}-{disk}.model"
            path.write_text(text + f"\ndisk {disk}\n")
            runs[(name, disk)] = path
    best = {key: float("inf") for key in runs}
    states = {}
    try:
        for _ in range(rounds):
            for key, path in runs.items():
                took, out = timed(["--model-file", str(path)])
                states[key] = int(COUNTS.search(out).group(1))
                best[key] = min(best[key], took / states[key])
    finally:
        for path in runs.values():
            path.unlink()
    print(f"Per state (replay), fastest of {rounds}")
    print(f"{'demo':10} {'states':>7} {'off ms/state':>13} {'fsync ms/state':>15} {'ratio':>7}")
    for name in ("durlog", "bgsave", "appendkv"):
        off, on = best[(name, "off")], best[(name, "fsync")]
        print(f"{name:10} {states[(name, 'fsync')]:7} {off * 1e3:13.2f} {on * 1e3:15.2f} "
              f"{on / off:7.2f}")


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    with tempfile.TemporaryDirectory() as tmp:
        per_call(rounds, pathlib.Path(tmp))
        per_state(rounds, pathlib.Path(tmp))


if __name__ == "__main__":
    main()
