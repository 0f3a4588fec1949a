/*
 * leaseread: leader leases for local reads, and a leader that must wait out the lease
 * of the one before it.
 *
 *     leaseread INDEX ADDR0 ADDR1 ADDR2
 *     e.g.  leaseread 1 127.0.0.1:7300 127.0.0.1:7301 127.0.0.1:7302
 *
 * Three nodes; leadership goes round once: node 0 leads first, then node 1, then node 2
 * (three terms, two handovers). A leader starts its term with a write (it bumps the value
 * v) and serves reads of v from its memory, with no round trip, while it holds a lease.
 * It gets the lease from its successor (node i+1 mod 3): it sends "HB v", the successor
 * answers "ACK" and promises not to lead for LEASE_MS from when it received the HB. The
 * leader counts its lease from when it SENT that HB, by its own clock, and stops serving
 * MARGIN_MS before the lease ends (room for clocks that drift). It renews the lease once
 * (another HB, RENEW_MS after the first), then lets it run out: that is the handover.
 * The successor takes over when LEASE_MS have passed, by its own clock, since the last HB
 * it received; it then writes v+1 and gets its own lease from the next node. A node ACKs
 * only an HB whose v is at least its own, and is not leading: a lease goes to the newest
 * leader only. It answers "NO" to any other (a node 0 that restarted and believes it is
 * the first leader again), and that leader gives its term up. Nothing is kept on disk.
 *
 * The argument: the HB was received no earlier than it was sent, so the successor's wait
 * (received + LEASE_MS) ends after the leader's lease (sent + LEASE_MS - MARGIN_MS)
 * whatever the network's delay -- as long as both clocks run at the same rate. Timing is
 * the protocol: no message tells the successor that the old leader has stopped.
 *
 * It is written the way such a program ships: blocking sockets, poll with timeouts, the
 * clock through libc, no threads. It reports its state for a model checker on fd 3 (one
 * JSON line per change), which costs nothing outside one.
 *
 * -DBUG plants a defect: the successor waits only LEASE_MS / 2 after the last HB before
 * it takes over, while the old leader's lease still runs: the new leader writes v+1
 * while the old one still serves v (a stale read), and soon both serve.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define STATE_FD  3       /* in-memory state, one JSON line per change */
#define NODES     3
#define LEASE_MS  1000    /* how long a lease lasts, from the HB that asked for it */
#define MARGIN_MS 100     /* a leader stops serving this much before its lease ends */
#define RENEW_MS  400     /* a leader renews its lease this long after asking for it */
#define RENEWS    1       /* renewals in a term; then the lease runs out (the handover) */
#ifdef BUG
#define WAIT_MS   (LEASE_MS / 2)  /* BUG: the successor does not wait out the lease */
#else
#define WAIT_MS   LEASE_MS        /* the successor waits out the lease it promised */
#endif
#define LINE_LEN  64

struct conn { int fd; size_t len; char buf[LINE_LEN]; };

static int self;
static struct sockaddr_in addrs[NODES];
static struct conn pred = { .fd = -1 }, succ = { .fd = -1 };   /* from i-1, to i+1 */
static enum { FOLLOWER, LEADER, RETIRED } role = FOLLOWER;
static const char *role_names[] = { "follower", "leader", "retired" };
static int serving, v, renews, pending, waiting;
static long long heard, sent_at, lease_end, next_renew;   /* ms, by our clock */

static void die(const char *what)
{
    fprintf(stderr, "leaseread %d: %s: %s\n", self, what, strerror(errno));
    exit(1);
}

