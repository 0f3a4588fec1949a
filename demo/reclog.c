/*
 * reclog: a key-value store whose only durable copy is a log of framed records, a
 * fixed-size header and then a body, fsynced by group commit: the shape of many
 * write-ahead logs (LevelDB's log, etcd's WAL, Kafka's segments).
 *
 *     reclog ADDR
 *     e.g.  reclog 127.0.0.1:7720
 *
 * Clients send one request per line, answered in order:
 *
 *     SET <key> <int>  ->  OK <key> <int>        once the record is in the log, fsynced
 *     GET <key>        ->  VALUE <key> <int>  or  NONE <key>
 *
 * (a key is 1 to 15 letters, digits or '_'; anything else: ERR ...).
 *
 * The log is "rec.log" in the working directory. A record is a header of HDR_LEN bytes,
 * "REC <key> <len> <sum>\n" (the key padded to 15 characters, len the body's length in
 * 4 digits, sum the FNV-1a hash of key and body in 8 hex digits), then the body,
 * "<int>\n". A SET appends a record with two write() calls, header then body, and
 * applies it to the store. Group commit, as in appendkv: the records since the last
 * fsync are a batch, fsynced once the server has been idle for GROUP_MS (the poll
 * timeout; every request restarts it) or holds MAX_BATCH records; only then are the
 * batch's OKs sent, in order. A connection waiting for its OK is not read meanwhile.
 *
 * Recovery reads the records in order and stops at the first one that is not whole: a
 * short or malformed header, a body shorter than its header says, a wrong sum. That is
 * the torn tail of an append a crash cut (a disk may keep some of the writes issued
 * before a crash and not others: a header without its body); it is cut off (ftruncate,
 * fsync) before serving, so that new records follow whole ones.
 *
 * Written the way such a program ships: blocking sockets, poll, files, fsync, one
 * thread. After every change (and right after recovery) it reports its state on fd 3
 * as one JSON line:
 *
 *     {"cut":0,"kv":{"a":1,"b":2},"unsynced":[["b",2]]}
 *
 * kv is the store; unsynced the batch, in order; cut the bytes of torn tail the last
 * recovery removed. Nothing goes to fd 193: the log is the only durable state, what of
 * it survives a CRASH is the checker's disk model's to decide, and the relaunched
 * server reports on fd 3 what it recovered.
 *
 * -DBUG plants a defect in recovery: a record is taken on its header's word, its body
 * unchecked, so a header whose body never reached the disk gives its key the value of
 * an empty body, 0, which no client wrote. Only a crash that keeps part of a batch's
 * writes shows it; one that keeps all of them or none tears no record.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define STATE_FD     3     /* in-memory state, one JSON line per change */
#define LOG_FILE     "rec.log"
#define HDR_FMT      "REC %-15s %4u %08x\n"
#define HDR_LEN      34    /* what HDR_FMT makes: 4 + 15 + 1 + 4 + 1 + 8 + 1 */
#define BODY_MAX     32
#define GROUP_MS     10    /* idle time after which a batch is fsynced */
#define MAX_BATCH    8     /* records in a batch that force its fsync at once */
#define MAX_KEYS     64
#define KEY_LEN      16    /* with its NUL */
#define MAX_CLIENTS  16
#define LINE_LEN     128

struct rec { char key[KEY_LEN]; long val; };
struct store { struct rec r[MAX_KEYS]; int n; };    /* sorted by key */

/* A connection, the bytes received on it that do not yet make a full line, and
 * whether it waits for an OK. */
struct conn { int fd; int waiting; size_t len; char buf[LINE_LEN]; };

/* A record of the batch and the client slot its OK goes to (-1: gone). */
struct pending { struct rec r; int slot; };

static struct store kv;
static struct pending batch[MAX_BATCH];
static int nbatch;
static long cut;                 /* bytes of torn tail the recovery removed */
static int log_fd = -1;
static int lfd = -1;
static struct conn clients[MAX_CLIENTS];

