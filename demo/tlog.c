/*
 * tlog: a two-node replicated log, like durlog, with a multi-threaded primary.
 *
 *     tlog INDEX PRIMARY_ADDR BACKUP_ADDR
 *     e.g.  tlog 0 127.0.0.1:7000 127.0.0.1:7001     (0: the primary, 1: the backup)
 *
 * Each node listens on its own address. Clients talk to the primary, one request per
 * line:
 *
 *     PUT <int>   ->  ACK <int>          once the value is durable on both nodes
 *     GET         ->  LOG v1 v2 ...      the primary's log
 *
 * The primary is written the way a threaded server ships: the main thread accepts, and
 * each client connection gets a thread of its own (pthread_create, detached) that reads
 * its requests with blocking calls. Every client thread forwards its PUTs over ONE
 * shared connection to the backup, under a mutex that also protects the log. A
 * background reader thread owns that connection's receiving side: it reads the backup's
 * ACK lines and wakes the client threads waiting for them (a condition variable). When
 * the connection breaks the reader closes it and says so; the next PUT opens a new one
 * (with a new reader) and every waiting thread sends its PUT again. A client thread
 * answers ACK v only once the backup has acknowledged v and it has appended v to its
 * own file and fsynced it.
 *
 * The backup is the same as durlog's: single-threaded, one primary connection at a
 * time, each PUT appended to its file, fsynced, then acknowledged. Each node keeps its
 * log in the file "log" in its working directory, one value per line, and reads it back
 * when it starts. A PUT of a value already in the log is acknowledged without appending
 * it again, which makes re-sending a forward after a reconnect safe.
 *
 * It also reports its state for a model checker, which costs nothing outside one: after
 * every change, the in-memory state as one JSON line on fd 3; after every fsync, the
 * on-disk state as one JSON line on fd 193.
 *
 * -DBUG plants a defect: the primary acknowledges a PUT as soon as it has forwarded it
 * to the backup (it puts the value in its in-memory log first), before the backup's ACK
 * and before its own fsync. A crash of the primary in that window loses a write a client
 * was told is committed; without a crash the bug cannot be seen.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
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
#define LINE_LEN      128
/* Bounded so that a checker that fires every timeout still has a finite search. */
#define CONNECT_TRIES 3    /* refused connects to the backup, 100 ms apart */
#define FORWARD_TRIES 3    /* broken connections tolerated while forwarding one PUT */

struct log { long v[MAX_LOG]; int n; };

/* A connection and the bytes received on it that do not yet make a full line. */
struct conn { int fd; size_t len; char buf[LINE_LEN]; };

static const char *role;
static struct log mem;     /* this incarnation's log, in memory */
static struct log disk;    /* what the log file holds as of the last fsync */
static int log_fd = -1;

static void die(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", role ? role : "tlog", what, strerror(errno));
    exit(1);
}

