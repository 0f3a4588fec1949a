/*
 * lease: a lock server that hands out time-limited leases, and two workers that each
 * want to be the leader once.
 *
 *     lease INDEX SERVER_ADDR
 *     e.g.  lease 0 127.0.0.1:7200       (0: the lock server, 1 and 2: the workers)
 *
 * A worker connects to the server and sends "ACQUIRE <id>". The server grants the
 * lease to one worker at a time ("GRANT <ms>") and queues the others. The holder is
 * the leader until its lease runs out by its own clock, read through libc
 * (clock_gettime(CLOCK_MONOTONIC)), counted from the moment it asked: then it steps
 * down and sends "RELEASE". The server keeps its own lease timer; when it runs out
 * first, the server sends "REVOKE" to the holder, which steps down and sends
 * "RELEASE". Only a RELEASE (or the holder's connection breaking) frees the lease for
 * the next worker: an expired timer on the server says nothing about what the
 * holder, on another machine with another clock, believes right now.
 *
 * It is written the way such a program ships: blocking sockets, poll with timeouts,
 * the clock through libc, no threads. It reports its state for a model checker on
 * fd 3 (one JSON line per change), which costs nothing outside one.
 *
 * -DBUG plants a defect: the server treats its own lease timer as the end of the
 * lease. When it fires, it revokes the holder but grants the lease to the next worker
 * at once, without waiting for the RELEASE. If the server's timer fires before the
 * holder's (a clock that runs faster, a holder paused by the scheduler or a GC), two
 * workers are leader at once. Without a timeout firing the bug cannot be seen.
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

#define STATE_FD    3       /* in-memory state, one JSON line per change */
#define LEASE_MS    1000    /* how long a grant lasts */
#define MARGIN_MS   100     /* a holder steps down this much before its lease ends */
#define MAX_PEERS   8
#define LINE_LEN    64

static const char *role = "lease";

static void die(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", role, what, strerror(errno));
    exit(1);
}

static long long now_ms(void)
{
    struct timespec t;
    if (clock_gettime(CLOCK_MONOTONIC, &t) < 0)
        die("clock_gettime");
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void emit(const char *line)
{
    size_t len = strlen(line);
    if (write(STATE_FD, line, len) != (ssize_t)len)
        return;                   /* a lost state line must not stop the node */
}

static void ensure_open(int fd)
{
    if (fcntl(fd, F_GETFD) >= 0)
        return;
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0 && null != fd) {
        dup2(null, fd);
        close(null);
    }
}

static void parse_addr(const char *s, struct sockaddr_in *sa)
{
    char host[64];
    unsigned short port;
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    if (sscanf(s, "%63[^:]:%hu", host, &port) != 2 ||
        inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
        fprintf(stderr, "bad address %s (want IP:PORT)\n", s);
        exit(2);
    }
    sa->sin_port = htons(port);
}

