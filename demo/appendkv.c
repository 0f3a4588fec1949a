/*
 * appendkv: a key-value store whose only durable copy is an append-only log, fsynced
 * by group commit, the way PostgreSQL's commit_delay or a Redis AOF with
 * "appendfsync everysec" batches its fsyncs.
 *
 *     appendkv ADDR
 *     e.g.  appendkv 127.0.0.1:7700
 *
 * Clients send one request per line, answered in order:
 *
 *     SET <key> <int>  ->  OK <key> <int>        once the write is in the log, fsynced
 *     GET <key>        ->  VALUE <key> <int>  or  NONE <key>
 *
 * (a key is 1 to 15 letters, digits or '_'; anything else: ERR ...).
 *
 * The log is the file "kv.log" in the working directory, one "SET <key> <int>" line
 * per write. At start the server replays it in order (a later SET overwrites), stops at
 * the first line that is torn or not a record, and cuts the file there (ftruncate,
 * fsync) so that new records follow whole ones.
 *
 * Group commit. A SET is appended to the log with one write() at once and applied to
 * the store, but its OK waits: the writes since the last fsync form a batch, and the
 * batch is fsynced when the server has been idle for GROUP_MS (the poll timeout; every
 * request that arrives restarts it) or when it holds MAX_BATCH writes. Only then are the
 * batch's OKs sent, in order. A connection that waits for an OK is not read meanwhile,
 * so that its later requests are answered after it. Under a model checker the 10 ms
 * timer is a FIRE that the checker chooses to take, so a CRASH can land while a batch
 * is written but not yet fsynced.
 *
 * It is written the way such a program ships: blocking sockets, poll, files, fsync, one
 * thread. It reports its state for a model checker after every change (and right after
 * recovery), as one JSON line on fd 3:
 *
 *     {"kv":{"a":1,"b":2},"unsynced":[["b",2]]}
 *
 * kv is the store; unsynced the batch, the writes in the log since its last fsync, in
 * order. Nothing is written on fd 193: the log is the only durable state, and what of it
 * survives a CRASH is decided by the checker's disk model; the relaunched server
 * reports what it recovered on fd 3.
 *
 * -DBUG plants a defect: the OK of a SET is sent right after its write(), before the
 * batch's fsync (it acknowledges what is only in the page cache). A CRASH before the
 * idle timer fires loses a write a client was told is stored. Without a crash nothing
 * shows, nor with a disk that keeps what was written (no page cache).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define STATE_FD     3     /* in-memory state, one JSON line per change */
#define LOG_FILE     "kv.log"
#define GROUP_MS     10    /* idle time after which a batch is fsynced */
#define MAX_BATCH    8     /* writes in a batch that force its fsync at once */
#define MAX_KEYS     64
#define KEY_LEN      16    /* with its NUL */
#define MAX_CLIENTS  16
#define LINE_LEN     128

struct rec { char key[KEY_LEN]; long val; };
struct store { struct rec r[MAX_KEYS]; int n; };    /* sorted by key */

/* A connection, the bytes received on it that do not yet make a full line, and
 * whether it waits for an OK. */
struct conn { int fd; int waiting; size_t len; char buf[LINE_LEN]; };

/* A write of the batch and the client slot its OK goes to (-1: gone, or BUG: sent). */
struct pending { struct rec r; int slot; };

static struct store kv;
static struct pending batch[MAX_BATCH];
static int nbatch;
static int log_fd = -1;
static int lfd = -1;
static struct conn clients[MAX_CLIENTS];

static void die(const char *what)
{
    fprintf(stderr, "appendkv: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* Write all of p, to a file or a socket (SIGPIPE is ignored: a reset peer is EPIPE). */
static int write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Outside a checker fd 3 may be closed: point it at /dev/null, so that no socket or
 * file takes that number and receives state lines. */
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

static void fsync_dir(void)
{
    int dir = open(".", O_RDONLY | O_DIRECTORY);
    if (dir < 0 || fsync(dir) < 0)
        die("fsync .");
    close(dir);
}

/* ---- the store ---- */

static int valid_key(const char *k)
{
    size_t n = strlen(k);
    if (n == 0 || n >= KEY_LEN)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)k[i]) && k[i] != '_')
            return 0;
    return 1;
}

static const struct rec *store_get(const char *key)
{
    for (int i = 0; i < kv.n; i++)
        if (strcmp(kv.r[i].key, key) == 0)
            return &kv.r[i];
    return NULL;
}

