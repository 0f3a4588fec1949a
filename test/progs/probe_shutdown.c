/*
 * probe_shutdown: shutdown, EOF, EPIPE/SIGPIPE, resets.
 *
 *   probe_shutdown PORT     (one node talking to itself)
 *
 * Checks: shutdown's argument and state errors; SHUT_WR gives the peer EOF after the
 * data sent before it, and the peer can still send back (half close); a write after
 * SHUT_WR is EPIPE, with SIGPIPE unless MSG_NOSIGNAL or SIGPIPE is ignored, and a
 * handler sees it once; SHUT_RD makes a read with nothing buffered return 0; closing
 * with unread data resets the peer: poll shows POLLERR|POLLHUP, the first read is
 * ECONNRESET, later reads 0, a write EPIPE; or SO_ERROR reports ECONNRESET first.
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

static volatile sig_atomic_t sigpipes;
static void on_sigpipe(int sig) { (void)sig; sigpipes++; }

static void pair(int l, int port, int *a, int *b)
{
    *a = tcp_connect(port);
    *b = (int)OK("accept", accept(l, NULL, NULL));
}

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    int l = tcp_listener(port, 0);
    int lone = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    ERR("shutdown of an unconnected socket", shutdown(lone, SHUT_WR), ENOTCONN);
    ERR("shutdown(how=7) of an unconnected socket", shutdown(lone, 7), EINVAL);
    close(lone);
    int a, b;
    pair(l, port, &a, &b);
    ERR("shutdown(how=3)", shutdown(a, 3), EINVAL);
    phase();

    char buf[64];
    CHECK("send data before SHUT_WR", send(a, "data", 4, 0), 4);
    OK("shutdown(SHUT_WR)", shutdown(a, SHUT_WR));
    OK("shutdown(SHUT_WR) again", shutdown(a, SHUT_WR));
    CHECK("peer reads the data", recv_exact(b, buf, 4), 4);
    MEM("data", buf, 4, "data");
    CHECK("peer reads EOF", recv(b, buf, sizeof buf, 0), 0);
    CHECK("peer reads EOF again", read(b, buf, sizeof buf), 0);
    CHECK("half close: the peer still sends", send(b, "back", 4, 0), 4);
    CHECK("half close: the shut side still reads", recv_exact(a, buf, 4), 4);
    MEM("back", buf, 4, "back");
    phase();

    ERR("send(MSG_NOSIGNAL) after SHUT_WR", send(a, "x", 1, MSG_NOSIGNAL), EPIPE);
    struct sigaction sa = { .sa_handler = on_sigpipe };
    sigemptyset(&sa.sa_mask);
    OK("sigaction(SIGPIPE)", sigaction(SIGPIPE, &sa, NULL));
    CHECK("no SIGPIPE with MSG_NOSIGNAL", sigpipes, 0);
    ERR("write after SHUT_WR", write(a, "x", 1), EPIPE);
    CHECK("SIGPIPE raised by the write", sigpipes, 1);
    signal(SIGPIPE, SIG_IGN);
    ERR("send after SHUT_WR, SIGPIPE ignored", send(a, "x", 1, 0), EPIPE);
    CHECK("no SIGPIPE when ignored", sigpipes, 1);
    phase();

    int c, d;
    pair(l, port, &c, &d);
    OK("shutdown(SHUT_RD)", shutdown(d, SHUT_RD));
    /* MSG_DONTWAIT: Linux answers 0 at once either way; a wrong answer cannot hang */
    CHECK("recv(MSG_DONTWAIT) after SHUT_RD with nothing buffered",
          recv(d, buf, sizeof buf, MSG_DONTWAIT), 0);
    struct pollfd p = { .fd = d, .events = POLLIN | POLLRDHUP };
    CHECK("poll after SHUT_RD", poll(&p, 1, 0), 1);
    CHECK("revents after SHUT_RD", p.revents, POLLIN | POLLRDHUP);
    phase();

    int e, f;
    pair(l, port, &e, &f);
    CHECK("send unread", send(e, "unread", 6, 0), 6);
    CHECK("poll for the unread bytes", wait_for(f, POLLIN), POLLIN);
    OK("close with unread data (a reset)", close(f));
    CHECK("poll on the reset socket",
          wait_until(e, POLLIN | POLLOUT | POLLRDHUP, POLLERR),
          POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDHUP);
    ERR("first recv after a reset", recv(e, buf, sizeof buf, 0), ECONNRESET);
    CHECK("second recv after a reset", recv(e, buf, sizeof buf, 0), 0);
    int err = -1;
    socklen_t len = sizeof err;
    OK("getsockopt(SO_ERROR)", getsockopt(e, SOL_SOCKET, SO_ERROR, &err, &len));
    CHECK("SO_ERROR once the reset was reported", err, 0);
    ERR("send after a reset", send(e, "x", 1, MSG_NOSIGNAL), EPIPE);
    phase();

    int g, h;
    pair(l, port, &g, &h);
    CHECK("send unread", send(g, "unread", 6, 0), 6);
    CHECK("poll for the unread bytes", wait_for(h, POLLIN), POLLIN);
    OK("close with unread data (a reset)", close(h));
    wait_for(g, POLLERR);
    err = -1;
    OK("getsockopt(SO_ERROR)", getsockopt(g, SOL_SOCKET, SO_ERROR, &err, &len));
    CHECK("SO_ERROR after a reset", err, ECONNRESET);
    err = -1;
    OK("getsockopt(SO_ERROR)", getsockopt(g, SOL_SOCKET, SO_ERROR, &err, &len));
    CHECK("SO_ERROR read twice", err, 0);
    CHECK("recv after SO_ERROR took the reset", recv(g, buf, sizeof buf, 0), 0);
    finish();
    return 0;
}