static int send_line(int fd, const char *line)
{
    size_t len = strlen(line);
    while (len > 0) {
        ssize_t n = send(fd, line, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        line += n;
        len -= (size_t)n;
    }
    return 0;
}

/* A connection and the bytes received on it that do not yet make a full line. */
struct conn { int fd; size_t len; char buf[LINE_LEN]; int id; };

/* One recv into c's buffer: > 0 bytes read, 0 at EOF, < 0 on error or a too-long line. */
static ssize_t fill(struct conn *c)
{
    if (c->len == sizeof c->buf)
        return -1;
    ssize_t n = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
    if (n > 0)
        c->len += (size_t)n;
    return n;
}

static int take_line(struct conn *c, char *out, size_t cap)
{
    char *nl = memchr(c->buf, '\n', c->len);
    if (!nl)
        return 0;
    size_t n = (size_t)(nl - c->buf), used = n + 1;
    if (n >= cap)
        n = cap - 1;
    memcpy(out, c->buf, n);
    out[n] = '\0';
    memmove(c->buf, c->buf + used, c->len - used);
    c->len -= used;
    return 1;
}

/* ---- the lock server ---- */

static struct conn peers[MAX_PEERS];
static int holder = -1;           /* index in peers of the lease holder, or -1 */
static int revoked;               /* the holder was sent REVOKE */
static long long granted_at;      /* our clock when we granted the lease */
static int queue[MAX_PEERS], nqueue;

static void emit_server(void)
{
    char line[64 + (MAX_PEERS + 1) * 12];      /* room for every id, whatever its value */
    int n = snprintf(line, sizeof line, "{\"role\":\"server\",\"holder\":");
    if (holder >= 0)
        n += snprintf(line + n, sizeof line - n, "%d", peers[holder].id);
    else
        n += snprintf(line + n, sizeof line - n, "null");
    n += snprintf(line + n, sizeof line - n, ",\"revoked\":%s,\"queue\":[",
                  revoked ? "true" : "false");
    for (int i = 0; i < nqueue; i++)
        n += snprintf(line + n, sizeof line - n, "%s%d", i ? "," : "", peers[queue[i]].id);
    snprintf(line + n, sizeof line - n, "]}\n");
    emit(line);
}

static void drop_peer(int p)
{
    close(peers[p].fd);
    peers[p].fd = -1;
    for (int i = 0; i < nqueue; i++)
        if (queue[i] == p) {
            memmove(queue + i, queue + i + 1, (size_t)(nqueue - i - 1) * sizeof *queue);
            nqueue--;
            break;
        }
}

/* Give the lease to the first worker in the queue that is still connected. */
static void grant_next(void)
{
    while (holder < 0 && nqueue > 0) {
        int p = queue[0];
        memmove(queue, queue + 1, (size_t)(nqueue - 1) * sizeof *queue);
        nqueue--;
        char line[32];
        snprintf(line, sizeof line, "GRANT %d\n", LEASE_MS);
        if (send_line(peers[p].fd, line) < 0) {
            drop_peer(p);
            continue;
        }
        holder = p;
        revoked = 0;
        granted_at = now_ms();
        printf("server: granted the lease to worker %d\n", peers[p].id);
    }
}

static void release(int p, const char *why)
{
    if (p != holder)
        return;                   /* a late RELEASE of a lease already given away */
    printf("server: worker %d %s\n", peers[p].id, why);
    holder = -1;
    revoked = 0;
}

/* Our lease timer ran out. */
static void expire(void)
{
    printf("server: lease of worker %d expired, revoking\n", peers[holder].id);
    if (send_line(peers[holder].fd, "REVOKE\n") < 0) {
        int p = holder;
        release(p, "is gone");
        drop_peer(p);
        return;
    }
    revoked = 1;
#ifdef BUG
    /* BUG: our clock says the lease is over, so the holder must have stopped. */
    holder = -1;
    revoked = 0;
#endif
}

static int queued(int p)
{
    for (int i = 0; i < nqueue; i++)
        if (queue[i] == p)
            return 1;
    return 0;
}

static void handle_line(int p, const char *line)
{
    int id;
    /* A peer waits in the queue at most once (so the queue never holds more than
     * MAX_PEERS): a repeated ACQUIRE from the holder or a queued peer is ignored. */
    if (sscanf(line, "ACQUIRE %d", &id) == 1 && p != holder && !queued(p)) {
        peers[p].id = id;
        queue[nqueue++] = p;
    } else if (strcmp(line, "RELEASE") == 0) {
        release(p, "released the lease");
    }
}

static void run_server(const struct sockaddr_in *self)
{
    int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(lfd, (const struct sockaddr *)self, sizeof *self) < 0 || listen(lfd, 16) < 0)
        die("listen");
    for (int i = 0; i < MAX_PEERS; i++)
        peers[i].fd = -1;
    emit_server();
    for (;;) {
        struct pollfd pfd[1 + MAX_PEERS];
        pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        for (int i = 0; i < MAX_PEERS; i++)
            pfd[1 + i] = (struct pollfd){ .fd = peers[i].fd, .events = POLLIN };
        int timeout = -1;                         /* no lease out: nothing to time */
        if (holder >= 0 && !revoked) {
            long long left = granted_at + LEASE_MS - now_ms();
            timeout = left > 0 ? (int)left : 0;
        }
        int ready = poll(pfd, 1 + MAX_PEERS, timeout);
        if (ready < 0) {
            if (errno == EINTR)
                continue;
            die("poll");
        }
        if (ready == 0) {
            if (holder >= 0 && !revoked && now_ms() - granted_at >= LEASE_MS)
                expire();
        }
        if (pfd[0].revents & POLLIN) {
            int fd = accept(lfd, NULL, NULL), i = 0;
            while (i < MAX_PEERS && peers[i].fd >= 0)
                i++;
            if (fd >= 0 && i == MAX_PEERS)
                close(fd);
            else if (fd >= 0)
                peers[i] = (struct conn){ .fd = fd, .id = -1 };
        }
        for (int i = 0; i < MAX_PEERS; i++) {
            if (peers[i].fd < 0 || pfd[1 + i].revents == 0)
                continue;
            if (fill(&peers[i]) <= 0) {           /* the worker is gone */
                release(i, "disconnected");
                drop_peer(i);
                continue;
            }
            char line[LINE_LEN];
            while (peers[i].fd >= 0 && take_line(&peers[i], line, sizeof line))
                handle_line(i, line);
        }
        grant_next();
        emit_server();
    }
}

