/*
 * probe_fcntl: fcntl, ioctl(FIONBIO/FIONREAD), fstat, and the dup family.
 *
 *   probe_fcntl PORT        (one node talking to itself)
 *
 * Checks: F_GETFL is O_RDWR (plus O_NONBLOCK once set, by F_SETFL or FIONBIO, and
 * shared by every duplicate); F_GETFD/F_SETFD; FIONREAD counts buffered bytes and
 * is EINVAL on a listener; fstat says S_IFSOCK, duplicates share an inode and two
 * sockets do not; dup/dup2/dup3/F_DUPFD/F_DUPFD_CLOEXEC: numbers, close-on-exec,
 * dup3 onto itself is EINVAL, dup2 onto itself returns it, dup2 onto an open socket
 * closes that one; a socket lives until its last descriptor is closed (the peer
 * sees EOF only then); a closed descriptor is EBADF.
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

#include <linux/sockios.h>

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    int s = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    CHECK("F_GETFL", fcntl(s, F_GETFL), O_RDWR);
    CHECK("F_GETFD", fcntl(s, F_GETFD), 0);
    OK("F_SETFD(FD_CLOEXEC)", fcntl(s, F_SETFD, FD_CLOEXEC));
    CHECK("F_GETFD after F_SETFD", fcntl(s, F_GETFD), FD_CLOEXEC);
    OK("F_SETFD(0)", fcntl(s, F_SETFD, 0));
    CHECK("F_GETFD after F_SETFD(0)", fcntl(s, F_GETFD), 0);
    int on = 1, off = 0;
    OK("ioctl(FIONBIO, 1)", ioctl(s, FIONBIO, &on));
    CHECK("F_GETFL after FIONBIO 1", fcntl(s, F_GETFL), O_RDWR | O_NONBLOCK);
    OK("ioctl(FIONBIO, 0)", ioctl(s, FIONBIO, &off));
    CHECK("F_GETFL after FIONBIO 0", fcntl(s, F_GETFL), O_RDWR);
    int sc = (int)OK("socket(SOCK_CLOEXEC|SOCK_NONBLOCK)",
                     socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    CHECK("F_GETFD of a SOCK_CLOEXEC socket", fcntl(sc, F_GETFD), FD_CLOEXEC);
    CHECK("F_GETFL of a SOCK_NONBLOCK socket", fcntl(sc, F_GETFL), O_RDWR | O_NONBLOCK);
    struct stat st, st2;
    OK("fstat", fstat(s, &st));
    CHECK("fstat: S_ISSOCK", S_ISSOCK(st.st_mode), 1);
    OK("fstat", fstat(sc, &st2));
    if (st.st_ino == st2.st_ino)
        fail("two sockets share st_ino %lu", (unsigned long)st.st_ino);
    close(sc);
    phase();

    int l = tcp_listener(port, 0);
    int n = -1;
    ERR("FIONREAD on a listener", ioctl(l, FIONREAD, &n), EINVAL);
    int a = tcp_connect(port);
    int b = (int)OK("accept", accept(l, NULL, NULL));
    CHECK("send 7 bytes", send(a, "1234567", 7, 0), 7);
    CHECK("poll for them", wait_for(b, POLLIN), POLLIN);
    OK("FIONREAD", ioctl(b, FIONREAD, &n));
    CHECK("FIONREAD", n, 7);
    char buf[16];
    CHECK("recv 3", recv(b, buf, 3, 0), 3);
    OK("SIOCINQ", ioctl(b, SIOCINQ, &n));
    CHECK("SIOCINQ after reading 3", n, 4);
    CHECK("recv the rest", recv_exact(b, buf, 4), 4);
    phase();

    int d = (int)OK("dup", dup(a));
    if (d == a)
        fail("dup returned the same number");
    OK("fstat(dup)", fstat(d, &st2));
    OK("fstat", fstat(a, &st));
    CHECK("a dup shares the inode", st.st_ino == st2.st_ino, 1);
    OK("F_SETFD(FD_CLOEXEC) on the original", fcntl(a, F_SETFD, FD_CLOEXEC));
    CHECK("close-on-exec is per descriptor", fcntl(d, F_GETFD), 0);
    OK("F_SETFL(O_NONBLOCK) on the dup", fcntl(d, F_SETFL, O_NONBLOCK));
    CHECK("O_NONBLOCK is shared with the original", fcntl(a, F_GETFL), O_RDWR | O_NONBLOCK);
    OK("F_SETFL(0) on the dup", fcntl(d, F_SETFL, 0));
    int d2 = (int)OK("dup2", dup2(a, a + 100));
    CHECK("dup2 returns the new number", d2, a + 100);
    CHECK("dup2 clears close-on-exec", fcntl(d2, F_GETFD), 0);
    CHECK("dup2 onto itself", dup2(a, a), a);
    ERR("dup3 onto itself", dup3(a, a, 0), EINVAL);
    ERR("dup3 with a bad flag", dup3(a, a + 101, 1), EINVAL);
    int d3 = (int)OK("dup3(O_CLOEXEC)", dup3(a, a + 101, O_CLOEXEC));
    CHECK("dup3 returns the new number", d3, a + 101);
    CHECK("dup3(O_CLOEXEC) sets close-on-exec", fcntl(d3, F_GETFD), FD_CLOEXEC);
    int d4 = (int)OK("F_DUPFD", fcntl(a, F_DUPFD, a + 50));
    if (d4 < a + 50)
        fail("F_DUPFD(%d) gave %d", a + 50, d4);
    CHECK("F_DUPFD clears close-on-exec", fcntl(d4, F_GETFD), 0);
    int d5 = (int)OK("F_DUPFD_CLOEXEC", fcntl(a, F_DUPFD_CLOEXEC, a + 50));
    if (d5 < a + 50 || d5 == d4)
        fail("F_DUPFD_CLOEXEC(%d) gave %d", a + 50, d5);
    CHECK("F_DUPFD_CLOEXEC sets close-on-exec", fcntl(d5, F_GETFD), FD_CLOEXEC);
    phase();

    /* the socket lives until its last descriptor goes */
    OK("close the original", close(a));
    ERR("close it twice", close(a), EBADF);
    ERR("recv on a closed descriptor", recv(a, buf, 1, MSG_DONTWAIT), EBADF);
    ERR("fcntl on a closed descriptor", fcntl(a, F_GETFL), EBADF);
    ERR("fstat on a closed descriptor", fstat(a, &st), EBADF);
    OK("close(dup2)", close(d2));
    OK("close(dup3)", close(d3));
    OK("close(F_DUPFD)", close(d4));
    OK("close(F_DUPFD_CLOEXEC)", close(d5));
    CHECK("send through the last duplicate", send(d, "via", 3, 0), 3);
    CHECK("the peer reads it", recv_exact(b, buf, 3), 3);
    MEM("via", buf, 3, "via");
    /* dup2 onto a descriptor that holds another socket closes that socket: the
     * last descriptor of a goes, and its peer b reads EOF */
    int other = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    CHECK("dup2 onto the last descriptor of a", dup2(other, d), d);
    CHECK("the peer reads EOF once the last descriptor went", recv(b, buf, sizeof buf, 0), 0);
    CHECK("the moved descriptor is the other socket", fcntl(d, F_GETFL), O_RDWR);
    finish();
    return 0;
}
