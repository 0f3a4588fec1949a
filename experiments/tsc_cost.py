"""What a trapped TSC read costs (docs/performance.md, "The TSC trap").

    python3 experiments/tsc_cost.py [--reads N] [--repeat R]

Builds a small C node (in a temporary directory) that makes N reads -- of the TSC
(rdtsc), or of the clock (clock_gettime, a notified call) -- then writes one state line
and blocks in accept(). Measured side by side in one run, each R times (the median):

- natively, outside cmc: the program times its own N reads (rdtsc is an instruction:
  nanoseconds);
- under cmc: the wall time of a whole check (launch, one world) with N reads, minus
  the same with 0 reads, over N: the cost of one trapped read (the SIGSEGV, cmc's
  handler, its notified call) and, for comparison, of one notified clock read.

Prints the per-read costs and their ratios. The machine is shared and noisy: compare
the columns of one run.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

SOURCE = r"""
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
static inline uint64_t rdtsc(void) { uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi)); return ((uint64_t)hi << 32) | lo; }
int main(int argc, char **argv) {
    long n = atol(argv[2]); int tsc = !strcmp(argv[1], "tsc");
    struct timespec a, b, t; uint64_t sum = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        if (tsc) sum += rdtsc(); else { clock_gettime(CLOCK_MONOTONIC, &t); sum += t.tv_nsec; }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    char line[128];
    int k = snprintf(line, sizeof line, "{\"ns\":%lld,\"sum\":%llu}\n",
        (long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec),
        (unsigned long long)(sum & 1));
    if (argc > 3) { printf("%s", line); return 0; }
    if (write(3, line, (size_t)k) != k) return 1;
    struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons(9100) };
    inet_pton(AF_INET, "127.0.0.1", &in.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&in, sizeof in) < 0 || listen(fd, 1) < 0) return 1;
    accept(fd, NULL, NULL);
    return 0;
}
"""


def check_time(binary: str, what: str, reads: int, folder: str) -> float:
    model = os.path.join(folder, f"{what}-{reads}.model")
    with open(model, "w") as f:
        f.write(f'node s = "{binary} {what} {reads}"\ninvariant t: true\n')
    start = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "cmc", "--model-file", model], cwd=folder,
                       capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(f"cmc failed on {model}:\n{r.stdout}{r.stderr}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reads", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        binary = os.path.join(folder, "reads")
        src = binary + ".c"
        with open(src, "w") as f:
            f.write(SOURCE)
        subprocess.run(["gcc", "-O2", "-o", binary, src], check=True)
        native = {}
        for what in ("tsc", "clock"):
            runs = []
            for _ in range(args.repeat):
                out = subprocess.run([binary, what, str(args.reads), "native"],
                                     capture_output=True, text=True, check=True).stdout
                runs.append(int(out.split('"ns":')[1].split(",")[0]) / args.reads)
            native[what] = statistics.median(runs)
        under = {}
        for what in ("tsc", "clock"):
            base = statistics.median(check_time(binary, what, 0, folder)
                                     for _ in range(args.repeat))
            full = statistics.median(check_time(binary, what, args.reads, folder)
                                     for _ in range(args.repeat))
            under[what] = (full - base) / args.reads * 1e9
    print(f"reads per run: {args.reads}, median of {args.repeat}")
    print(f"{'':24}{'native ns/read':>16}{'under cmc ns/read':>20}{'ratio':>10}")
    for what, name in (("tsc", "rdtsc (trapped)"), ("clock", "clock_gettime")):
        print(f"{name:24}{native[what]:16.1f}{under[what]:20.0f}"
              f"{under[what] / max(native[what], 0.1):10.0f}")
    print(f"a trapped rdtsc costs {under['tsc'] / under['clock']:.2f}x a notified clock read")


if __name__ == "__main__":
    main()
