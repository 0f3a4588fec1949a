/*
 * timers: sleeps, and says when it woke.
 *
 *   timers PORT MS [MS ...]
 *
 * For each MS in turn: nanosleep MS milliseconds (a FIRE), then write
 * {"woke":K,"at_ms":T} on fd 3 (K: how many sleeps are over, T: CLOCK_MONOTONIC in
 * milliseconds since the program started). Then blocks forever in accept() on
 * 127.0.0.1:PORT, an emulated call. Two of them side by side show how the FIREs of two
 * nodes interleave: under `time async` in every order, under `time virtual` in the
 * order of their deadlines on the one clock.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: timers PORT MS [MS ...]\n");
        return 2;
    }
    long long start = now_ms();
    for (int i = 2; i < argc; i++) {
        long ms = atol(argv[i]);
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
        char line[96];
        int n = snprintf(line, sizeof line, "{\"woke\":%d,\"at_ms\":%lld}\n", i - 1,
                         now_ms() - start);
        if (write(3, line, (size_t)n) != n)
            perror("timers: write fd 3");
    }
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 1) < 0) {
        perror("timers: listen");
        return 1;
    }
    accept(fd, NULL, NULL);
    return 0;
}
