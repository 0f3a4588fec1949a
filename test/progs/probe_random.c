/*
 * probe_random: getrandom per (node, incarnation), CMC_INCARNATION, and a working
 * directory that survives a crash; the clock continues across the crash.
 *
 *   probe_random PORT       (the model runs two of them, with budget crash 1)
 *
 * Each incarnation draws 16 bytes twice (they differ), appends the first draw and
 * its clock to the file "draws" in its working directory, and reports them. Under
 * cmc the incarnation number in CMC_INCARNATION is the number of lines already in
 * "draws" (the directory is kept across a crash), no earlier draw repeats, and the
 * clock has not gone back. It sleeps 1 s (a FIRE) between the draws so that a crash
 * can come before or after it. getrandom's bytes go into the state: if they were not
 * a function of (node, incarnation), replaying a world would give another state and
 * cmc would report nondeterminism. AT_RANDOM (the auxv bytes) too.
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

#include <sys/auxv.h>
#include <sys/random.h>

static void hex(char *out, const unsigned char *b, int n)
{
    for (int i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int inc = under_cmc ? atoi(getenv("CMC_INCARNATION") ? getenv("CMC_INCARNATION") : "-1") : 0;
    unsigned char r1[16], r2[16];
    CHECK("getrandom(16)", getrandom(r1, sizeof r1, 0), 16);
    CHECK("getrandom(16, GRND_NONBLOCK)", getrandom(r2, sizeof r2, GRND_NONBLOCK), 16);
    if (memcmp(r1, r2, 16) == 0)
        fail("two draws gave the same bytes");
    char h1[33], h2[33], ha[33] = "";
    hex(h1, r1, 16);
    hex(h2, r2, 16);
    const unsigned char *at = (const unsigned char *)getauxval(AT_RANDOM);
    if (at)
        hex(ha, at, 16);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);

    FILE *f = fopen("draws", "r");
    int lines = 0;
    char line[128];
    while (f && fgets(line, sizeof line, f)) {
        char seen[40];
        long long at_ns = 0;
        if (sscanf(line, "%39s %lld", seen, &at_ns) == 2) {
            if (strcmp(seen, h1) == 0)
                fail("incarnation %d drew the bytes of an earlier one", inc);
            if (now.tv_sec * 1000000000LL + now.tv_nsec < at_ns)
                fail("the clock went back across a crash");
        }
        if (strncmp(line, "slept ", 6) != 0)
            lines++;
    }
    if (f)
        fclose(f);
    CHECK("CMC_INCARNATION = earlier incarnations in this working directory", inc, lines);
    f = fopen("draws", "a");
    if (!f)
        fail("cannot append to draws: %s", en(errno));
    else {
        fprintf(f, "%s %lld\n", h1, (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
        fclose(f);
    }
    char state[512];
    int n = snprintf(state, sizeof state,
                     "{\"phase\":1,\"done\":false,\"fail\":[%s],\"inc\":%d,\"r\":\"%s\",\"r2\":\"%s\","
                     "\"at\":\"%s\"}\n", p_fail, inc, h1, h2, ha);
    if (write(3, state, (size_t)n) != n)
        perror("write fd 3");
    sleep(1);
    clock_gettime(CLOCK_REALTIME, &now);
    f = fopen("draws", "a");
    if (f) {
        fprintf(f, "slept %lld\n", (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
        fclose(f);
    }
    n = snprintf(state, sizeof state,
                 "{\"phase\":2,\"done\":true,\"fail\":[%s],\"inc\":%d,\"r\":\"%s\",\"r2\":\"%s\","
                 "\"at\":\"%s\"}\n", p_fail, inc, h1, h2, ha);
    if (write(3, state, (size_t)n) != n)
        perror("write fd 3");
    if (under_cmc) {             /* stay alive (a crash needs a live node) */
        int l = tcp_listener(atoi(argv[1]), 0);
        for (;;)
            accept(l, NULL, NULL);
    }
    return 0;
}
