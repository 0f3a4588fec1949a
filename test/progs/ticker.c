/*
 * ticker: idle ticks, then one that shows.
 *
 *   ticker PORT MS N
 *
 * Sleeps MS milliseconds N times (nanosleep: each a FIRE) without a word, as a
 * runtime's housekeeping timer does, then writes {"ticks":N,"at_ms":T} on fd 3 (T:
 * CLOCK_MONOTONIC in milliseconds since the start) and blocks forever in accept() on
 * 127.0.0.1:PORT. Under `time virtual` the first N-1 ticks change nothing another node
 * or a property sees, and are folded into the step they follow.
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
    if (argc != 4) {
        fprintf(stderr, "usage: ticker PORT MS N\n");
        return 2;
    }
    long ms = atol(argv[2]), n = atol(argv[3]);
    long long start = now_ms();
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    for (long i = 0; i < n; i++)
        nanosleep(&ts, NULL);
    char line[96];
    int len = snprintf(line, sizeof line, "{\"ticks\":%ld,\"at_ms\":%lld}\n", n, now_ms() - start);
    if (write(3, line, (size_t)len) != len)
        perror("ticker: write fd 3");
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 1) < 0) {
        perror("ticker: listen");
        return 1;
    }
    accept(fd, NULL, NULL);
    return 0;
}