/* ---- a worker ---- */

static void emit_worker(int id, int leader, int done)
{
    char line[96];
    snprintf(line, sizeof line, "{\"role\":\"worker\",\"id\":%d,\"leader\":%s,\"done\":%s}\n",
             id, leader ? "true" : "false", done ? "true" : "false");
    emit(line);
}

static void run_worker(int id, const struct sockaddr_in *server)
{
    struct conn s = { .fd = socket(AF_INET, SOCK_STREAM, 0), .id = id };
    char line[LINE_LEN];
    emit_worker(id, 0, 0);
    if (s.fd < 0 || connect(s.fd, (const struct sockaddr *)server, sizeof *server) < 0)
        die("connect");
    long long asked = now_ms();   /* a lease counts from when we asked, not when told */
    snprintf(line, sizeof line, "ACQUIRE %d\n", id);
    if (send_line(s.fd, line) < 0)
        die("send");
    int ms = -1;
    while (ms < 0) {
        while (!take_line(&s, line, sizeof line))
            if (fill(&s) <= 0) {
                printf("worker %d: the server went away\n", id);
                return;
            }
        sscanf(line, "GRANT %d", &ms);
    }
    long long until = asked + ms - MARGIN_MS;
    printf("worker %d: leader\n", id);
    emit_worker(id, 1, 0);

    /* Lead until the lease runs out by our clock, or the server revokes it. */
    int revoked = 0;
    while (!revoked) {
        long long left = until - now_ms();
        if (left <= 0)
            break;
        struct pollfd pfd = { .fd = s.fd, .events = POLLIN };
        int ready = poll(&pfd, 1, (int)left);
        if (ready < 0 && errno != EINTR)
            die("poll");
        if (ready <= 0)
            continue;             /* the loop reads the clock again */
        if (fill(&s) <= 0)
            break;                /* the server is gone: so is our lease */
        while (take_line(&s, line, sizeof line))
            if (strcmp(line, "REVOKE") == 0)
                revoked = 1;
    }
    printf("worker %d: stepping down (%s)\n", id, revoked ? "revoked" : "lease over");
    emit_worker(id, 0, 1);
    send_line(s.fd, "RELEASE\n");

    /* Done: wait for the server to close the connection. */
    while (fill(&s) > 0)
        s.len = 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: lease INDEX SERVER_ADDR (0: the server, else a worker)\n");
        return 2;
    }
    int index = atoi(argv[1]);
    struct sockaddr_in addr;
    parse_addr(argv[2], &addr);
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    ensure_open(STATE_FD);
    if (index == 0) {
        role = "server";
        run_server(&addr);
    } else {
        role = "worker";
        run_worker(index, &addr);
    }
    return 0;
}
