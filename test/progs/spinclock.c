/*
 * spinclock: polls the clock until an instant has passed.
 *
 *   spinclock USEC
 *
 * Reads CLOCK_MONOTONIC again and again, with no other call between, until USEC
 * microseconds have passed since the first read; then writes
 * {"done":true,"reads":N,"waited_ns":W} on fd 3 (N: the reads it took, W: the time
 * the last read showed past the first) and blocks forever in accept() on
 * 127.0.0.1:9100, an emulated call. Under `time virtual` a clock that is polled moves
 * (docs/target-contract.md, "Time"); under `time async` it never does, and the
 * watchdog stops the node.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "misbehave.h"

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: spinclock USEC\n");
        return 2;
    }
    long long wait = atoll(argv[1]) * 1000LL;
    long long start = now_ns(), t = start;
    long reads = 1;
    while (t - start < wait) {
        t = now_ns();
        reads++;
    }
    char line[128];
    int n = snprintf(line, sizeof line, "{\"done\":true,\"reads\":%ld,\"waited_ns\":%lld}\n",
                     reads, t - start);
    if (write(3, line, (size_t)n) != n)
        perror("spinclock: write fd 3");

    accept(listen_on("spinclock", "9100"), NULL, NULL);   /* blocks: an emulated call */
    return 0;
}