static void die_rc(const char *what, int rc)
{
    errno = rc;
    die(what);
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

/* The PUTs client threads are replicating, in the order they took them up: which
 * thread holds which value lives on the threads' stacks, and the order decides the
 * order of the forwards after a reconnect, so it is part of the declared state. */
static struct log inflight;

static int put_list(char *out, size_t cap, const struct log *l)
{
    int n = 0;
    for (int i = 0; i < l->n; i++)
        n += snprintf(out + n, cap - n, "%s%ld", i ? "," : "", l->v[i]);
    return n;
}

/* One canonical JSON line in one write(2): on fd 3 {"role":"primary","log":[7,8],
 * "inflight":[]}, on fd 193 {"role":"primary","log":[7,8]}. */
static void emit_state(int fd, const struct log *l)
{
    static char line[64 + 2 * MAX_LOG * 22];   /* callers hold the log's mutex */
    int n = snprintf(line, sizeof line, "{\"role\":\"%s\",\"log\":[", role);
    n += put_list(line + n, sizeof line - n, l);
    if (fd == STATE_FD) {
        n += snprintf(line + n, sizeof line - n, "],\"inflight\":[");
        n += put_list(line + n, sizeof line - n, &inflight);
    }
    n += snprintf(line + n, sizeof line - n, "]}\n");
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

/* Block until a whole line arrives on c; 0 if the connection ends first (EOF, a reset,
 * or a line too long). */
static int read_line(struct conn *c, char *out, size_t cap)
{
    while (!take_line(c, out, cap)) {
        if (c->len == sizeof c->buf)
            return 0;
        ssize_t n = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
        if (n <= 0)
            return 0;
        c->len += (size_t)n;
    }
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

static void start_thread(void *(*fn)(void *), void *arg)
{
    pthread_attr_t attr;
    pthread_t t;
    int rc = pthread_attr_init(&attr);
    if (rc == 0)
        rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (rc == 0)
        rc = pthread_create(&t, &attr, fn, arg);
    if (rc != 0)
        die_rc("pthread_create", rc);
    pthread_attr_destroy(&attr);
}

/* ---- the primary ----
 *
 * Everything below is under `lock`: the log (mem, disk, the file), the connection to
 * the backup, and what the backup has acknowledged. The one thing done without it is
 * blocking on a client connection (a client thread) or on the backup connection (the
 * reader). */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;  /* acked grew, or link broke */
static struct sockaddr_in backup_addr;
static int backup_fd = -1;          /* the shared connection to the backup, -1: none */
static unsigned long link_gen;      /* counts the connections that broke */
static struct log acked;            /* values the backup acknowledged: durable there */

/* One per connection to the backup: reads its ACK lines until it breaks. */
static void *reader(void *arg)
{
    struct conn *c = arg;
    char line[LINE_LEN];
    long v;
    while (read_line(c, line, sizeof line)) {
        if (strncmp(line, "ACK ", 4) != 0)
            continue;
        v = strtol(line + 4, NULL, 10);
        pthread_mutex_lock(&lock);
        if (!log_has(&acked, v))
            log_push(&acked, v);
        pthread_cond_broadcast(&changed);
        pthread_mutex_unlock(&lock);
    }
    pthread_mutex_lock(&lock);       /* only the reader closes: no fd is reused under */
    printf("primary: lost the backup connection\n");   /* a thread that still sends */
    close(c->fd);
    backup_fd = -1;
    link_gen++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
    free(c);
    return NULL;
}

/* Open the connection to the backup and start its reader; under lock. */
static int connect_backup(void)
{
    static const struct timespec pause = { 0, 100 * 1000 * 1000 };
    for (int i = 0; i < CONNECT_TRIES; i++) {
        if (i > 0)
            nanosleep(&pause, NULL);
        int fd = connect_to(&backup_addr);
        if (fd >= 0) {
            struct conn *c = calloc(1, sizeof *c);
            if (!c)
                die("calloc");
            c->fd = fd;
            backup_fd = fd;
            printf("primary: connected to backup\n");
            start_thread(reader, c);
            return 1;
        }
    }
    printf("primary: backup unreachable\n");
    return 0;
}

static int answer(int fd, long v)
{
    char line[32];
    snprintf(line, sizeof line, "ACK %ld\n", v);
    printf("primary: acked %ld\n", v);
    return send_line(fd, line);
}

/* Forward PUT v to the backup and wait, on `changed`, for its ACK v. A broken
 * connection is reopened and the PUT sent again. 1 once the backup has v durably, 0 if
 * it cannot be reached. Under lock. (client is only used by the BUG build, to
 * acknowledge early; *answered says whether it did.) */
static int replicate(long v, int client, int *answered)
{
    char req[32];
    snprintf(req, sizeof req, "PUT %ld\n", v);
    for (int try = 0; try < FORWARD_TRIES; try++) {
        if (log_has(&acked, v))
            return 1;
        if (backup_fd < 0 && !connect_backup())
            return 0;
        unsigned long gen = link_gen;
        if (send_line(backup_fd, req) == 0) {
#ifdef BUG
            /* BUG: the client hears ACK as soon as the PUT is on its way: before the
             * backup has it, before our own fsync. */
            if (!*answered) {
                *answered = 1;
                answer(client, v);
            }
#else
            (void)client;
            (void)answered;
#endif
        }
        /* On a send error the reader sees the same reset and ends the link. */
        while (!log_has(&acked, v) && link_gen == gen)
            pthread_cond_wait(&changed, &lock);
    }
    return log_has(&acked, v);
}

static void inflight_done(long v)
{
    int j = 0;
    for (int i = 0; i < inflight.n; i++)
        if (inflight.v[i] != v)
            inflight.v[j++] = inflight.v[i];
    inflight.n = j;
    emit_state(STATE_FD, &mem);
}

/* Replicate PUT v, keep it, answer the client; 1 if c may go on. Under lock. */
static int put_value(int fd, long v)
{
    int answered = 0;
#ifdef BUG
    remember(v);                      /* BUG: in the log before it is durable anywhere */
    replicate(v, fd, &answered);      /* acknowledges once forwarded; keep v regardless */
#else
    if (!replicate(v, fd, &answered)) {  /* not replicated: do not acknowledge, drop it */
        printf("primary: dropped PUT %ld\n", v);
        return 0;
    }
    remember(v);
#endif
    persist(v);
    if (!answered)
        return answer(fd, v) == 0;
    return 1;
}

/* 1 if c may go on, 0 if the client connection is to be closed. Under lock. */
static int handle_put(int fd, long v)
{
    if (log_has(&mem, v))             /* already committed: a retry */
        return answer(fd, v) == 0;
    log_push(&inflight, v);
    emit_state(STATE_FD, &mem);
    int ok = put_value(fd, v);
    inflight_done(v);
    return ok;
}

static int handle_request(int fd, const char *line)
{
    long v;
    if (parse_put(line, &v))
        return handle_put(fd, v);
    if (strcmp(line, "GET") == 0) {
        static char out[16 + MAX_LOG * 22];
        int n = snprintf(out, sizeof out, "LOG");
        for (int i = 0; i < mem.n; i++)
            n += snprintf(out + n, sizeof out - n, " %ld", mem.v[i]);
        snprintf(out + n, sizeof out - n, "\n");
        return send_line(fd, out) == 0;
    }
    return send_line(fd, "ERR unknown request\n") == 0;
}

/* One per client connection: its requests, one at a time, until it goes away. */
static void *client_thread(void *arg)
{
    struct conn *c = arg;
    char line[LINE_LEN];
    int ok = 1;
    while (ok && read_line(c, line, sizeof line)) {
        pthread_mutex_lock(&lock);
        ok = handle_request(c->fd, line);
        pthread_mutex_unlock(&lock);
    }
    close(c->fd);
    free(c);
    return NULL;
}

static void run_primary(const struct sockaddr_in *self)
{
    int lfd = listen_on(self);    /* first, so clients can queue while we connect */
    pthread_mutex_lock(&lock);
    connect_backup();             /* if this fails, the next PUT tries again */
    pthread_mutex_unlock(&lock);
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            die("accept");
        }
        struct conn *c = calloc(1, sizeof *c);
        if (!c)
            die("calloc");
        c->fd = fd;
        start_thread(client_thread, c);
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
        close(p.fd);
    }
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[1], "0") != 0 && strcmp(argv[1], "1") != 0)) {
        fprintf(stderr, "usage: tlog 0|1 PRIMARY_ADDR BACKUP_ADDR (0: primary)\n");
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
