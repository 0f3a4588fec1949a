/*
 * probe_time: the clock and sleeps.
 *
 *   probe_time              (one node)
 *
 * Under cmc the clock is logical (SPEC §8): CLOCK_REALTIME starts at
 * 2026-01-01T00:00:00Z, CLOCK_MONOTONIC and CLOCK_BOOTTIME at 1000 s, and they move
 * only when a timeout fires, by exactly its length. Natively only the bounds hold
 * (the clock moves by at least the sleep). Checks: time, gettimeofday,
 * clock_gettime of every realtime and monotonic clock; an unknown clock is EINVAL;
 * nanosleep, clock_nanosleep (relative, and TIMER_ABSTIME on CLOCK_REALTIME and
 * CLOCK_MONOTONIC), sleep and usleep advance the clock by their length; a sleep of 0
 * or to a time already past returns at once; bad arguments are EINVAL (as
 * clock_nanosleep's return value).
 */

/* ---- probe harness (the same block opens every probe_*.c) -----------------------
 * A probe checks what each call returns -- value, errno, bytes -- exactly as Linux
 * does on loopback, and reports one JSON line on fd 3 per phase (and at once on a
 * failed check):  {"phase":N,"done":false,"fail":["name: got ..., expected ..."]}
 * The last line has "done":true. Under cmc (CMC_NODE set) a few checks are exact
 * where Linux is only bounded (the clock); everything else is the same natively.
 * Every probe carries an identical copy of this block: change them all together. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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
static void p_init(void) { under_cmc = getenv("CMC_NODE") != NULL; }

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
#define MEM(name, buf, n, exp) do { size_t n_ = (size_t)(n); const char *x_ = (exp); \
    if (n_ != strlen(x_) || memcmp(buf, x_, n_) != 0) fail("%s: got %zu bytes \"%.*s\", " \
    "expected \"%s\"", name, n_, (int)(n_ > 60 ? 60 : n_), (const char *)(buf), x_); } while (0)

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
/* ---- end of the probe harness --------------------------------------------------- */

