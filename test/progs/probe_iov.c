/*
 * probe_iov: readv/writev, sendmsg/recvmsg, sendto on a connected stream.
 *
 *   probe_iov PORT          (one node talking to itself)
 *
 * Checks: writev gathers its iovecs into one send (an empty iovec included) and
 * readv scatters what it reads; sendmsg/recvmsg with several iovecs; recvmsg on a
 * stream sets msg_namelen, msg_controllen and msg_flags to 0; a stream ignores the
 * address given to sendto/sendmsg; a send of 0 bytes returns 0 and so does a read
 * of 0 bytes once data is buffered (with none, it waits: MSG_DONTWAIT gives EAGAIN); more than
 * IOV_MAX iovecs is EINVAL; a bad buffer is EFAULT.
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

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    int l = tcp_listener(port, 0);
    int a = tcp_connect(port);
    int b = (int)OK("accept", accept(l, NULL, NULL));
    phase();

    struct iovec wv[3] = { { "ab", 2 }, { "", 0 }, { "cdef", 4 } };
    CHECK("writev 3 iovecs", writev(a, wv, 3), 6);
    char x[4] = "....", y[10] = "..........";
    struct iovec rv[2] = { { x, 3 }, { y, 10 } };
    size_t got = 0;
    while (got < 6) {              /* readv may return part: scatter the rest */
        struct iovec part[2];
        int n = 0;
        if (got < 3)
            part[n++] = (struct iovec){ x + got, 3 - got };
        part[n++] = (struct iovec){ y + (got > 3 ? got - 3 : 0), 10 - (got > 3 ? got - 3 : 0) };
        ssize_t r = readv(b, part, n);
        if (r <= 0) {
            fail("readv: %zd (%s)", r, en(errno));
            break;
        }
        got += (size_t)r;
    }
    (void)rv;
    MEM("readv first iovec", x, 3, "abc");
    MEM("readv second iovec", y, 3, "def");
    CHECK("readv leaves the rest of the second iovec", y[3], '.');
    phase();

    struct iovec mv[2] = { { "hello ", 6 }, { "world", 5 } };
    struct msghdr mh = { .msg_iov = mv, .msg_iovlen = 2 };
    CHECK("sendmsg 2 iovecs", sendmsg(a, &mh, 0), 11);
    char p1[4], p2[4], p3[20];
    struct iovec rmv[3] = { { p1, 4 }, { p2, 4 }, { p3, 20 } };
    struct sockaddr_in name;
    char control[64];
    struct msghdr rh = { .msg_name = &name, .msg_namelen = sizeof name, .msg_iov = rmv,
                         .msg_iovlen = 3, .msg_control = control,
                         .msg_controllen = sizeof control, .msg_flags = 0x7 };
    CHECK("poll for the sendmsg bytes", wait_for(b, POLLIN), POLLIN);
    CHECK("recvmsg 3 iovecs", recvmsg(b, &rh, 0), 11);
    MEM("recvmsg iovec 1", p1, 4, "hell");
    MEM("recvmsg iovec 2", p2, 4, "o wo");
    MEM("recvmsg iovec 3", p3, 3, "rld");
    CHECK("recvmsg msg_namelen on a stream", rh.msg_namelen, 0);
    CHECK("recvmsg msg_controllen", rh.msg_controllen, 0);
    CHECK("recvmsg msg_flags", rh.msg_flags, 0);
    phase();

    /* A connected stream ignores the address of sendto and sendmsg. */
    struct sockaddr_in elsewhere = sin4("127.0.0.1", 9);
    long r1 = sendto(a, "to", 2, 0, (struct sockaddr *)&elsewhere, sizeof elsewhere);
    CHECK("sendto with an address on a connected stream", r1, 2);
    struct iovec one = { "msg", 3 };
    struct msghdr nh = { .msg_name = &elsewhere, .msg_namelen = sizeof elsewhere,
                         .msg_iov = &one, .msg_iovlen = 1 };
    long r2 = sendmsg(a, &nh, 0);
    CHECK("sendmsg with an address on a connected stream", r2, 3);
    char buf[16];
    size_t sent = (size_t)(r1 > 0 ? r1 : 0) + (size_t)(r2 > 0 ? r2 : 0);
    CHECK("recv what sendto and sendmsg sent", recv_exact(b, buf, sent), 5);
    MEM("sendto+sendmsg bytes", buf, 5, "tomsg");
    phase();

    CHECK("send of 0 bytes", send(a, "", 0, 0), 0);
    /* Linux: a read of 0 bytes waits for data like any read (the target is 1 byte) */
    ERR("recv(0 bytes, MSG_DONTWAIT) with nothing buffered", recv(b, buf, 0, MSG_DONTWAIT), EAGAIN);
    CHECK("writev of 0 iovecs", writev(a, wv, 0), 0);
    static struct iovec many[1025];
    for (int i = 0; i < 1025; i++)
        many[i] = (struct iovec){ "z", 1 };
    ERR("writev of 1025 iovecs (over IOV_MAX)", writev(a, many, 1025), EINVAL);
    ERR("send from a bad buffer", send(a, (void *)16, 4, 0), EFAULT);
    CHECK("send after the errors", send(a, "end", 3, 0), 3);
    CHECK("poll for end", wait_for(b, POLLIN), POLLIN);
    CHECK("recv of 0 bytes with data buffered", recv(b, buf, 0, 0), 0);
    struct iovec none = { buf, 0 };
    CHECK("readv of 0 bytes with data buffered", readv(b, &none, 1), 0);
    CHECK("recv end", recv_exact(b, buf, 3), 3);
    MEM("end", buf, 3, "end");
    finish();
    return 0;
}
