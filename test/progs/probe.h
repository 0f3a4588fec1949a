/* probe.h: the harness every test/progs/probe_*.c includes: checks that record
 * failures, and one canonical JSON line on fd 3 per phase. */
#ifndef CMC_PROBE_H
#define CMC_PROBE_H

/*
 * A probe checks what each call returns -- value, errno, bytes -- exactly as Linux
 * does on loopback, and reports one JSON line on fd 3 per phase (and at once on a
 * failed check):  {"phase":N,"done":false,"fail":["name: got ..., expected ..."]}
 * The last line has "done":true. Under cmc (CMC_NODE set) a few checks are exact
 * where Linux is only bounded (the clock); everything else is the same natively. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define UNUSED __attribute__((unused))
static int p_phase;
static char p_fail[12000];
static size_t p_len;
static int under_cmc;

static void p_emit(int done)
{
    static char line[12100];
    int n = snprintf(line, sizeof line, "{\"phase\":%d,\"done\":%s,\"fail\":[%s]}\n", p_phase,
                     done ? "true" : "false", p_fail);
    if (write(3, line, (size_t)n) != n)
        perror("probe: write fd 3");
}
static UNUSED void phase(void) { p_phase++; p_emit(0); }
/* The last report. Under cmc the node then parks in accept() on a listener nobody
 * knows, without closing anything: sockets left open send no FIN, so the search
 * ends with the probe instead of enumerating the orders of goodbyes. Natively it
 * returns (and the program exits). */
static UNUSED void finish(void)
{
    p_phase++;
    p_emit(1);
    if (getenv("CMC_NODE") != NULL) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        listen(s, 1);
        for (;;)
            accept(s, NULL, NULL);
    }
}
static void fail(const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "FAIL phase %d: %s\n", p_phase + 1, msg);
    if (p_len + 2 * strlen(msg) + 8 > sizeof p_fail)
        return;
    if (p_len)
        p_fail[p_len++] = ',';
    p_fail[p_len++] = '"';
    for (const char *c = msg; *c; c++) {
        if (*c == '"' || *c == '\\')
            p_fail[p_len++] = '\\';
        p_fail[p_len++] = (*c >= 32 && *c < 127) ? *c : '?';
    }
    p_fail[p_len++] = '"';
    p_fail[p_len] = 0;
    p_emit(0);                       /* show it at once, even if the probe then hangs */
}
/* A program starts as from a shell: no signal blocked, whatever cmc holds. */
static void p_init(void)
{
    under_cmc = getenv("CMC_NODE") != NULL;
    sigset_t blocked;
    sigprocmask(SIG_BLOCK, NULL, &blocked);
    for (int sig = 1; sig < NSIG; sig++)
        if (sigismember(&blocked, sig) == 1)
            fail("signal %d is blocked at start", sig);
}
static const char *en(int e)
{
    const char *s = e ? strerrorname_np(e) : "0";
    return s ? s : "?";
}
/* CHECK: a value; OK: a call that must succeed (returns its value); ERR: a call
 * that must fail with errno E; MEM: bytes. */
#define CHECK(name, got, exp) do { long g_ = (long)(got); int e_ = errno; long x_ = (long)(exp); \
    if (g_ != x_) fail("%s: got %ld%s%s, expected %ld", name, g_, g_ == -1 ? " " : "", \
                       g_ == -1 ? en(e_) : "", x_); } while (0)
static long p_ok(const char *name, long r)
{
    if (r < 0)
        fail("%s: failed with %s", name, en(errno));
    return r;
}
#define OK(name, call) p_ok(name, (long)(call))
#define ERR(name, call, e) do { errno = 0; long r_ = (long)(call); int e_ = errno; \
    if (r_ != -1 || e_ != (e)) fail("%s: got %ld (%s), expected -1 (%s)", name, r_, \
                                    r_ < 0 ? en(e_) : "no error", en(e)); } while (0)
/* MEM shows at most 60 of the bytes, and none for a count that is a failed call's -1
 * (it would read past the buffer). */
static UNUSED int p_shown(size_t n) { return n > (size_t)SSIZE_MAX ? 0 : n > 60 ? 60 : (int)n; }
#define MEM(name, buf, n, exp) do { size_t n_ = (size_t)(n); const char *x_ = (exp); \
    if (n_ != strlen(x_) || memcmp(buf, x_, n_) != 0) fail("%s: got %zu bytes \"%.*s\", " \
    "expected \"%s\"", name, n_, p_shown(n_), (const char *)(buf), x_); } while (0)

/* The monotonic clock in ns (under cmc: the logical clock). */
static UNUSED long mono_ns(void)
{
    struct timespec t = { 0, 0 };
    if (clock_gettime(CLOCK_MONOTONIC, &t) < 0)
        fail("clock_gettime(CLOCK_MONOTONIC): %s", en(errno));
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static UNUSED struct sockaddr_in sin4(const char *ip, int port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
    inet_pton(AF_INET, ip, &sa.sin_addr);
    return sa;
}
static UNUSED struct sockaddr_in6 sin6(const char *ip, int port)
{
    struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_port = htons((unsigned short)port) };
    inet_pton(AF_INET6, ip, &sa.sin6_addr);
    return sa;
}
/* A TCP listener on 127.0.0.1:port (SO_REUSEADDR, so native reruns can rebind). */
static UNUSED int tcp_listener(int port, int type_flags)
{
    int one = 1, s = (int)OK("socket(listener)", socket(AF_INET, SOCK_STREAM | type_flags, 0));
    struct sockaddr_in sa = sin4("127.0.0.1", port);
    OK("setsockopt(SO_REUSEADDR)", setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one));
    OK("bind(listener)", bind(s, (struct sockaddr *)&sa, sizeof sa));
    OK("listen", listen(s, 16));
    return s;
}
/* A blocking TCP connect to 127.0.0.1:port. */
static UNUSED int tcp_connect(int port)
{
    int s = (int)OK("socket(client)", socket(AF_INET, SOCK_STREAM, 0));
    struct sockaddr_in sa = sin4("127.0.0.1", port);
    OK("connect", connect(s, (struct sockaddr *)&sa, sizeof sa));
    return s;
}
/* Read exactly n bytes (a recv may return part of what was sent: loop). Returns the
 * count read before EOF or an error. */
static UNUSED size_t recv_exact(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, (char *)buf + got, n - got, 0);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                fail("recv_exact: %s after %zu of %zu bytes", en(errno), got, n);
            break;
        }
        got += (size_t)r;
    }
    return got;
}
/* Wait with poll(-1) until fd has one of `events`; returns revents. */
static UNUSED int wait_for(int fd, short events)
{
    struct pollfd p = { .fd = fd, .events = events };
    for (;;) {
        int r = poll(&p, 1, -1);
        if (r > 0)
            return p.revents;
        if (r < 0 && errno != EINTR) {
            fail("poll(wait_for): %s", en(errno));
            return 0;
        }
    }
}
/* Wait (blocking in poll) until fd reports one of `want`, then return everything
 * it reports for `events` at that point. Never spins: under cmc a node must block
 * for the world to move on. */
static UNUSED int wait_until(int fd, short events, short want)
{
    wait_for(fd, want);
    struct pollfd p = { .fd = fd, .events = events };
    if (poll(&p, 1, 0) != 1)
        fail("wait_until: poll(fd, 0) after readiness did not return 1");
    return p.revents;
}

#endif
