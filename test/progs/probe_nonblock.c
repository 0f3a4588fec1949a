/*
 * probe_nonblock: non-blocking TCP sockets.
 *
 *   probe_nonblock 0 PORT   server: SOCK_NONBLOCK listener on 127.0.0.1:PORT
 *   probe_nonblock 1 PORT   client: O_NONBLOCK (fcntl) connect
 *
 * Checks: accept on an empty backlog is EAGAIN; a non-blocking connect is
 * EINPROGRESS, then poll reports POLLOUT and SO_ERROR is 0, a second connect
 * reports the success (0) and a third is EISCONN; accept() does not inherit O_NONBLOCK; recv with nothing buffered is
 * EAGAIN; poll with timeout 0 on nothing is 0; EOF after the peer's close.
 * The exchange is ordered so that every EAGAIN is certain natively too: each side
 * expects nothing while the other one waits for it.
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

static void server(int port)
{
    int s = tcp_listener(port, SOCK_NONBLOCK);
    CHECK("listener F_GETFL has O_NONBLOCK", !!(fcntl(s, F_GETFL) & O_NONBLOCK), 1);
    ERR("accept on an empty backlog", accept(s, NULL, NULL), EAGAIN);
    struct pollfd p = { .fd = s, .events = POLLIN };
    CHECK("poll(listener, timeout 0) before any connect", poll(&p, 1, 0), 0);
    CHECK("poll(listener) revents before any connect", p.revents, 0);
    phase();

    CHECK("poll(listener, -1) revents", wait_for(s, POLLIN), POLLIN);
    struct sockaddr_in peer;
    socklen_t len = sizeof peer;
    int c = (int)OK("accept", accept(s, (struct sockaddr *)&peer, &len));
    CHECK("accept addrlen", len, sizeof peer);
    CHECK("accept peer family", peer.sin_family, AF_INET);
    CHECK("accepted socket does not inherit O_NONBLOCK", fcntl(c, F_GETFL) & O_NONBLOCK, 0);
    ERR("accept with the backlog empty again", accept(s, NULL, NULL), EAGAIN);
    OK("fcntl(F_SETFL, O_NONBLOCK)", fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK));
    char buf[64];
    ERR("recv before the client sent anything", recv(c, buf, sizeof buf, 0), EAGAIN);
    ERR("read before the client sent anything", read(c, buf, sizeof buf), EAGAIN);
    CHECK("send hello", send(c, "hello", 5, 0), 5);
    phase();

    CHECK("poll(accepted) for the ping", wait_for(c, POLLIN) & POLLIN, POLLIN);
    size_t got = 0;
    while (got < 10) {             /* non-blocking: EAGAIN until the rest arrives */
        ssize_t r = recv(c, buf + got, 10 - got, 0);
        if (r > 0)
            got += (size_t)r;
        else if (r < 0 && errno == EAGAIN)
            wait_for(c, POLLIN);
        else {
            fail("recv ping: %zd (%s)", r, en(errno));
            break;
        }
    }
    MEM("ping", buf, got, "ping-12345");
    ERR("recv after the whole ping", recv(c, buf, sizeof buf, 0), EAGAIN);
    CHECK("send bye", send(c, "bye", 3, 0), 3);
    phase();

    CHECK("poll(accepted) for EOF", wait_for(c, POLLIN) & POLLIN, POLLIN);
    CHECK("recv at EOF", recv(c, buf, sizeof buf, 0), 0);
    CHECK("recv at EOF again", recv(c, buf, sizeof buf, 0), 0);
    finish();
}

static void client(int port)
{
    int s = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    CHECK("new socket is blocking", fcntl(s, F_GETFL) & O_NONBLOCK, 0);
    OK("fcntl(F_SETFL, O_NONBLOCK)", fcntl(s, F_SETFL, O_NONBLOCK));
    CHECK("F_GETFL after F_SETFL", fcntl(s, F_GETFL), O_RDWR | O_NONBLOCK);
    struct sockaddr_in sa = sin4("127.0.0.1", port);
    ERR("non-blocking connect", connect(s, (struct sockaddr *)&sa, sizeof sa), EINPROGRESS);
    phase();

    struct pollfd p = { .fd = s, .events = POLLOUT };
    while (poll(&p, 1, -1) == 0)
        ;
    CHECK("poll after connect: POLLOUT", p.revents, POLLOUT);
    int err = -1;
    socklen_t len = sizeof err;
    OK("getsockopt(SO_ERROR)", getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len));
    CHECK("SO_ERROR after connect", err, 0);
    CHECK("SO_ERROR optlen", len, sizeof err);
    /* Linux: the first connect() after the handshake completed reports its success (0);
     * only the next one says EISCONN. */
    CHECK("connect again once connected", connect(s, (struct sockaddr *)&sa, sizeof sa), 0);
    ERR("connect a third time", connect(s, (struct sockaddr *)&sa, sizeof sa), EISCONN);
    phase();

    char buf[64];
    CHECK("poll for hello", wait_for(s, POLLIN) & POLLIN, POLLIN);
    CHECK("recv hello (5 bytes)", recv_exact(s, buf, 5), 5);
    MEM("hello", buf, 5, "hello");
    ERR("recv while the server waits for the ping", recv(s, buf, sizeof buf, 0), EAGAIN);
    CHECK("send ping", send(s, "ping-12345", 10, 0), 10);
    phase();

    size_t got = 0;
    while (got < 3) {
        ssize_t r = recv(s, buf + got, 3 - got, 0);
        if (r > 0)
            got += (size_t)r;
        else if (r < 0 && errno == EAGAIN)
            wait_for(s, POLLIN);
        else {
            fail("recv bye: %zd (%s)", r, en(errno));
            break;
        }
    }
    MEM("bye", buf, got, "bye");
    OK("close", close(s));
    finish();
}

int main(int argc, char **argv)
{
    p_init();
    if (argc != 3) {
        fprintf(stderr, "usage: probe_nonblock 0|1 PORT\n");
        return 2;
    }
    if (atoi(argv[1]) == 0)
        server(atoi(argv[2]));
    else
        client(atoi(argv[2]));
    return 0;
}
