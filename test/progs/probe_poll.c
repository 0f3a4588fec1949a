/*
 * probe_poll: poll and ppoll on virtual sockets (one node talking to itself).
 *
 *   probe_poll PORT
 *
 * Checks: a listener is POLLIN once a connection is queued; connected sockets are
 * POLLOUT; revents only holds what was asked for (plus POLLERR/POLLHUP); an fd of
 * -1 is ignored; a closed descriptor is POLLNVAL; the return value counts the
 * entries with revents; a timeout returns 0 and clears revents (and the clock moves
 * by the timeout), also for a poll with no descriptor at all (a sleep); ppoll with
 * a timespec, with none and with a signal mask; POLLRDHUP after the peer's SHUT_WR;
 * POLLOUT after one's own SHUT_WR (a write would not block: it fails at once) and
 * POLLHUP once both sides are shut.
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

static long mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    int l = tcp_listener(port, 0);
    struct pollfd p[4];
    p[0] = (struct pollfd){ .fd = l, .events = POLLIN | POLLOUT };
    CHECK("poll(listener, 0) before any connect", poll(p, 1, 0), 0);
    CHECK("listener revents before any connect", p[0].revents, 0);
    phase();

    int a = tcp_connect(port);
    CHECK("poll(listener) after connect", wait_for(l, POLLIN | POLLOUT), POLLIN);
    int b = (int)OK("accept", accept(l, NULL, NULL));
    p[0] = (struct pollfd){ .fd = l, .events = POLLIN };
    CHECK("poll(listener, 0) after accept", poll(p, 1, 0), 0);
    p[0] = (struct pollfd){ .fd = a, .events = POLLIN | POLLOUT, .revents = 0x7 };
    p[1] = (struct pollfd){ .fd = -1, .events = POLLIN, .revents = 0x7 };
    p[2] = (struct pollfd){ .fd = b, .events = POLLOUT };
    p[3] = (struct pollfd){ .fd = b, .events = 0 };
    CHECK("poll(a, -1, b, b) count", poll(p, 4, 0), 2);
    CHECK("a revents: POLLOUT", p[0].revents, POLLOUT);
    CHECK("fd -1 revents", p[1].revents, 0);
    CHECK("b revents: POLLOUT", p[2].revents, POLLOUT);
    CHECK("b with events 0", p[3].revents, 0);
    int closed = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    OK("close", close(closed));
    p[0] = (struct pollfd){ .fd = closed, .events = POLLIN };
    p[1] = (struct pollfd){ .fd = a, .events = POLLIN };
    CHECK("poll(closed fd, a) count", poll(p, 2, 0), 1);
    CHECK("closed fd revents: POLLNVAL", p[0].revents, POLLNVAL);
    CHECK("a revents with nothing to read", p[1].revents, 0);
    phase();

    /* A timeout: nothing is in flight, so only the timeout can end these. */
    long t0 = mono_ns();
    p[0] = (struct pollfd){ .fd = b, .events = POLLIN, .revents = 0x7 };
    CHECK("poll(b, 30 ms) with nothing to read", poll(p, 1, 30), 0);
    CHECK("revents after a timeout", p[0].revents, 0);
    long dt = mono_ns() - t0;
    if (under_cmc)
        CHECK("clock moved by the poll timeout (ns)", dt, 30000000L);
    else if (dt < 30000000L)
        fail("poll returned after %ld ns, before its 30 ms timeout", dt);
    phase();
    t0 = mono_ns();
    struct timespec ts = { 0, 20000000 };
    CHECK("ppoll(b, 20 ms) with nothing to read", ppoll(p, 1, &ts, NULL), 0);
    dt = mono_ns() - t0;
    if (under_cmc)
        CHECK("clock moved by the ppoll timeout (ns)", dt, 20000000L);
    else if (dt < 20000000L)
        fail("ppoll returned after %ld ns, before its 20 ms timeout", dt);
    struct timespec zero = { 0, 0 };
    CHECK("ppoll(b, {0,0})", ppoll(p, 1, &zero, NULL), 0);
    t0 = mono_ns();
    CHECK("poll(NULL, 0, 25 ms): a sleep", poll(NULL, 0, 25), 0);
    dt = mono_ns() - t0;
    if (under_cmc)
        CHECK("clock moved by poll(NULL, 0, 25 ms) (ns)", dt, 25000000L);
    else if (dt < 25000000L)
        fail("poll(NULL, 0, 25) returned after %ld ns", dt);
    phase();

    CHECK("send x", send(a, "x", 1, 0), 1);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGUSR1);
    p[0] = (struct pollfd){ .fd = b, .events = POLLIN | POLLRDHUP };
    CHECK("ppoll(b, NULL timeout, sigmask) after a send", ppoll(p, 1, NULL, &mask), 1);
    CHECK("b revents: POLLIN", p[0].revents, POLLIN);
    char c;
    CHECK("recv x", recv(b, &c, 1, 0), 1);
    p[0] = (struct pollfd){ .fd = b, .events = POLLIN };
    CHECK("poll(b, 0) after reading everything", poll(p, 1, 0), 0);
    phase();

    OK("shutdown(a, SHUT_WR)", shutdown(a, SHUT_WR));
    CHECK("b after the peer's SHUT_WR", wait_until(b, POLLIN | POLLOUT | POLLRDHUP, POLLRDHUP),
          POLLIN | POLLOUT | POLLRDHUP);
    p[0] = (struct pollfd){ .fd = a, .events = POLLIN | POLLOUT | POLLRDHUP };
    CHECK("poll(a, 0) after its own SHUT_WR", poll(p, 1, 0), 1);
    CHECK("a after its own SHUT_WR: POLLOUT (a write would not block)", p[0].revents, POLLOUT);
    phase();

    OK("shutdown(b, SHUT_WR)", shutdown(b, SHUT_WR));
    CHECK("a once both sides are shut", wait_until(a, POLLIN | POLLOUT | POLLRDHUP, POLLRDHUP),
          POLLIN | POLLOUT | POLLRDHUP | POLLHUP);
    p[0] = (struct pollfd){ .fd = b, .events = POLLIN };
    CHECK("poll(b, 0) once both sides are shut", poll(p, 1, 0), 1);
    CHECK("b once both sides are shut (POLLHUP unasked)", p[0].revents, POLLIN | POLLHUP);
    p[0] = (struct pollfd){ .fd = b, .events = 0 };
    CHECK("b with events 0 once both sides are shut", poll(p, 1, 0), 1);
    CHECK("b revents with events 0: POLLHUP", p[0].revents, POLLHUP);
    finish();
    return 0;
}
