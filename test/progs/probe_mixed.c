/*
 * probe_mixed: readiness of real descriptors (a pipe, an AF_UNIX socketpair) inside
 * one poll, select or epoll set together with virtual sockets.
 *
 *   probe_mixed PORT        (one node talking to itself)
 *
 * Checks, for poll, select and epoll alike: a readable pipe alone, a readable
 * virtual socket alone, both; a pipe whose writer is closed (POLLHUP); a socketpair;
 * a timeout with everything idle (the clock moves by it); a real fd that is not
 * open is POLLNVAL/EBADF.
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

#include <sys/epoll.h>
#include <sys/select.h>

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
    int a = tcp_connect(port);
    int b = (int)OK("accept", accept(l, NULL, NULL));
    int pp[2], sv[2];
    OK("pipe", pipe(pp));
    OK("socketpair", socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    char buf[16];

    /* poll */
    struct pollfd p[3];
    CHECK("write the pipe", write(pp[1], "p", 1), 1);
    p[0] = (struct pollfd){ .fd = pp[0], .events = POLLIN };
    p[1] = (struct pollfd){ .fd = b, .events = POLLIN };
    CHECK("poll(pipe, socket): the pipe is ready", poll(p, 2, -1), 1);
    CHECK("pipe revents", p[0].revents, POLLIN);
    CHECK("socket revents", p[1].revents, 0);
    CHECK("read the pipe", read(pp[0], buf, sizeof buf), 1);
    CHECK("send on the socket", send(a, "s", 1, 0), 1);
    CHECK("poll(pipe, socket): the socket gets ready", poll(p, 2, -1), 1);
    CHECK("pipe revents", p[0].revents, 0);
    CHECK("socket revents", p[1].revents, POLLIN);
    CHECK("write the pipe", write(pp[1], "p", 1), 1);
    CHECK("poll(pipe, socket, 0): both ready", poll(p, 2, 0), 2);
    CHECK("pipe revents (both)", p[0].revents, POLLIN);
    CHECK("socket revents (both)", p[1].revents, POLLIN);
    CHECK("write the socketpair", write(sv[1], "u", 1), 1);
    p[2] = (struct pollfd){ .fd = sv[0], .events = POLLIN | POLLOUT };
    CHECK("poll(pipe, socket, socketpair, 0)", poll(p, 3, 0), 3);
    CHECK("socketpair revents", p[2].revents, POLLIN | POLLOUT);
    phase();

    /* select */
    fd_set r;
    FD_ZERO(&r);
    FD_SET(pp[0], &r);
    FD_SET(b, &r);
    FD_SET(sv[0], &r);
    int top = b > pp[0] ? b : pp[0];
    top = (top > sv[0] ? top : sv[0]) + 1;
    struct timeval tv = { 0, 0 };
    CHECK("select(pipe, socket, socketpair) all readable", select(top, &r, NULL, NULL, &tv), 3);
    CHECK("read the pipe", read(pp[0], buf, sizeof buf), 1);
    CHECK("read the socketpair", read(sv[0], buf, sizeof buf), 1);
    FD_ZERO(&r);
    FD_SET(pp[0], &r);
    FD_SET(b, &r);
    FD_SET(sv[0], &r);
    CHECK("select: only the socket left", select(top, &r, NULL, NULL, NULL), 1);
    CHECK("select: socket set", !!FD_ISSET(b, &r), 1);
    CHECK("select: pipe not set", FD_ISSET(pp[0], &r), 0);
    CHECK("recv the socket", recv(b, buf, sizeof buf, 0), 1);
    phase();

    /* epoll */
    int ep = (int)OK("epoll_create1", epoll_create1(0));
    struct epoll_event e = { .events = EPOLLIN, .data.u64 = 1 };
    OK("EPOLL_CTL_ADD pipe", epoll_ctl(ep, EPOLL_CTL_ADD, pp[0], &e));
    e = (struct epoll_event){ .events = EPOLLIN, .data.u64 = 2 };
    OK("EPOLL_CTL_ADD socket", epoll_ctl(ep, EPOLL_CTL_ADD, b, &e));
    e = (struct epoll_event){ .events = EPOLLIN, .data.u64 = 3 };
    OK("EPOLL_CTL_ADD socketpair", epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &e));
    struct epoll_event ev[4];
    CHECK("epoll_wait(0): nothing ready", epoll_wait(ep, ev, 4, 0), 0);
    CHECK("write the pipe", write(pp[1], "p", 1), 1);
    CHECK("epoll_wait(-1): the pipe", epoll_wait(ep, ev, 4, -1), 1);
    CHECK("epoll: pipe data", ev[0].data.u64, 1);
    CHECK("read the pipe", read(pp[0], buf, sizeof buf), 1);
    CHECK("send on the socket", send(a, "s", 1, 0), 1);
    CHECK("epoll_wait(-1): the socket", epoll_wait(ep, ev, 4, -1), 1);
    CHECK("epoll: socket data", ev[0].data.u64, 2);
    CHECK("write the socketpair", write(sv[1], "u", 1), 1);
    CHECK("epoll_wait(0): socket and socketpair", epoll_wait(ep, ev, 4, 0), 2);
    CHECK("epoll: the two data", ev[0].data.u64 + ev[1].data.u64, 5);
    CHECK("recv the socket", recv(b, buf, sizeof buf, 0), 1);
    CHECK("read the socketpair", read(sv[0], buf, sizeof buf), 1);
    phase();

    /* timeouts with everything idle, then HUP on the pipe, then a closed real fd */
    long t0 = mono_ns();
    p[0] = (struct pollfd){ .fd = pp[0], .events = POLLIN };
    p[1] = (struct pollfd){ .fd = b, .events = POLLIN };
    CHECK("poll(pipe, socket, 30 ms) idle", poll(p, 2, 30), 0);
    CHECK("epoll_wait(20 ms) idle", epoll_wait(ep, ev, 4, 20), 0);
    long dt = mono_ns() - t0;
    if (under_cmc ? dt != 50000000L : dt < 50000000L)
        fail("idle timeouts: the clock moved by %ld ns, expected 50 ms", dt);
    close(pp[1]);
    CHECK("poll(pipe, socket) after the writer closed", poll(p, 2, -1), 1);
    CHECK("pipe revents: POLLHUP", p[0].revents, POLLHUP);
    CHECK("epoll after the writer closed", epoll_wait(ep, ev, 4, -1), 1);
    CHECK("epoll: EPOLLHUP on the pipe", ev[0].events, EPOLLHUP);
    int gone = (int)OK("pipe", pipe(pp));
    close(pp[0]);
    close(pp[1]);
    (void)gone;
    p[0] = (struct pollfd){ .fd = pp[0], .events = POLLIN };
    CHECK("poll(closed real fd, socket, 0)", poll(p, 2, 0), 1);
    CHECK("closed real fd: POLLNVAL", p[0].revents, POLLNVAL);
    finish();
    return 0;
}
