/*
 * durlog: a two-node replicated log.
 *
 *     durlog INDEX PRIMARY_ADDR BACKUP_ADDR
 *     e.g.  durlog 0 127.0.0.1:7000 127.0.0.1:7001     (0: the primary, 1: the backup)
 *
 * Each node listens on its own address. Clients talk to the primary, one request per
 * line, served one at a time:
 *
 *     PUT <int>   ->  ACK <int>          once the value is durable on both nodes
 *     GET         ->  LOG v1 v2 ...      the primary's log
 *
 * The primary forwards each PUT to the backup over one connection it opens at startup
 * (and reopens when it breaks) and waits for the backup's ACK. Each node keeps its log
 * in the file "log" in its working directory, one value per line, fsyncs every append,
 * and reads the file back when it starts, so a restarted node has what it made durable.
 * A PUT of a value already in the log is acknowledged without appending it again, which
 * makes re-sending a forward after a reconnect safe.
 *
 * It is written the way such a program ships: blocking sockets, poll, files, fsync, no
 * threads. It also reports its state for a model checker, which costs nothing outside
 * one: after every change, the in-memory state as one JSON line on fd 3; after every
 * fsync, the on-disk state as one JSON line on fd 193.
 *
 * -DBUG plants a defect: the primary's memory is its commit point. It puts the value in
 * its log and acknowledges it as soon as it has forwarded it, before the backup's ACK and
 * before its own fsync (and keeps it even if the backup cannot be reached). A crash of
 * the primary in that window loses a write a client was told is committed; without a
 * crash the bug cannot be seen.
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

#define STATE_FD      3    /* in-memory state, one JSON line per change */
#define DURABLE_FD    193  /* on-disk state, one JSON line per fsync */
#define LOG_FILE      "log"
#define MAX_LOG       1024
#define MAX_CLIENTS   16
#define LINE_LEN      128
/* Bounded so that a checker that fires every timeout still has a finite search. */
#define CONNECT_TRIES 3    /* refused connects to the backup, 100 ms apart */
#define FORWARD_TRIES 3    /* broken connections tolerated while forwarding one PUT */

struct log { long v[MAX_LOG]; int n; };

/* A connection and the bytes received on it that do not yet make a full line. */
struct conn { int fd; size_t len; char buf[LINE_LEN]; int answered; };

static const char *role;
static struct log mem;     /* this incarnation's log, in memory */
static struct log disk;    /* what the log file holds as of the last fsync */
static int log_fd = -1;
/* The primary's tries so far: broken connections while forwarding one PUT, and refused
 * connects in a row. They decide whether the next failure gives up, so they are state
 * (in the fd-3 line while either is not 0: two primaries alike but for them act apart). */
static int forward_try, connect_try;

static void die(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", role ? role : "durlog", what, strerror(errno));
    exit(1);
}

/* ---- the log and its state lines ---- */

static int log_has(const struct log *l, long v)
{
    for (int i = 0; i < l->n; i++)
        if (l->v[i] == v)
            return 1;
    return 0;
}

static void log_push(struct log *l, long v)
{
    if (l->n == MAX_LOG) {
        errno = ENOSPC;
        die("log full");
    }
    l->v[l->n++] = v;
}

static int write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* One canonical JSON line, e.g. {"role":"primary","log":[7,8]}, in one write(2); the
 * in-memory one with "tries":[FORWARD,CONNECT] while the primary is retrying. */
static void emit_state(int fd, const struct log *l)
{
    char line[96 + MAX_LOG * 22];
    int n = snprintf(line, sizeof line, "{\"role\":\"%s\",\"log\":[", role);
    for (int i = 0; i < l->n; i++)
        n += snprintf(line + n, sizeof line - n, "%s%ld", i ? "," : "", l->v[i]);
    n += snprintf(line + n, sizeof line - n, "]");
    if (fd == STATE_FD && (forward_try || connect_try))
        n += snprintf(line + n, sizeof line - n, ",\"tries\":[%d,%d]", forward_try, connect_try);
    n += snprintf(line + n, sizeof line - n, "}\n");
    write_all(fd, line, (size_t)n);   /* a lost state line must not stop the node */
}

/* Outside a checker fds 3 and 193 may be closed: point them at /dev/null, so that no
 * socket takes one of those numbers and receives state lines. */
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