static void store_set(const char *key, long val)
{
    int i = 0;
    while (i < kv.n && strcmp(kv.r[i].key, key) < 0)
        i++;
    if (i < kv.n && strcmp(kv.r[i].key, key) == 0) {
        kv.r[i].val = val;
        return;
    }
    if (kv.n == MAX_KEYS) {
        errno = ENOSPC;
        die("store full");
    }
    memmove(&kv.r[i + 1], &kv.r[i], (size_t)(kv.n - i) * sizeof kv.r[0]);
    snprintf(kv.r[i].key, KEY_LEN, "%s", key);
    kv.r[i].val = val;
    kv.n++;
}

/* "key value" -> 1, else 0. */
static int parse_rec(const char *line, struct rec *r)
{
    char *end;
    const char *sp = strchr(line, ' ');
    if (!sp || sp == line || (size_t)(sp - line) >= KEY_LEN)
        return 0;
    memcpy(r->key, line, (size_t)(sp - line));
    r->key[sp - line] = '\0';
    if (!valid_key(r->key))
        return 0;
    errno = 0;
    r->val = strtol(sp + 1, &end, 10);
    return end != sp + 1 && *end == '\0' && errno == 0;
}

/* ---- the state line ---- */

/* One canonical JSON line, keys sorted, in one write(2). */
static void emit_state(void)
{
    char line[64 + (MAX_KEYS + MAX_BATCH) * 48];
    size_t cap = sizeof line;
    int n = snprintf(line, cap, "{\"kv\":{");
    for (int i = 0; i < kv.n; i++)
        n += snprintf(line + n, cap - n, "%s\"%s\":%ld", i ? "," : "", kv.r[i].key,
                      kv.r[i].val);
    n += snprintf(line + n, cap - n, "},\"unsynced\":[");
    for (int i = 0; i < nbatch; i++)
        n += snprintf(line + n, cap - n, "%s[\"%s\",%ld]", i ? "," : "", batch[i].r.key,
                      batch[i].r.val);
    n += snprintf(line + n, cap - n, "]}\n");
    write_all(STATE_FD, line, (size_t)n);   /* a lost state line must not stop the node */
}

/* ---- the log ---- */

/* Replay the log into the store and open it for appending, cut after its last whole
 * record. */