static void die(const char *what)
{
    fprintf(stderr, "reclog: %s: %s\n", what, strerror(errno));
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

/* Read up to len bytes, fewer only at the end of the file. */
static size_t read_full(int fd, char *p, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, p + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die("read " LOG_FILE);
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return got;
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
    int n = snprintf(line, cap, "{\"cut\":%ld,\"kv\":{", cut);
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

static uint32_t checksum(const char *key, const char *body, size_t len)
{
    uint32_t h = 2166136261u;     /* FNV-1a */
    for (const char *p = key; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)body[i]) * 16777619u;
    return h;
}

/* A header -> its key, body length and sum; 0 if it is not one. */
static int parse_header(const char *hdr, char *key, unsigned *len, unsigned *sum)
{
    char buf[HDR_LEN + 1], tail;
    memcpy(buf, hdr, HDR_LEN);
    buf[HDR_LEN] = '\0';
    return buf[HDR_LEN - 1] == '\n' &&
           sscanf(buf, "REC %15s %4u %8x%c", key, len, sum, &tail) == 4 && tail == '\n' &&
           valid_key(key) && *len <= BODY_MAX;
}

/* A body "<int>\n" -> its value; 0 if it is not one. */
static int parse_body(const char *body, size_t len, long *val)
{
    char *end;
    if (len < 2 || body[len - 1] != '\n')
        return 0;
    errno = 0;
    *val = strtol(body, &end, 10);
    return end == body + len - 1 && end != body && errno == 0;
}

/* Replay the log into the store and open it for appending, cut after its last whole
 * record. */
static void recover(void)
{
    long records = 0;
    off_t good = 0;
    int existed = access(LOG_FILE, F_OK) == 0;
    log_fd = open(LOG_FILE, O_RDWR | O_APPEND | O_CREAT, 0644);
    if (log_fd < 0)
        die(LOG_FILE);
    if (!existed)                 /* just created: make its directory entry durable */
        fsync_dir();
    for (;;) {
        char hdr[HDR_LEN], body[BODY_MAX + 1] = "";
        struct rec r;
        unsigned len, sum;
        size_t got = read_full(log_fd, hdr, HDR_LEN);
        if (got < HDR_LEN || !parse_header(hdr, r.key, &len, &sum))
            break;                /* the end, or a torn header */
        got = read_full(log_fd, body, len);
        int whole = got == len && checksum(r.key, body, len) == sum &&
                    parse_body(body, len, &r.val);
#ifdef BUG
        /* BUG: the header is trusted: a record whose body is short, missing or wrong is
         * taken all the same, with the value of what was read (none: 0). */
        if (!whole)
            r.val = strtol(body, NULL, 10);
#else
        if (!whole)
            break;                /* a torn body */
#endif
        store_set(r.key, r.val);
        records++;
        good += HDR_LEN + (off_t)got;
    }
    off_t size = lseek(log_fd, 0, SEEK_END);
    if (size < 0)
        die("lseek " LOG_FILE);
    if (size > good) {            /* a torn append: cut it, durably, before serving */
        if (ftruncate(log_fd, good) < 0 || fsync(log_fd) < 0)
            die("truncate " LOG_FILE);
        cut = (long)(size - good);
        printf("reclog: cut %ld byte(s) of a torn record\n", cut);
    }
    const char *inc = getenv("CMC_INCARNATION");
    printf("reclog: recovered %d key(s) from %ld record(s)%s%s\n", kv.n, records,
           inc ? ", incarnation " : "", inc ? inc : "");
    emit_state();
}

/* Append a record: the header, then the body, two writes into the page cache. */
static void log_append(const struct rec *r)
{
    char hdr[HDR_LEN + 1], body[BODY_MAX + 1];
    int blen = snprintf(body, sizeof body, "%ld\n", r->val);
    int hlen = snprintf(hdr, sizeof hdr, HDR_FMT, r->key, (unsigned)blen,
                        (unsigned)checksum(r->key, body, (size_t)blen));
    if (hlen != HDR_LEN || blen > BODY_MAX) {
        errno = EINVAL;
        die("record");
    }
    if (write_all(log_fd, hdr, HDR_LEN) < 0 || write_all(log_fd, body, (size_t)blen) < 0)
        die(LOG_FILE);
}

/* ---- serving ---- */

static void close_conn(int slot)
{
    struct conn *c = &clients[slot];
    if (c->fd >= 0)
        close(c->fd);
    *c = (struct conn){ .fd = -1 };
    for (int i = 0; i < nbatch; i++)   /* its records stay in the batch, unanswered */
        if (batch[i].slot == slot)
            batch[i].slot = -1;
}

static void reply(int slot, const char *line)
{
    if (write_all(clients[slot].fd, line, strlen(line)) < 0)
        close_conn(slot);         /* the client went away: nothing more to tell it */
}

/* fsync the batch, then send its OKs. */
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
        clients[slot].waiting = 1;  /* its OK comes with the batch's fsync */
        emit_state();
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
        fprintf(stderr, "usage: reclog ADDR\n");
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