static long ns_of(clockid_t c)
{
    struct timespec t;
    if (clock_gettime(c, &t) < 0) {
        fail("clock_gettime(%d): %s", (int)c, en(errno));
        return 0;
    }
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* the clock moved by exactly `want` ns under cmc, by at least that natively */
static void moved(const char *what, long before, long after, long want)
{
    long d = after - before;
    if (under_cmc ? d != want : d < want)
        fail("%s: the clock moved by %ld ns, expected %s%ld", what, d, under_cmc ? "" : ">= ", want);
}

int main(void)
{
    p_init();
    const long S = 1000000000L, EPOCH = 1767225600L;   /* 2026-01-01T00:00:00Z */
    long rt = ns_of(CLOCK_REALTIME), mono = ns_of(CLOCK_MONOTONIC);
    struct timeval tv;
    OK("gettimeofday", gettimeofday(&tv, NULL));
    time_t t1 = time(NULL), t2 = 0;
    CHECK("time(&t) returns what it stores", time(&t2), t2);
    if (under_cmc) {
        CHECK("CLOCK_REALTIME at start (ns)", rt, EPOCH * S);
        CHECK("CLOCK_MONOTONIC at start (ns)", mono, 1000 * S);
        CHECK("CLOCK_BOOTTIME at start (ns)", ns_of(CLOCK_BOOTTIME), 1000 * S);
        CHECK("CLOCK_MONOTONIC_RAW at start (ns)", ns_of(CLOCK_MONOTONIC_RAW), 1000 * S);
        CHECK("CLOCK_REALTIME_COARSE at start (s)", ns_of(CLOCK_REALTIME_COARSE) / S, EPOCH);
        CHECK("CLOCK_MONOTONIC_COARSE at start (s)", ns_of(CLOCK_MONOTONIC_COARSE) / S, 1000);
        CHECK("CLOCK_TAI at start (s)", ns_of(CLOCK_TAI) / S, EPOCH);
        CHECK("gettimeofday at start", tv.tv_sec * 1000000L + tv.tv_usec, EPOCH * 1000000L);
        CHECK("time at start", t1, EPOCH);
    } else {
        if (rt / S < EPOCH - 366L * 86400 * 10 || labs(tv.tv_sec - rt / S) > 2 || labs(t1 - rt / S) > 2)
            fail("native realtime clocks disagree: %ld %ld %ld", rt / S, (long)tv.tv_sec, (long)t1);
    }
    struct timespec ts;
    ERR("clock_gettime(an unknown clock)", clock_gettime(77, &ts), EINVAL);
    phase();

    long r0 = ns_of(CLOCK_REALTIME), m0 = ns_of(CLOCK_MONOTONIC), b0 = ns_of(CLOCK_BOOTTIME);
    struct timespec half = { 0, 500000000 }, rem = { 0, 0 };
    CHECK("nanosleep(0.5 s)", nanosleep(&half, &rem), 0);
    long r1 = ns_of(CLOCK_REALTIME), m1 = ns_of(CLOCK_MONOTONIC);
    moved("nanosleep 0.5 s, CLOCK_MONOTONIC", m0, m1, 500000000L);
    moved("nanosleep 0.5 s, CLOCK_REALTIME", r0, r1, 500000000L);
    moved("nanosleep 0.5 s, CLOCK_BOOTTIME", b0, ns_of(CLOCK_BOOTTIME), 500000000L);
    phase();

    struct timespec fifth = { 0, 200000000 };
    CHECK("clock_nanosleep(CLOCK_MONOTONIC, 0.2 s)", clock_nanosleep(CLOCK_MONOTONIC, 0, &fifth, NULL), 0);
    long m2 = ns_of(CLOCK_MONOTONIC);
    moved("clock_nanosleep relative 0.2 s", m1, m2, 200000000L);
    phase();

    long target = ns_of(CLOCK_REALTIME) + 300000000L;
    struct timespec abs_rt = { target / S, target % S };
    CHECK("clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, now + 0.3 s)",
          clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &abs_rt, NULL), 0);
    long r3 = ns_of(CLOCK_REALTIME);
    if (under_cmc ? r3 != target : r3 < target)
        fail("after an absolute sleep to %ld the realtime clock is %ld", target, r3);
    phase();

    long m3 = ns_of(CLOCK_MONOTONIC);
    struct timespec past = { m3 / S - 5, 0 };
    CHECK("clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, 5 s ago)",
          clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &past, NULL), 0);
    struct timespec zero = { 0, 0 };
    CHECK("nanosleep(0)", nanosleep(&zero, NULL), 0);
    if (under_cmc)
        CHECK("sleeps of 0 and into the past do not move the clock", ns_of(CLOCK_MONOTONIC), m3);
    struct timespec bad = { 0, 2000000000L };
    ERR("nanosleep with tv_nsec out of range", nanosleep(&bad, NULL), EINVAL);
    CHECK("clock_nanosleep with tv_nsec out of range", clock_nanosleep(CLOCK_MONOTONIC, 0, &bad, NULL), EINVAL);
    CHECK("clock_nanosleep on an unknown clock", clock_nanosleep(77, 0, &fifth, NULL), EINVAL);
    phase();

    long m4 = ns_of(CLOCK_MONOTONIC);
    CHECK("sleep(1)", sleep(1), 0);
    long m5 = ns_of(CLOCK_MONOTONIC);
    moved("sleep(1)", m4, m5, S);
    CHECK("usleep(1000)", usleep(1000), 0);
    moved("usleep(1000)", m5, ns_of(CLOCK_MONOTONIC), 1000000L);
    if (under_cmc) {
        CHECK("CLOCK_MONOTONIC at the end (ns)", ns_of(CLOCK_MONOTONIC), 1000 * S + 2001000000L);
        CHECK("time at the end", time(NULL), EPOCH + 2);
    }
    finish();
    return 0;
}