static void recover(void)
{
    long good = 0, records = 0;
    FILE *f = fopen(LOG_FILE, "r");
    if (f) {
        char line[LINE_LEN];
        struct rec r;
        while (fgets(line, sizeof line, f) && strchr(line, '\n')) {
            *strchr(line, '\n') = '\0';
            if (strncmp(line, "SET ", 4) != 0 || !parse_rec(line + 4, &r))
                break;
            store_set(r.key, r.val);
            records++;
            good = ftell(f);
        }
        fclose(f);
    }
    log_fd = open(LOG_FILE, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (log_fd < 0)
        die(LOG_FILE);
    if (!f)                       /* just created: make its directory entry durable */
        fsync_dir();
    off_t size = lseek(log_fd, 0, SEEK_END);
    if (size > good) {            /* a torn append: cut it, durably, before serving */
        if (ftruncate(log_fd, good) < 0 || fsync(log_fd) < 0)
            die("truncate " LOG_FILE);
        printf("appendkv: cut %ld byte(s) of a torn record\n", (long)(size - good));
    }
    const char *inc = getenv("CMC_INCARNATION");
    printf("appendkv: recovered %d key(s) from %ld record(s)%s%s\n", kv.n, records,
           inc ? ", incarnation " : "", inc ? inc : "");
    emit_state();
}

static void log_append(const struct rec *r)
{
    char line[LINE_LEN];
    int n = snprintf(line, sizeof line, "SET %s %ld\n", r->key, r->val);
    if (write_all(log_fd, line, (size_t)n) < 0)   /* into the page cache: no fsync */
        die(LOG_FILE);
}

/* ---- serving ---- */

static void close_conn(int slot)
{
    struct conn *c = &clients[slot];
    if (c->fd >= 0)
        close(c->fd);
    *c = (struct conn){ .fd = -1 };
    for (int i = 0; i < nbatch; i++)   /* its writes stay in the batch, unanswered */
        if (batch[i].slot == slot)
            batch[i].slot = -1;
}

static void reply(int slot, const char *line)
{
    if (write_all(clients[slot].fd, line, strlen(line)) < 0)
        close_conn(slot);         /* the client went away: nothing more to tell it */
}

/* fsync the batch, then send its OKs (the BUG build has sent them already). */
static void commit(void)
{
    if (fsync(log_fd) < 0)
        die("fsync " LOG_FILE);
    for (int i = 0; i < nbatch; i++) {
        int slot = batch[i].slot;
        if (slot < 0)
            continue;
        char out[LINE_LEN + 32];
        snprintf(out, sizeof out, "OK %.15s %ld\n", batch[i].r.key, batch[i].r.val);
        clients[slot].waiting = 0;
        reply(slot, out);
    }
    nbatch = 0;
    emit_state();
}

static void handle_request(int slot, const char *line)
{
    char out[LINE_LEN + 32], key[LINE_LEN];
    struct rec r;
    if (strncmp(line, "SET ", 4) == 0 && parse_rec(line + 4, &r)) {
        log_append(&r);
        store_set(r.key, r.val);
        batch[nbatch++] = (struct pending){ .r = r, .slot = slot };
#ifdef BUG
        /* BUG: the write is only in the page cache until the batch's fsync. */
        batch[nbatch - 1].slot = -1;
        emit_state();
        snprintf(out, sizeof out, "OK %s %ld\n", r.key, r.val);
        reply(slot, out);
#else
        clients[slot].waiting = 1;  /* its OK comes with the batch's fsync */
        emit_state();
#endif
        return;
    }
    if (sscanf(line, "GET %127s", key) == 1 && valid_key(key)) {
        const struct rec *p = store_get(key);
        if (p)
            snprintf(out, sizeof out, "VALUE %s %ld\n", key, p->val);
        else
            snprintf(out, sizeof out, "NONE %s\n", key);
    } else {
        snprintf(out, sizeof out, "ERR unknown request\n");
    }
    reply(slot, out);
}

/* Move one complete line (without its line ending) out of c's buffer; 0 if none yet. */
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

/* One recv into c's buffer: > 0 bytes read, 0 at EOF, < 0 on reset or a too-long line. */
static ssize_t fill(struct conn *c)
{
    if (c->len == sizeof c->buf)
        return -1;
    ssize_t n;
    do
        n = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
    while (n < 0 && errno == EINTR);
    if (n > 0)
        c->len += (size_t)n;
    return n;
}

/* Answer the buffered requests of every connection that waits for no OK, while the
 * batch has room. */
static void drain(void)
{
    for (int i = 0; i < MAX_CLIENTS; i++) {
        char line[LINE_LEN];
        while (clients[i].fd >= 0 && !clients[i].waiting && nbatch < MAX_BATCH &&
               take_line(&clients[i], line, sizeof line))
            handle_request(i, line);
    }
}

static void serve(void)
{
    for (int i = 0; i < MAX_CLIENTS; i++)
        clients[i].fd = -1;
    for (;;) {
        drain();
        if (nbatch == MAX_BATCH) {
            commit();
            continue;
        }
        struct pollfd pfd[1 + MAX_CLIENTS];
        pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        for (int i = 0; i < MAX_CLIENTS; i++)   /* slot i is pfd[1 + i]; fd -1: unused */
            pfd[1 + i] = (struct pollfd){ .fd = clients[i].fd,
                                          .events = clients[i].waiting ? 0 : POLLIN };
        int ready = poll(pfd, 1 + MAX_CLIENTS, nbatch > 0 ? GROUP_MS : -1);
        if (ready < 0) {
            if (errno == EINTR)
                continue;
            die("poll");
        }
        if (ready == 0) {         /* idle for GROUP_MS with a batch: commit it */
            commit();
            continue;
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
            short ev = pfd[1 + i].revents;
            if (clients[i].fd < 0 || ev == 0)
                continue;
            if (clients[i].waiting)   /* not read: only a hangup wakes it */
                close_conn(i);
            else if (fill(&clients[i]) <= 0)   /* EOF, reset, or a line too long */
                close_conn(i);
        }
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

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: appendkv ADDR\n");
        return 2;
    }
    struct sockaddr_in addr;
    parse_addr(argv[1], &addr);

    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);  /* a line of output survives a SIGKILL after it */
    ensure_open(STATE_FD);
    recover();

    int one = 1;
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(lfd, (const struct sockaddr *)&addr, sizeof addr) < 0 || listen(lfd, 16) < 0)
        die("listen");
    serve();
    return 0;
}