/* Read back the log file; a last line without its newline is a torn append: cut it. */
static void recover(void)
{
    FILE *f = fopen(LOG_FILE, "r");
    long good = 0;
    if (f) {
        char line[64];
        while (fgets(line, sizeof line, f) && strchr(line, '\n')) {
            log_push(&disk, strtol(line, NULL, 10));
            good = ftell(f);
        }
        fclose(f);
    }
    log_fd = open(LOG_FILE, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (log_fd < 0 || ftruncate(log_fd, good) < 0)
        die(LOG_FILE);
    if (!f) {                       /* just created: make its directory entry durable */
        int dir = open(".", O_RDONLY | O_DIRECTORY);
        if (dir < 0 || fsync(dir) < 0)
            die("fsync .");
        close(dir);
    }
    mem = disk;
    printf("%s: recovered %d value(s)\n", role, disk.n);
    emit_state(STATE_FD, &mem);
    if (disk.n > 0)
        emit_state(DURABLE_FD, &disk);
}

/* Append v to the log file and fsync; only then report the new durable state. */
static void persist(long v)
{
    char line[32];
    int n = snprintf(line, sizeof line, "%ld\n", v);
    if (write_all(log_fd, line, (size_t)n) < 0 || fsync(log_fd) < 0)
        die(LOG_FILE);
    log_push(&disk, v);
    emit_state(DURABLE_FD, &disk);
}

static void remember(long v)
{
    log_push(&mem, v);
    emit_state(STATE_FD, &mem);
}

static void set_tries(int forward, int connect)
{
    if (forward == forward_try && connect == connect_try)
        return;
    forward_try = forward;
    connect_try = connect;
    emit_state(STATE_FD, &mem);
}

/* ---- sockets and lines ---- */

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

static int listen_on(const struct sockaddr_in *sa)
{
    int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (const struct sockaddr *)sa, sizeof *sa) < 0 || listen(fd, 16) < 0)
        die("listen");
    return fd;
}

