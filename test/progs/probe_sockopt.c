/*
 * probe_sockopt: socket options.
 *
 *   probe_sockopt PORT      (one node talking to itself; uses PORT..PORT+4)
 *
 * Checks: defaults (SO_REUSEADDR, SO_REUSEPORT, SO_KEEPALIVE, TCP_NODELAY 0;
 * SO_TYPE, SO_DOMAIN, SO_PROTOCOL, SO_ACCEPTCONN; buffer sizes > 0; timeouts 0);
 * boolean options read back as 1 whatever non-zero value was set; an int option
 * shorter than an int is EINVAL; TCP_KEEPIDLE round trip; SO_RCVTIMEO makes recv
 * and accept time out with EAGAIN after that long (the clock moves by it);
 * SO_SNDTIMEO round trip; SO_REUSEADDR does not allow binding a listening port;
 * two sockets bound to one port need SO_REUSEADDR on both and only one may listen;
 * SO_REUSEPORT lets two listen; SO_LINGER {1, 0} makes close reset the peer.
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

static int get_int(int fd, int level, int opt, const char *name)
{
    int v = -12345;
    socklen_t len = sizeof v;
    if (getsockopt(fd, level, opt, &v, &len) < 0)
        fail("getsockopt(%s): %s", name, en(errno));
    else if (len != sizeof v)
        fail("getsockopt(%s): optlen %u", name, (unsigned)len);
    return v;
}

static void set_int(int fd, int level, int opt, int v, const char *name)
{
    if (setsockopt(fd, level, opt, &v, sizeof v) < 0)
        fail("setsockopt(%s, %d): %s", name, v, en(errno));
}

static long mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static int bind_to(int port, int reuseaddr, int reuseport)
{
    int s = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    if (reuseaddr)
        set_int(s, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR");
    if (reuseport)
        set_int(s, SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT");
    struct sockaddr_in sa = sin4("127.0.0.1", port);
    if (bind(s, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(s);
        errno = e;
        return -1;
    }
    return s;
}

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    int s = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    CHECK("SO_REUSEADDR default", get_int(s, SOL_SOCKET, SO_REUSEADDR, "SO_REUSEADDR"), 0);
    CHECK("SO_REUSEPORT default", get_int(s, SOL_SOCKET, SO_REUSEPORT, "SO_REUSEPORT"), 0);
    CHECK("SO_KEEPALIVE default", get_int(s, SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE"), 0);
    CHECK("TCP_NODELAY default", get_int(s, IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY"), 0);
    CHECK("SO_ERROR", get_int(s, SOL_SOCKET, SO_ERROR, "SO_ERROR"), 0);
    CHECK("SO_TYPE", get_int(s, SOL_SOCKET, SO_TYPE, "SO_TYPE"), SOCK_STREAM);
    CHECK("SO_DOMAIN", get_int(s, SOL_SOCKET, SO_DOMAIN, "SO_DOMAIN"), AF_INET);
    CHECK("SO_PROTOCOL", get_int(s, SOL_SOCKET, SO_PROTOCOL, "SO_PROTOCOL"), IPPROTO_TCP);
    CHECK("SO_ACCEPTCONN (not listening)", get_int(s, SOL_SOCKET, SO_ACCEPTCONN, "SO_ACCEPTCONN"), 0);
    if (get_int(s, SOL_SOCKET, SO_RCVBUF, "SO_RCVBUF") <= 0)
        fail("SO_RCVBUF default is not positive");
    if (get_int(s, SOL_SOCKET, SO_SNDBUF, "SO_SNDBUF") <= 0)
        fail("SO_SNDBUF default is not positive");
    struct timeval tv = { 7, 7 };
    socklen_t len = sizeof tv;
    OK("getsockopt(SO_RCVTIMEO)", getsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, &len));
    CHECK("SO_RCVTIMEO default", tv.tv_sec * 1000000 + tv.tv_usec, 0);
    CHECK("SO_RCVTIMEO optlen", len, sizeof tv);
    struct linger lg = { 7, 7 };
    len = sizeof lg;
    OK("getsockopt(SO_LINGER)", getsockopt(s, SOL_SOCKET, SO_LINGER, &lg, &len));
    CHECK("SO_LINGER default onoff", lg.l_onoff, 0);
    CHECK("SO_LINGER optlen", len, sizeof lg);
    phase();

    set_int(s, SOL_SOCKET, SO_REUSEADDR, 5, "SO_REUSEADDR");
    CHECK("SO_REUSEADDR set to 5 reads 1", get_int(s, SOL_SOCKET, SO_REUSEADDR, "SO_REUSEADDR"), 1);
    set_int(s, SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT");
    CHECK("SO_REUSEPORT", get_int(s, SOL_SOCKET, SO_REUSEPORT, "SO_REUSEPORT"), 1);
    set_int(s, SOL_SOCKET, SO_KEEPALIVE, 3, "SO_KEEPALIVE");
    CHECK("SO_KEEPALIVE set to 3 reads 1", get_int(s, SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE"), 1);
    set_int(s, IPPROTO_TCP, TCP_NODELAY, 7, "TCP_NODELAY");
    CHECK("TCP_NODELAY set to 7 reads 1", get_int(s, IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY"), 1);
    set_int(s, IPPROTO_TCP, TCP_NODELAY, 0, "TCP_NODELAY");
    CHECK("TCP_NODELAY set to 0", get_int(s, IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY"), 0);
    set_int(s, IPPROTO_TCP, TCP_KEEPIDLE, 30, "TCP_KEEPIDLE");
    CHECK("TCP_KEEPIDLE", get_int(s, IPPROTO_TCP, TCP_KEEPIDLE, "TCP_KEEPIDLE"), 30);
    char two[2] = { 1, 0 };
    ERR("setsockopt(SO_KEEPALIVE) with optlen 2", setsockopt(s, SOL_SOCKET, SO_KEEPALIVE, two, 2), EINVAL);
    struct timeval snd = { 2, 500000 };
    OK("setsockopt(SO_SNDTIMEO)", setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &snd, sizeof snd));
    len = sizeof tv;
    OK("getsockopt(SO_SNDTIMEO)", getsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, &len));
    CHECK("SO_SNDTIMEO round trip", tv.tv_sec * 1000000 + tv.tv_usec, 2500000);
    ERR("setsockopt(SO_RCVTIMEO) with optlen 4",
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &snd, 4), EINVAL);
    close(s);
    phase();

    int l = tcp_listener(port, 0);
    CHECK("SO_ACCEPTCONN (listening)", get_int(l, SOL_SOCKET, SO_ACCEPTCONN, "SO_ACCEPTCONN"), 1);
    struct timeval rcv = { 0, 200000 };
    OK("setsockopt(listener, SO_RCVTIMEO)", setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof rcv));
    long t0 = mono_ns();
    ERR("accept times out (SO_RCVTIMEO)", accept(l, NULL, NULL), EAGAIN);
    long dt = mono_ns() - t0;
    if (under_cmc)
        CHECK("clock moved by SO_RCVTIMEO on accept (ns)", dt, 200000000L);
    else if (dt < 200000000L)
        fail("accept timed out after %ld ns, before SO_RCVTIMEO", dt);
    phase();

    int a = tcp_connect(port);
    int b = (int)OK("accept", accept(l, NULL, NULL));
    CHECK("SO_ACCEPTCONN (accepted)", get_int(b, SOL_SOCKET, SO_ACCEPTCONN, "SO_ACCEPTCONN"), 0);
    OK("setsockopt(SO_RCVTIMEO)", setsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof rcv));
    len = sizeof tv;
    OK("getsockopt(SO_RCVTIMEO)", getsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &tv, &len));
    CHECK("SO_RCVTIMEO round trip", tv.tv_sec * 1000000 + tv.tv_usec, 200000);
    char buf[8];
    t0 = mono_ns();
    ERR("recv times out (SO_RCVTIMEO)", recv(b, buf, sizeof buf, 0), EAGAIN);
    dt = mono_ns() - t0;
    if (under_cmc)
        CHECK("clock moved by SO_RCVTIMEO on recv (ns)", dt, 200000000L);
    else if (dt < 200000000L)
        fail("recv timed out after %ld ns, before SO_RCVTIMEO", dt);
    CHECK("send after the timeout", send(a, "ok", 2, 0), 2);
    /* Under cmc the timeout may fire before the bytes are delivered, in some
     * interleaving: retry on EAGAIN, as a program with SO_RCVTIMEO must. */
    ssize_t got;
    do got = recv(b, buf, 2, MSG_WAITALL); while (got < 0 && errno == EAGAIN);
    CHECK("recv within SO_RCVTIMEO (retrying after timeouts)", got, 2);
    phase();

    /* SO_LINGER {1, 0}: close sends a reset instead of a FIN */
    lg = (struct linger){ 1, 0 };
    OK("setsockopt(SO_LINGER {1,0})", setsockopt(a, SOL_SOCKET, SO_LINGER, &lg, sizeof lg));
    lg = (struct linger){ 7, 7 };
    len = sizeof lg;
    OK("getsockopt(SO_LINGER)", getsockopt(a, SOL_SOCKET, SO_LINGER, &lg, &len));
    CHECK("SO_LINGER onoff", lg.l_onoff, 1);
    CHECK("SO_LINGER linger", lg.l_linger, 0);
    OK("close with SO_LINGER {1,0}", close(a));
    struct timeval none = { 0, 0 };
    setsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
    ERR("peer of a SO_LINGER {1,0} close", recv(b, buf, sizeof buf, 0), ECONNRESET);
    phase();

    /* binding a port that is taken */
    ERR("bind (SO_REUSEADDR) to a listening port", bind_to(port, 1, 0), EADDRINUSE);
    int x1 = bind_to(port + 1, 0, 0);
    CHECK("first bind without SO_REUSEADDR", x1 >= 0, 1);
    ERR("second bind without SO_REUSEADDR", bind_to(port + 1, 0, 0), EADDRINUSE);
    int y1 = bind_to(port + 2, 1, 0);
    int y2 = bind_to(port + 2, 1, 0);
    CHECK("first bind with SO_REUSEADDR", y1 >= 0, 1);
    CHECK("second bind with SO_REUSEADDR (neither listens)", y2 >= 0, 1);
    if (y1 >= 0 && y2 >= 0) {
        OK("listen on the first", listen(y1, 4));
        ERR("listen on the second", listen(y2, 4), EADDRINUSE);
    }
    int z1 = bind_to(port + 3, 0, 1);
    int z2 = bind_to(port + 3, 0, 1);
    CHECK("first bind with SO_REUSEPORT", z1 >= 0, 1);
    CHECK("second bind with SO_REUSEPORT", z2 >= 0, 1);
    if (z1 >= 0 && z2 >= 0) {
        OK("listen on the first SO_REUSEPORT socket", listen(z1, 4));
        OK("listen on the second SO_REUSEPORT socket", listen(z2, 4));
        OK("close the second SO_REUSEPORT listener", close(z2));
        int c = tcp_connect(port + 3);
        OK("accept on the first SO_REUSEPORT listener", accept(z1, NULL, NULL));
        (void)c;
    }
    finish();
    return 0;
}
