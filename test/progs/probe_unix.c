/*
 * probe_unix: what stays native -- AF_UNIX sockets, pipes, files in the node's
 * working directory, and the state descriptors 3 and 193.
 *
 *   probe_unix              (one node)
 *
 * Checks: the working directory starts empty; files can be created, written,
 * fsync'd, read back, renamed, listed and removed there; socketpair(AF_UNIX) carries
 * bytes both ways, with poll and shutdown; a named AF_UNIX socket in the working
 * directory accepts a connection; socketpair(AF_INET) is EOPNOTSUPP; a pipe carries
 * bytes and reports POLLHUP once its writer is closed; fds 3 and 193 are real
 * write-only descriptors (fstat, fcntl, lseek work); the durable line on fd 193.
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

#include <dirent.h>
#include <sys/un.h>

static int entries(void)
{
    DIR *d = opendir(".");
    int n = 0;
    struct dirent *e;
    if (!d) {
        fail("opendir(.): %s", en(errno));
        return -1;
    }
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

int main(void)
{
    p_init();
    CHECK("the working directory starts empty", entries(), 0);
    int f = (int)OK("open(file, O_CREAT)", open("file", O_CREAT | O_WRONLY | O_TRUNC, 0644));
    CHECK("write a file", write(f, "persist\n", 8), 8);
    OK("fsync a file", fsync(f));
    OK("close a file", close(f));
    OK("rename", rename("file", "file2"));
    OK("mkdir", mkdir("sub", 0755));
    CHECK("two entries", entries(), 2);
    char buf[64];
    f = (int)OK("open(file2)", open("file2", O_RDONLY));
    CHECK("read the file back", read(f, buf, sizeof buf), 8);
    MEM("file contents", buf, 8, "persist\n");
    CHECK("lseek on a file", lseek(f, 2, SEEK_SET), 2);
    CHECK("read after lseek", read(f, buf, 3), 3);
    MEM("file contents after lseek", buf, 3, "rsi");
    close(f);
    OK("unlink", unlink("file2"));
    OK("rmdir", rmdir("sub"));
    CHECK("empty again", entries(), 0);
    phase();

    int sv[2];
    OK("socketpair(AF_UNIX)", socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    CHECK("socketpair: a real descriptor (< 500)", sv[0] < 500 && sv[1] < 500, 1);
    CHECK("send on a socketpair", send(sv[0], "unix", 4, 0), 4);
    struct pollfd p = { .fd = sv[1], .events = POLLIN };
    CHECK("poll on a socketpair", poll(&p, 1, -1), 1);
    CHECK("recv on a socketpair", recv(sv[1], buf, sizeof buf, 0), 4);
    MEM("unix", buf, 4, "unix");
    CHECK("and back", write(sv[1], "back", 4), 4);
    CHECK("read back", read(sv[0], buf, sizeof buf), 4);
    OK("shutdown(SHUT_WR) on a socketpair", shutdown(sv[0], SHUT_WR));
    CHECK("EOF on a socketpair", recv(sv[1], buf, sizeof buf, 0), 0);
    ERR("socketpair(AF_INET)", socketpair(AF_INET, SOCK_STREAM, 0, sv), EOPNOTSUPP);
    phase();

    struct sockaddr_un un = { .sun_family = AF_UNIX };
    strcpy(un.sun_path, "sock");
    int l = (int)OK("socket(AF_UNIX)", socket(AF_UNIX, SOCK_STREAM, 0));
    OK("bind(AF_UNIX, \"sock\")", bind(l, (struct sockaddr *)&un, sizeof un));
    OK("listen(AF_UNIX)", listen(l, 2));
    struct stat st;
    OK("stat(sock)", stat("sock", &st));
    CHECK("the named socket is in the working directory", S_ISSOCK(st.st_mode), 1);
    int c = (int)OK("socket(AF_UNIX)", socket(AF_UNIX, SOCK_STREAM, 0));
    OK("connect(AF_UNIX)", connect(c, (struct sockaddr *)&un, sizeof un));
    int a = (int)OK("accept(AF_UNIX)", accept(l, NULL, NULL));
    CHECK("send(AF_UNIX)", send(c, "named", 5, 0), 5);
    CHECK("recv(AF_UNIX)", recv(a, buf, sizeof buf, 0), 5);
    MEM("named", buf, 5, "named");
    close(a);
    close(c);
    close(l);
    unlink("sock");
    phase();

    int pp[2];
    OK("pipe", pipe(pp));
    CHECK("write a pipe", write(pp[1], "pipe", 4), 4);
    CHECK("read a pipe", read(pp[0], buf, sizeof buf), 4);
    close(pp[1]);
    p = (struct pollfd){ .fd = pp[0], .events = POLLIN };
    CHECK("poll on a pipe whose writer is closed", poll(&p, 1, 0), 1);
    CHECK("revents: POLLHUP", p.revents, POLLHUP);
    CHECK("read at the end of a pipe", read(pp[0], buf, sizeof buf), 0);
    close(pp[0]);
    phase();

    OK("fstat(3)", fstat(3, &st));
    OK("fstat(193)", fstat(193, &st));
    CHECK("fd 3 is write-only", fcntl(3, F_GETFL) & O_ACCMODE, O_WRONLY);
    CHECK("fd 193 is write-only", fcntl(193, F_GETFL) & O_ACCMODE, O_WRONLY);
    if (lseek(3, 0, SEEK_CUR) < 0 && errno != ESPIPE)
        fail("lseek(3): %s", en(errno));
    const char *d = "{\"durable\":1}\n";
    CHECK("write fd 193", write(193, d, strlen(d)), (long)strlen(d));
    finish();
    return 0;
}