static int connect_to(const struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket");
    if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void close_conn(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->len = 0;
}

/* Send a whole line. MSG_NOSIGNAL: a reset peer is an error here, not a SIGPIPE. */
static int send_line(int fd, const char *line)
{
    size_t len = strlen(line);
    while (len > 0) {
        ssize_t n = send(fd, line, len, MSG_NOSIGNAL);
        if (n < 0)
            return -1;
        line += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Move one complete line (without its line ending) out of c's buffer; 0 if none yet. */
static int take_line(struct conn *c, char *out, size_t cap)
{
    char *nl = memchr(c->buf, '\n', c->len);
    if (!nl)
        return 0;
    size_t n = (size_t)(nl - c->buf), used = n + 1;
    if (n > 0 && c->buf[n - 1] == '\r')
        n--;
    if (n >= cap)
        n = cap - 1;
    memcpy(out, c->buf, n);
    out[n] = '\0';
    memmove(c->buf, c->buf + used, c->len - used);
    c->len -= used;
    return 1;
}

/* One recv into c's buffer: > 0 bytes read, 0 at EOF, < 0 on reset or a too-long line. */
static ssize_t fill(struct conn *c)
{
    if (c->len == sizeof c->buf)
        return -1;
    ssize_t n = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
    if (n > 0)
        c->len += (size_t)n;
    return n;
}

/* Block until a whole line arrives on c; 0 if the connection ends first. */
static int read_line(struct conn *c, char *out, size_t cap)
{
    while (!take_line(c, out, cap))
        if (fill(c) <= 0)
            return 0;
    return 1;
}

/* "PUT <int>" -> 1 and *v; anything else -> 0. */
static int parse_put(const char *line, long *v)
{
    char *end;
    if (strncmp(line, "PUT ", 4) != 0)
        return 0;
    errno = 0;
    *v = strtol(line + 4, &end, 10);
    return end != line + 4 && *end == '\0' && errno == 0;
}

/* ---- the primary ---- */

static struct sockaddr_in backup_addr;
static struct conn backup = { .fd = -1 };
static struct conn clients[MAX_CLIENTS];

static int connect_backup(void)
{
    static const struct timespec pause = { 0, 100 * 1000 * 1000 };
    for (int i = 0; i < CONNECT_TRIES; i++) {
        set_tries(forward_try, i);
        if (i > 0)
            nanosleep(&pause, NULL);
        if ((backup.fd = connect_to(&backup_addr)) >= 0) {
            backup.len = 0;
            printf("primary: connected to backup\n");
            set_tries(forward_try, 0);
            return 1;
        }
    }
    printf("primary: backup unreachable\n");
    set_tries(forward_try, 0);
    return 0;
}

static void answer(struct conn *c, long v)
{
    char line[32];
    snprintf(line, sizeof line, "ACK %ld\n", v);
    c->answered = 1;
    printf("primary: acked %ld\n", v);
    if (c->fd >= 0 && send_line(c->fd, line) < 0)
        close_conn(c);            /* the client went away: nothing more to tell it */
}

/* Forward PUT v to the backup and wait for its ACK v. A broken connection is reopened
 * and the PUT sent again. 1 once the backup has v durably, 0 if it cannot be reached.
 * (client is only used by the BUG build, to acknowledge early.) */
static int forward(long v, struct conn *client)
{
    char req[32], line[LINE_LEN], want[32];
    snprintf(req, sizeof req, "PUT %ld\n", v);
    snprintf(want, sizeof want, "ACK %ld", v);
    for (int try = 0; try < FORWARD_TRIES; try++) {
        set_tries(try, 0);
        if (backup.fd < 0 && !connect_backup())
            return 0;
        if (send_line(backup.fd, req) < 0) {
            close_conn(&backup);
            continue;
        }
#ifdef BUG
        /* BUG: the client hears ACK as soon as the PUT is on its way: before the backup
         * has it, before our own fsync. */
        if (!client->answered)
            answer(client, v);
#else
        (void)client;
#endif
        while (read_line(&backup, line, sizeof line))
            if (strcmp(line, want) == 0)
                return 1;
        printf("primary: lost the backup connection\n");
        close_conn(&backup);
    }
    return 0;
}

static int replicate(long v, struct conn *client)
{
    int done = forward(v, client);
    set_tries(0, 0);
    return done;
}

static void handle_put(struct conn *c, long v)
{
    c->answered = 0;
    if (log_has(&mem, v)) {       /* already committed: a retry */
        answer(c, v);
        return;
    }
#ifdef BUG
    remember(v);                  /* BUG: in the log before it is durable anywhere */
    replicate(v, c);              /* acknowledges c once forwarded; keep v regardless */
#else
    if (!replicate(v, c)) {       /* not replicated: do not acknowledge, drop it */
        printf("primary: dropped PUT %ld\n", v);
        close_conn(c);
        return;
    }
    remember(v);
#endif
    persist(v);
    if (!c->answered)
        answer(c, v);
}

static void handle_request(struct conn *c, const char *line)
{
    long v;
    if (parse_put(line, &v)) {
        handle_put(c, v);
    } else if (strcmp(line, "GET") == 0) {
        char out[16 + MAX_LOG * 22];
        int n = snprintf(out, sizeof out, "LOG");
        for (int i = 0; i < mem.n; i++)
            n += snprintf(out + n, sizeof out - n, " %ld", mem.v[i]);
        snprintf(out + n, sizeof out - n, "\n");
        if (send_line(c->fd, out) < 0)
            close_conn(c);
    } else if (send_line(c->fd, "ERR unknown request\n") < 0) {
        close_conn(c);
    }
}

static void run_primary(const struct sockaddr_in *self)
{
    int lfd = listen_on(self);    /* first, so clients can queue while we connect */
    for (int i = 0; i < MAX_CLIENTS; i++)
        clients[i].fd = -1;
    connect_backup();             /* if this fails, the next PUT tries again */

    for (;;) {
        struct pollfd pfd[1 + MAX_CLIENTS];
        pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        for (int i = 0; i < MAX_CLIENTS; i++)   /* slot i is pfd[1 + i]; fd -1: unused */
            pfd[1 + i] = (struct pollfd){ .fd = clients[i].fd, .events = POLLIN };
        if (poll(pfd, 1 + MAX_CLIENTS, -1) < 0) {
            if (errno == EINTR)
                continue;
            die("poll");
        }
        if (pfd[0].revents & POLLIN) {
            int fd = accept(lfd, NULL, NULL);
            int i = 0;
            while (i < MAX_CLIENTS && clients[i].fd >= 0)
                i++;
            if (fd >= 0 && i == MAX_CLIENTS)
                close(fd);        /* too many clients */
            else if (fd >= 0)
                clients[i] = (struct conn){ .fd = fd };
        }
        for (int i = 0; i < MAX_CLIENTS; i++) {
            struct conn *c = &clients[i];
            if (c->fd < 0 || pfd[1 + i].revents == 0)
                continue;
            if (fill(c) <= 0) {   /* EOF, reset, or a line too long */
                close_conn(c);
                continue;
            }
            char line[LINE_LEN];
            while (c->fd >= 0 && take_line(c, line, sizeof line))
                handle_request(c, line);
        }
    }
}

/* ---- the backup ---- */

static void run_backup(const struct sockaddr_in *self)
{
    int lfd = listen_on(self);
    for (;;) {                    /* serve one primary connection at a time */
        struct conn p = { .fd = accept(lfd, NULL, NULL) };
        if (p.fd < 0)
            continue;
        printf("backup: primary connected\n");
        char line[LINE_LEN], ack[32];
        long v;
        while (read_line(&p, line, sizeof line)) {
            if (!parse_put(line, &v))
                continue;
            if (!log_has(&mem, v)) {   /* a re-sent PUT is acknowledged, not appended */
                persist(v);            /* append, fsync, report durable state */
                remember(v);
                printf("backup: stored %ld\n", v);
            }
            snprintf(ack, sizeof ack, "ACK %ld\n", v);
            if (send_line(p.fd, ack) < 0)
                break;
        }
        printf("backup: primary connection closed\n");
        close_conn(&p);
    }
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[1], "0") != 0 && strcmp(argv[1], "1") != 0)) {
        fprintf(stderr, "usage: durlog 0|1 PRIMARY_ADDR BACKUP_ADDR (0: primary)\n");
        return 2;
    }
    int primary = argv[1][0] == '0';
    struct sockaddr_in addr[2];
    parse_addr(argv[2], &addr[0]);
    parse_addr(argv[3], &addr[1]);

    role = primary ? "primary" : "backup";
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);  /* a line of output survives a SIGKILL after it */
    ensure_open(STATE_FD);
    ensure_open(DURABLE_FD);
    recover();

    if (primary) {
        backup_addr = addr[1];
        run_primary(&addr[0]);
    } else {
        run_backup(&addr[1]);
    }
    return 0;
}
