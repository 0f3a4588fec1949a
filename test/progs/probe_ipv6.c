/*
 * probe_ipv6: AF_INET6 streams, dual stack and v4-mapped addresses.
 *
 *   probe_ipv6 PORT         (one node talking to itself; uses PORT..PORT+3)
 *
 * Checks: an AF_INET6 listener on [::1] and a connection to it, with 28-byte
 * AF_INET6 names on both sides; IPV6_V6ONLY is 0 by default and a [::] listener
 * accepts an IPv4 connection, named ::ffff:127.0.0.1; an AF_INET6 socket connects
 * to an IPv4 listener through a v4-mapped address; address families that do not
 * match the socket are EINVAL/EAFNOSUPPORT; with IPV6_V6ONLY set, a [::] listener
 * refuses IPv4 (ECONNREFUSED).
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

static void expect6(int fd, int peer, const char *ip, int port, const char *what)
{
    struct sockaddr_in6 sa;
    memset(&sa, 0, sizeof sa);
    socklen_t len = sizeof sa;
    int r = peer ? getpeername(fd, (struct sockaddr *)&sa, &len)
                 : getsockname(fd, (struct sockaddr *)&sa, &len);
    char got[INET6_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET6, &sa.sin6_addr, got, sizeof got);
    if (r < 0)
        fail("%s: %s", what, en(errno));
    else if (len != sizeof sa || sa.sin6_family != AF_INET6 || strcmp(got, ip) != 0 ||
             (port >= 0 && ntohs(sa.sin6_port) != port))
        fail("%s: got len %u family %d [%s]:%d, expected [%s]:%d", what, (unsigned)len,
             sa.sin6_family, got, ntohs(sa.sin6_port), ip, port);
}

static int listener6(const char *ip, int port, int v6only)
{
    int one = 1, s = (int)OK("socket(AF_INET6)", socket(AF_INET6, SOCK_STREAM, 0));
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (v6only >= 0)
        OK("setsockopt(IPV6_V6ONLY)", setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only));
    struct sockaddr_in6 sa = sin6(ip, port);
    OK("bind(AF_INET6)", bind(s, (struct sockaddr *)&sa, sizeof sa));
    OK("listen(AF_INET6)", listen(s, 4));
    return s;
}

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    int l = listener6("::1", port, -1);
    expect6(l, 0, "::1", port, "getsockname([::1] listener)");
    int c = (int)OK("socket(AF_INET6)", socket(AF_INET6, SOCK_STREAM, 0));
    struct sockaddr_in6 to = sin6("::1", port);
    OK("connect([::1])", connect(c, (struct sockaddr *)&to, sizeof to));
    expect6(c, 1, "::1", port, "getpeername(v6 connector)");
    expect6(c, 0, "::1", -1, "getsockname(v6 connector)");
    struct sockaddr_in6 peer;
    socklen_t len = sizeof peer;
    int a = (int)OK("accept(AF_INET6)", accept(l, (struct sockaddr *)&peer, &len));
    CHECK("accept address length", len, sizeof peer);
    CHECK("accept address family", peer.sin6_family, AF_INET6);
    expect6(a, 0, "::1", port, "getsockname(v6 accepted)");
    expect6(a, 1, "::1", -1, "getpeername(v6 accepted)");
    CHECK("send over IPv6", send(c, "six", 3, 0), 3);
    char buf[8];
    CHECK("recv over IPv6", recv_exact(a, buf, 3), 3);
    MEM("six", buf, 3, "six");
    int dom = -1;
    len = sizeof dom;
    OK("getsockopt(SO_DOMAIN)", getsockopt(l, SOL_SOCKET, SO_DOMAIN, &dom, &len));
    CHECK("SO_DOMAIN of an AF_INET6 socket", dom, AF_INET6);
    phase();

    /* dual stack: an IPv4 client of a [::] listener */
    int d = listener6("::", port + 1, -1);
    int v = -1;
    len = sizeof v;
    OK("getsockopt(IPV6_V6ONLY)", getsockopt(d, IPPROTO_IPV6, IPV6_V6ONLY, &v, &len));
    CHECK("IPV6_V6ONLY default", v, 0);
    int c4 = tcp_connect(port + 1);
    int a4 = (int)OK("accept(v4 client of [::])", accept(d, NULL, NULL));
    expect6(a4, 1, "::ffff:127.0.0.1", -1, "getpeername(v4 client of [::])");
    expect6(a4, 0, "::ffff:127.0.0.1", port + 1, "getsockname(v4 client of [::])");
    CHECK("send from the v4 client", send(c4, "four", 4, 0), 4);
    CHECK("recv on the dual-stack socket", recv_exact(a4, buf, 4), 4);
    MEM("four", buf, 4, "four");
    phase();

    /* an AF_INET6 client of an IPv4 listener, through a v4-mapped address */
    int l4 = tcp_listener(port + 2, 0);
    int m = (int)OK("socket(AF_INET6)", socket(AF_INET6, SOCK_STREAM, 0));
    struct sockaddr_in6 mapped = sin6("::ffff:127.0.0.1", port + 2);
    OK("connect(::ffff:127.0.0.1)", connect(m, (struct sockaddr *)&mapped, sizeof mapped));
    expect6(m, 0, "::ffff:127.0.0.1", -1, "getsockname(v4-mapped connector)");
    struct sockaddr_in p4;
    len = sizeof p4;
    int am = (int)OK("accept(v4 listener)", accept(l4, (struct sockaddr *)&p4, &len));
    CHECK("v4 listener sees an AF_INET peer", p4.sin_family, AF_INET);
    CHECK("v4 listener sees a 16-byte address", len, sizeof p4);
    CHECK("v4 listener sees 127.0.0.1", p4.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
    (void)am;
    phase();

    /* families that do not match the socket */
    int s6 = (int)OK("socket(AF_INET6)", socket(AF_INET6, SOCK_STREAM, 0));
    struct sockaddr_in v4 = sin4("127.0.0.1", port + 3);
    ERR("bind(AF_INET6 socket, sockaddr_in)", bind(s6, (struct sockaddr *)&v4, sizeof v4), EINVAL);
    int s4 = (int)OK("socket(AF_INET)", socket(AF_INET, SOCK_STREAM, 0));
    struct sockaddr_in6 v6 = sin6("::1", port + 3);
    ERR("bind(AF_INET socket, sockaddr_in6)", bind(s4, (struct sockaddr *)&v6, sizeof v6), EAFNOSUPPORT);
    ERR("connect(AF_INET socket, sockaddr_in6)", connect(s4, (struct sockaddr *)&v6, sizeof v6), EAFNOSUPPORT);
    phase();

    /* IPV6_V6ONLY: a [::] listener takes no IPv4 connection */
    int only = listener6("::", port + 3, 1);
    int r4 = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    struct sockaddr_in t4 = sin4("127.0.0.1", port + 3);
    ERR("IPv4 connect to a V6ONLY [::] listener", connect(r4, (struct sockaddr *)&t4, sizeof t4), ECONNREFUSED);
    (void)only;
    finish();
    return 0;
}