static long long now_ms(void)
{
    struct timespec t;
    if (clock_gettime(CLOCK_MONOTONIC, &t) < 0)
        die("clock_gettime");
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Our state, when it changed: everything that decides what we do next but the times. */
static void emit(void)
{
    static char last[160];
    char line[160];
    snprintf(line, sizeof line, "{\"pending\":%s,\"renews\":%d,\"role\":\"%s\",\"serving\":%s,"
             "\"v\":%d,\"waiting\":%s}\n", pending ? "true" : "false", renews,
             role_names[role], serving ? "true" : "false", v, waiting ? "true" : "false");
    if (strcmp(line, last) == 0)
        return;
    strcpy(last, line);
    if (write(STATE_FD, line, strlen(line)) < 0)
        return;                   /* a lost state line must not stop the node */
}

/* A peer is gone (it crashed): without a successor a leader cannot renew its lease. */
static void lost(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    *c = (struct conn){ .fd = -1 };
    if (c == &succ)
        pending = renews = 0;
}

static void send_line(struct conn *c, const char *line)
{
    if (c->fd < 0 || send(c->fd, line, strlen(line), MSG_NOSIGNAL) != (ssize_t)strlen(line))
        lost(c);
}

/* One line from c, or 0 when none is complete; -1 when the peer is gone. */
static int take_line(struct conn *c, char *out, int fill)
{
    if (fill) {
        ssize_t n = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
        if (n <= 0)
            return -1;
        c->len += (size_t)n;
    }
    char *nl = memchr(c->buf, '\n', c->len);
    if (!nl)
        return 0;
    size_t n = (size_t)(nl - c->buf);
    memcpy(out, c->buf, n);
    out[n] = '\0';
    memmove(c->buf, nl + 1, c->len - n - 1);
    c->len -= n + 1;
    return 1;
}

static void heartbeat(long long now)
{
    char line[32];
    snprintf(line, sizeof line, "HB %d\n", v);
    sent_at = now;
    pending = 1;
    send_line(&succ, line);
}

/* Our term begins: a write, then a lease from our successor before we serve. */
static void lead(long long now)
{
    role = LEADER;
    waiting = 0;
    v++;
    renews = RENEWS;
    printf("node %d: leader, v=%d\n", self, v);
    emit();
    succ.fd = socket(AF_INET, SOCK_STREAM, 0);
    const struct sockaddr_in *to = &addrs[(self + 1) % NODES];
    if (succ.fd < 0)
        die("socket");
    if (connect(succ.fd, (const struct sockaddr *)to, sizeof *to) < 0)
        lost(&succ);
    heartbeat(now);
}

static void on_line(int from_pred, const char *line, long long now)
{
    int hv;
    if (from_pred && sscanf(line, "HB %d", &hv) == 1) {
        if (hv < v || role == LEADER) {  /* an older leader (one that restarted) */
            send_line(&pred, "NO\n");
            return;
        }
        v = hv;                       /* the leader's value: we could serve it next */
        if (role == FOLLOWER) {       /* we lead next: not before LEASE_MS from now */
            heard = now;
            waiting = 1;
        }
        send_line(&pred, "ACK\n");
    } else if (!from_pred && pending && strcmp(line, "ACK") == 0) {
        pending = 0;
        lease_end = sent_at + LEASE_MS - MARGIN_MS;
        next_renew = sent_at + RENEW_MS;
        serving = now < lease_end;
    } else if (!from_pred && strcmp(line, "NO") == 0) {
        pending = renews = 0;         /* our term is over before it began */
    }
}

int main(int argc, char **argv)
{
    if (argc != 2 + NODES) {
        fprintf(stderr, "usage: leaseread INDEX ADDR0 ADDR1 ADDR2\n");
        return 2;
    }
    self = atoi(argv[1]);
    for (int i = 0; i < NODES; i++) {
        char host[64];
        unsigned short port;
        addrs[i] = (struct sockaddr_in){ .sin_family = AF_INET };
        if (sscanf(argv[2 + i], "%63[^:]:%hu", host, &port) != 2 ||
            inet_pton(AF_INET, host, &addrs[i].sin_addr) != 1) {
            fprintf(stderr, "bad address %s (want IP:PORT)\n", argv[2 + i]);
            return 2;
        }
        addrs[i].sin_port = htons(port);
    }
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (fcntl(STATE_FD, F_GETFD) < 0 && open("/dev/null", O_WRONLY) != STATE_FD)
        die("open /dev/null as fd 3");

    int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(lfd, (const struct sockaddr *)&addrs[self], sizeof addrs[self]) < 0 ||
        listen(lfd, 4) < 0)
        die("listen");
    emit();
    long long now = now_ms();
    if (self == 0)
        lead(now);
    for (;;) {
        /* The timers: the lease's end, its renewal, the wait before we take over. */
        if (role == LEADER && serving && now >= lease_end)
            serving = 0;
        if (role == LEADER && !pending && renews > 0 && now >= next_renew) {
            renews--;
            heartbeat(now);
        }
        if (role == LEADER && !serving && !pending && renews == 0)
            role = RETIRED;
        if (role == FOLLOWER && waiting && now >= heard + WAIT_MS)
            lead(now);
        emit();

        long long due = -1;             /* the next timer, if any */
        if (role == LEADER && serving)
            due = lease_end;
        if (role == LEADER && !pending && renews > 0 && (due < 0 || next_renew < due))
            due = next_renew;
        if (role == FOLLOWER && waiting)
            due = heard + WAIT_MS;
        struct pollfd pfd[3] = { { .fd = lfd, .events = POLLIN },
                                 { .fd = pred.fd, .events = POLLIN },
                                 { .fd = succ.fd, .events = POLLIN } };
        if (poll(pfd, 3, due < 0 ? -1 : (int)(due > now ? due - now : 0)) < 0 && errno != EINTR)
            die("poll");
        now = now_ms();                 /* once a round: the clock a message came at */
        if (pfd[0].revents & POLLIN) {
            int fd = accept(lfd, NULL, NULL);
            if (fd >= 0) {              /* our predecessor, or its next incarnation */
                lost(&pred);
                pred = (struct conn){ .fd = fd };
            }
        }
        for (int k = 1; k <= 2; k++) {
            struct conn *c = k == 1 ? &pred : &succ;
            if (c->fd < 0 || pfd[k].revents == 0)
                continue;
            char line[LINE_LEN];
            int got = take_line(c, line, 1);
            while (got > 0) {
                on_line(k == 1, line, now);
                got = take_line(c, line, 0);
            }
            if (got < 0)
                lost(c);
        }
    }
}
