/*
 * clock: shows whether time is virtual.
 *
 * Reads the time through libc the usual way (time, gettimeofday, clock_gettime for
 * CLOCK_REALTIME and CLOCK_MONOTONIC; libc answers these from the vDSO when it can),
 * reports it on fd 3, sleeps 2.5 s with nanosleep, reports again, then blocks forever in
 * accept() on 127.0.0.1:9000, an emulated call, so that the node stays alive.
 *
 * fd 3 lines:
 *   {"time":T,"tv_sec":S,"rt":R,"mono":M,"rt_ns":N}
 *   {"phase":2,"time":T,"tv_sec":S,"rt":R,"mono":M,"rt_ns":N}
 * time: time(NULL); tv_sec: gettimeofday's seconds; rt, rt_ns: CLOCK_REALTIME's tv_sec
 * and tv_nsec; mono: CLOCK_MONOTONIC's tv_sec.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static void report(const char *prefix)
{
    time_t t = time(NULL);
    struct timeval tv = { 0, 0 };             /* 0 if a call failed (it says so) */
    struct timespec rt = { 0, 0 }, mono = { 0, 0 };
    if (gettimeofday(&tv, NULL) < 0 || clock_gettime(CLOCK_REALTIME, &rt) < 0 ||
        clock_gettime(CLOCK_MONOTONIC, &mono) < 0)
        perror("clock: reading the clock");

    char line[256];
    int n = snprintf(line, sizeof line, "{%s\"time\":%lld,\"tv_sec\":%lld,\"rt\":%lld,"
                     "\"mono\":%lld,\"rt_ns\":%ld}\n",
                     prefix, (long long)t, (long long)tv.tv_sec, (long long)rt.tv_sec,
                     (long long)mono.tv_sec, rt.tv_nsec);
    if (write(3, line, (size_t)n) != n)
        perror("clock: write fd 3");
}

int main(void)
{
    report("");

    struct timespec d = { 2, 500 * 1000 * 1000 };
    if (nanosleep(&d, NULL) < 0)
        perror("clock: nanosleep");
    report("\"phase\":2,");

    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(9000) };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 1) < 0) {
        perror("clock: listen");
        return 1;
    }
    for (;;) {                      /* nobody connects: this blocks forever */
        int c = accept(fd, NULL, NULL);
        if (c < 0) {
            perror("clock: accept");
            return 1;
        }
        close(c);
    }
}
