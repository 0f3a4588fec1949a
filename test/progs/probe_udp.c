/*
 * probe_udp: UDP datagrams, unconnected and connected.
 *
 *   probe_udp PORT          (one node talking to itself; uses PORT..PORT+2)
 *
 * cmc may deliver datagrams in any order (as UDP may), so every check holds in any
 * order. Checks: SO_TYPE; sendto/recvfrom keep datagram boundaries and give the
 * sender's address; FIONREAD is the size of the next datagram; a short buffer
 * truncates the datagram and the rest is discarded (recvmsg says MSG_TRUNC, recv
 * with MSG_TRUNC returns the real length); MSG_PEEK; a datagram of 0 bytes; a
 * connected socket sends without an address, knows its peer and receives only from
 * it; send without a destination is EDESTADDRREQ, also after connect(AF_UNSPEC);
 * poll; a connected socket whose datagram found no one gets ECONNREFUSED.
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

static int udp(const char *ip, int port)
{
    int s = (int)OK("socket(SOCK_DGRAM)", socket(AF_INET, SOCK_DGRAM, 0));
    if (port >= 0) {
        struct sockaddr_in sa = sin4(ip, port);
        OK("bind(udp)", bind(s, (struct sockaddr *)&sa, sizeof sa));
    }
    return s;
}

/* receive one datagram (blocking), returning its length and sender's port */
static long take(int s, char *buf, size_t room, int *from_port)
{
    struct sockaddr_in from;
    socklen_t len = sizeof from;
    memset(&from, 0, sizeof from);
    long n = recvfrom(s, buf, room, 0, (struct sockaddr *)&from, &len);
    if (n < 0)
        fail("recvfrom: %s", en(errno));
    else if (len != sizeof from || from.sin_family != AF_INET ||
             from.sin_addr.s_addr != htonl(INADDR_LOOPBACK))
        fail("recvfrom address: len %u family %d", (unsigned)len, from.sin_family);
    if (from_port)
        *from_port = ntohs(from.sin_port);
    return n;
}

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    int u1 = udp("127.0.0.1", port), u2 = udp("127.0.0.1", port + 1);
    int v = -1;
    socklen_t len = sizeof v;
    OK("getsockopt(SO_TYPE)", getsockopt(u1, SOL_SOCKET, SO_TYPE, &v, &len));
    CHECK("SO_TYPE", v, SOCK_DGRAM);
    struct sockaddr_in to1 = sin4("127.0.0.1", port);
    char buf[64];
    ERR("recv(MSG_DONTWAIT) with nothing queued", recv(u1, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
    struct pollfd p = { .fd = u1, .events = POLLIN | POLLOUT };
    CHECK("poll(udp, 0) with nothing queued", poll(&p, 1, 0), 1);
    CHECK("revents: POLLOUT", p.revents, POLLOUT);
    phase();

    CHECK("sendto one", sendto(u2, "one", 3, 0, (struct sockaddr *)&to1, sizeof to1), 3);
    CHECK("sendto two!!", sendto(u2, "two!!", 5, 0, (struct sockaddr *)&to1, sizeof to1), 5);
    int seen_one = 0, seen_two = 0;
    for (int i = 0; i < 2; i++) {
        wait_for(u1, POLLIN);
        int n = -1;
        OK("ioctl(FIONREAD)", ioctl(u1, FIONREAD, &n));
        int from = 0;
        long got = take(u1, buf, sizeof buf, &from);
        CHECK("FIONREAD = the size of the next datagram", n, got);
        CHECK("sender's port", from, port + 1);
        if (got == 3 && memcmp(buf, "one", 3) == 0)
            seen_one++;
        else if (got == 5 && memcmp(buf, "two!!", 5) == 0)
            seen_two++;
        else
            fail("datagram %d: %ld bytes \"%.*s\"", i, got, (int)(got > 0 ? got : 0), buf);
    }
    CHECK("each datagram once: one", seen_one, 1);
    CHECK("each datagram once: two!!", seen_two, 1);
    phase();

    CHECK("sendto truncated!", sendto(u2, "truncated!", 10, 0, (struct sockaddr *)&to1, sizeof to1), 10);
    wait_for(u1, POLLIN);
    CHECK("recv(4) of a 10-byte datagram", recv(u1, buf, 4, 0), 4);
    MEM("truncated", buf, 4, "trun");
    ERR("the rest was discarded", recv(u1, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
    CHECK("sendto peekaboo", sendto(u2, "peekaboo", 8, 0, (struct sockaddr *)&to1, sizeof to1), 8);
    wait_for(u1, POLLIN);
    CHECK("recv(2, MSG_PEEK|MSG_TRUNC) gives the real length", recv(u1, buf, 2, MSG_PEEK | MSG_TRUNC), 8);
    CHECK("recv(64, MSG_PEEK)", recv(u1, buf, sizeof buf, MSG_PEEK), 8);
    char small[3];
    struct iovec iov = { small, sizeof small };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    CHECK("recvmsg(3) of an 8-byte datagram", recvmsg(u1, &mh, 0), 3);
    CHECK("recvmsg says MSG_TRUNC", mh.msg_flags & MSG_TRUNC, MSG_TRUNC);
    MEM("peekaboo", small, 3, "pee");
    CHECK("sendto of 0 bytes", sendto(u2, "", 0, 0, (struct sockaddr *)&to1, sizeof to1), 0);
    wait_for(u1, POLLIN);
    int from = 0;
    CHECK("a datagram of 0 bytes", take(u1, buf, sizeof buf, &from), 0);
    CHECK("its sender", from, port + 1);
    phase();

    /* connected UDP */
    int u3 = udp(NULL, -1);
    ERR("send without a destination", send(u3, "x", 1, 0), EDESTADDRREQ);
    OK("connect(udp)", connect(u3, (struct sockaddr *)&to1, sizeof to1));
    struct sockaddr_in me, peer;
    len = sizeof me;
    OK("getsockname(connected udp)", getsockname(u3, (struct sockaddr *)&me, &len));
    CHECK("connected udp got a port", ntohs(me.sin_port) != 0, 1);
    len = sizeof peer;
    OK("getpeername(connected udp)", getpeername(u3, (struct sockaddr *)&peer, &len));
    CHECK("getpeername(connected udp)", ntohs(peer.sin_port), port);
    CHECK("send on connected udp", send(u3, "conn", 4, 0), 4);
    wait_for(u1, POLLIN);
    CHECK("recvfrom the connected socket", take(u1, buf, sizeof buf, &from), 4);
    CHECK("its address is the connected socket's name", from, ntohs(me.sin_port));
    /* u3 takes datagrams from its peer u1 only: u2's is dropped */
    CHECK("sendto u3 from a stranger", sendto(u2, "stranger", 8, 0, (struct sockaddr *)&me, sizeof me), 8);
    CHECK("sendto u3 from its peer", sendto(u1, "peer", 4, 0, (struct sockaddr *)&me, sizeof me), 4);
    CHECK("connected udp receives from its peer only", recv(u3, buf, sizeof buf, 0), 4);
    MEM("peer", buf, 4, "peer");
    struct sockaddr unspec = { .sa_family = AF_UNSPEC };
    OK("connect(AF_UNSPEC)", connect(u3, &unspec, sizeof unspec));
    ERR("send after connect(AF_UNSPEC)", send(u3, "x", 1, 0), EDESTADDRREQ);
    phase();

    /* a connected socket whose datagram found no one: ECONNREFUSED (ICMP) */
    int u4 = udp(NULL, -1);
    struct sockaddr_in nobody = sin4("127.0.0.1", port + 2);
    OK("connect(udp) to a port nobody bound", connect(u4, (struct sockaddr *)&nobody, sizeof nobody));
    CHECK("send to nobody", send(u4, "lost", 4, 0), 4);
    ERR("recv after sending to nobody", recv(u4, buf, sizeof buf, 0), ECONNREFUSED);
    finish();
    return 0;
}
