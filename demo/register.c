/*
 * register: one durable register behind a line protocol, made durable by group commit:
 * the shape of a configuration store, a lock service's epoch or a leader's term kept
 * in a small log and fsynced in batches.
 *
 *     register ADDR
 *     e.g.  register 127.0.0.1:7730
 *
 * Requests, one a line, each answered with one line, in order on its connection:
 *
 *     SET <value>  ->  OK <value>                  once the value is on disk, fsynced
 *     GET          ->  VALUE <value>  or  EMPTY    the last value acknowledged
 *
 * (a value is 1 to 31 letters, digits or "-_.:"; anything else: ERR ...).
 *
 * The register lives in "register.log" in the working directory: one record per SET,
 * appended with a single write(), "v <value> <sum>\n", sum the FNV-1a hash of the value
 * in 8 hex digits. The last whole record is the register's value. The log is never
 * compacted here (a real one would rewrite it into a fresh file and rename it over the
 * old one now and then); it only ever holds as many records as there were SETs.
 *
 * Group commit. A SET appends its record at once, but its OK waits: the records not
 * yet fsynced form a batch, and the batch is fsynced when the server has been idle for
 * GROUP_MS (the poll timeout, restarted by every request) or holds MAX_BATCH records.
 * Only after that fsync does the register take the batch's last value and do the
 * batch's OKs go out, in the order the SETs came. A GET is answered at once with the
 * register's value: the last acknowledged value, never one still waiting for its
 * fsync, which a crash could take back after a client had read it. A connection that
 * waits for its OK is not read meanwhile (its next request waits in the socket).
 *
 * Recovery, at start: the records are read in order up to the first one that is not
 * whole (short, malformed, wrong sum: the tail of an append the crash cut), which is
 * cut off; the last whole record is the value. Then the log is fsynced before anything
 * is served, so that a record that reached the disk without an fsync of ours (a write
 * whose OK the crash prevented) is durable before a client can read it. Such a record
 * is a write that was never acknowledged, and recovering it is right: its client was
 * told nothing, so the write may have happened. Losing it is right too.
 *
 * Written the way such a program ships: blocking sockets, poll, one thread, stdout
 * line-buffered. After every change (and once recovery is done) it reports its state
 * on fd 3 as one JSON line, keys sorted:
 *
 *     {"conns":[["127.0.0.1:60000",""],["127.0.0.1:60001",""]],
 *      "unsynced":[{"to":"127.0.0.1:60000","val":"1"}],"value":null}
 *
 * value is the register (null: empty); unsynced the batch, in order, each record with
 * the client its OK goes to (null: none; the client left, or was told already); conns
 * the client connections in the order of the server's table (null: a free slot), the
 * order in which it serves them, each with its peer's address and the bytes received
 * on it that it has not acted on yet (a partial line, or lines behind a SET that
 * waits). A client is named by its address: the slot number alone would not say
 * which of two clients, connected in either order, waits for which OK. Nothing goes
 * to fd 193: the log is the only durable state, what of it survives a crash is the
 * disk's to decide, and the relaunched server reports what it recovered.
 *
 * -DBUG plants the classic group-commit mistake: the OK goes out, and the register
 * takes the value, as soon as the record is written, before the fsync; the batch is
 * still fsynced on the idle timer, with nobody waiting for it. A crash before the
 * timer fires can lose a write that its client was told is done.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATE_FD     3     /* in-memory state, one JSON line per change */
#define LOG_FILE     "register.log"
#define GROUP_MS     10    /* idle time after which the batch is fsynced */
#define MAX_BATCH    32    /* records in a batch that force its fsync at once */
#define VAL_LEN      32    /* a value, with its NUL */
#define MAX_CLIENTS  16
#define LINE_LEN     128
#define REC_MAX      (2 + VAL_LEN + 10)   /* "v " value " " 8 hex "\n" */

_Static_assert(VAL_LEN == 32, "commit()'s \"%.31s\" prints a whole value");

/* A client connection: its descriptor (-1: free slot), its peer's address ("ip:port",
 * how the server names it in its state and its output), whether it waits for an OK,
 * and the bytes received that it has not acted on. */
struct conn {
    int fd;
    int waiting;
    char peer[INET_ADDRSTRLEN + 6];
    size_t len;
    char buf[LINE_LEN];
};

/* A record of the batch and the slot its OK goes to (-1: none). */
struct pending { char val[VAL_LEN]; int slot; };

static char value[VAL_LEN];       /* the register; "" when empty */
static struct pending batch[MAX_BATCH];
static int nbatch;
static int log_fd = -1;
static int lfd = -1;
static struct conn clients[MAX_CLIENTS];

static void die(const char *what)
{
    fprintf(stderr, "register: %s: %s\n", what, strerror(errno));
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

/* Outside a checker fd 3 may be closed: point it at /dev/null, so that no file or
 * socket is given that number and receives the state lines. */
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

static int valid_value(const char *v, size_t n)
{
    if (n == 0 || n >= VAL_LEN)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)v[i]) && !strchr("-_.:", v[i]))
            return 0;
    return 1;
}

static uint32_t fnv1a(const char *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 16777619u;
    return h;
}

/* ---- the state line ---- */

struct out { char *p; size_t cap, len; };

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n < o->cap - o->len ? (size_t)n : o->cap - o->len - 1;
}

/* Bytes as a JSON string: a byte that is not printable ASCII becomes \u00XX, so that
 * two different byte strings never read the same. */
static void put_bytes(struct out *o, const char *p, size_t n)
{
    put(o, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '"' || c == '\\')
            put(o, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            put(o, "\\u%04x", c);
        else
            put(o, "%c", c);
    }
    put(o, "\"");
}

static void emit_state(void)
{
    static char line[256 + MAX_CLIENTS * (16 + 6 * LINE_LEN) + MAX_BATCH * (32 + VAL_LEN)];
    struct out o = { line, sizeof line, 0 };
    int used = MAX_CLIENTS;       /* slots up to the last one in use */
    while (used > 0 && clients[used - 1].fd < 0)
        used--;
    put(&o, "{\"conns\":[");
    for (int i = 0; i < used; i++) {
        if (clients[i].fd < 0) {
            put(&o, "%snull", i ? "," : "");
            continue;
        }
        put(&o, "%s[\"%s\",", i ? "," : "", clients[i].peer);
        put_bytes(&o, clients[i].buf, clients[i].len);
        put(&o, "]");
    }
    put(&o, "],\"unsynced\":[");
    for (int i = 0; i < nbatch; i++) {
        put(&o, "%s{", i ? "," : "");
        if (batch[i].slot >= 0)
            put(&o, "\"to\":\"%s\",", clients[batch[i].slot].peer);
        else
            put(&o, "\"to\":null,");
        put(&o, "\"val\":\"%s\"}", batch[i].val);
    }
    if (value[0])
        put(&o, "],\"value\":\"%s\"}\n", value);
    else
        put(&o, "],\"value\":null}\n");
    static char last[sizeof line];     /* the line last reported: only changes go out */
    static size_t last_len = (size_t)-1;
    if (o.len == last_len && memcmp(line, last, o.len) == 0)
        return;
    memcpy(last, line, o.len);
    last_len = o.len;
    write_all(STATE_FD, line, o.len);   /* a lost state line must not stop the node */
}

/* ---- the log ---- */

/* One record "v <value> <8 hex>\n" at p (n bytes up to and including its '\n') -> its
 * value in val; 0 if it is not a whole one. */
static int parse_record(const char *p, size_t n, char *val)
{
    if (n < 2 + 1 + 1 + 8 + 1 || p[0] != 'v' || p[1] != ' ' || p[n - 1] != '\n' ||
        p[n - 10] != ' ')
        return 0;
    size_t vlen = n - 2 - 10;
    if (!valid_value(p + 2, vlen))
        return 0;
    char hex[9], *end;
    memcpy(hex, p + n - 9, 8);
    hex[8] = '\0';
    for (int i = 0; i < 8; i++)
        if (!isxdigit((unsigned char)hex[i]))
            return 0;
    if ((uint32_t)strtoul(hex, &end, 16) != fnv1a(p + 2, vlen))
        return 0;
    memcpy(val, p + 2, vlen);
    val[vlen] = '\0';
    return 1;
}

static void fsync_dir(void)
{
    int dir = open(".", O_RDONLY | O_DIRECTORY);
    if (dir < 0 || fsync(dir) < 0)
        die("fsync .");
    close(dir);
}

/* Read the log, take its last whole record, cut what follows it, make it durable. */
static void recover(void)
{
    int existed = access(LOG_FILE, F_OK) == 0;
    log_fd = open(LOG_FILE, O_RDWR | O_APPEND | O_CREAT, 0644);
    if (log_fd < 0)
        die(LOG_FILE);
    if (!existed)                 /* just created: make its name durable */
        fsync_dir();

    struct stat st;
    if (fstat(log_fd, &st) < 0)
        die("fstat " LOG_FILE);
    size_t size = (size_t)st.st_size, got = 0;
    char *data = malloc(size + 1);
    if (!data)
        die("malloc");
    while (got < size) {
        ssize_t n = pread(log_fd, data + got, size - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die("read " LOG_FILE);
        if (n == 0)
            break;                /* shorter than fstat said: take what is there */
        got += (size_t)n;
    }

    size_t good = 0;
    long records = 0;
    while (good < got) {
        char *nl = memchr(data + good, '\n', got - good);
        size_t n = nl ? (size_t)(nl - (data + good)) + 1 : 0;
        if (!nl || n > REC_MAX || !parse_record(data + good, n, value))
            break;                /* the end of what is whole */
        good += n;
        records++;
    }
    free(data);

    if (size > good) {            /* a torn append: cut it before anything follows it */
        if (ftruncate(log_fd, (off_t)good) < 0)
            die("truncate " LOG_FILE);
        printf("register: cut %zu byte(s) of a torn record\n", size - good);
    }
    if (fsync(log_fd) < 0)        /* what is served from now on is durable */
        die("fsync " LOG_FILE);
    const char *inc = getenv("CMC_INCARNATION");
    printf("register: recovered %s%s%s from %ld record(s)%s%s\n", value[0] ? "\"" : "",
           value[0] ? value : "nothing", value[0] ? "\"" : "", records,
           inc ? ", incarnation " : "", inc ? inc : "");
    emit_state();
}

static void log_append(const char *val)
{
    char rec[REC_MAX + 1];
    int n = snprintf(rec, sizeof rec, "v %s %08x\n", val, (unsigned)fnv1a(val, strlen(val)));
    if (n < 0 || (size_t)n >= sizeof rec) {
        errno = EINVAL;
        die("record");
    }
    if (write_all(log_fd, rec, (size_t)n) < 0)
        die("write " LOG_FILE);
}

/* ---- serving ---- */

static void close_conn(int slot)
{
    if (clients[slot].fd >= 0)
        close(clients[slot].fd);
    clients[slot] = (struct conn){ .fd = -1 };
    for (int i = 0; i < nbatch; i++)   /* its record stays in the batch, unanswered */
        if (batch[i].slot == slot)
            batch[i].slot = -1;
}

static void reply(int slot, const char *line)
{
    if (write_all(clients[slot].fd, line, strlen(line)) < 0)
        close_conn(slot);         /* the client went away: nothing more to tell it */
}

/* fsync the batch; then (correct build) the register takes its last value and its OKs
 * go out, in order. */
static void commit(void)
{
    if (fsync(log_fd) < 0)
        die("fsync " LOG_FILE);
    for (int i = 0; i < nbatch; i++) {
        int slot = batch[i].slot;
        memcpy(value, batch[i].val, sizeof value);
        if (slot < 0)
            continue;
        char out[VAL_LEN + 8];
        snprintf(out, sizeof out, "OK %.31s\n", batch[i].val);
        clients[slot].waiting = 0;
        reply(slot, out);
    }
    nbatch = 0;
}

static void handle_set(int slot, const char *val)
{
    log_append(val);
    struct pending *p = &batch[nbatch++];
    snprintf(p->val, sizeof p->val, "%s", val);
#ifdef BUG
    /* BUG: the write is in the page cache, not on the disk, and the client is told it
     * is done. The fsync still comes on the idle timer, too late for a crash before. */
    p->slot = -1;
    snprintf(value, sizeof value, "%s", val);
    char out[VAL_LEN + 8];
    snprintf(out, sizeof out, "OK %s\n", val);
    reply(slot, out);
#else
    p->slot = slot;
    clients[slot].waiting = 1;    /* its OK comes after the batch's fsync */
#endif
}

static void handle_request(int slot, const char *line)
{
    if (strncmp(line, "SET ", 4) == 0 && valid_value(line + 4, strlen(line + 4))) {
        handle_set(slot, line + 4);
        return;
    }
    char out[VAL_LEN + 16];
    if (strcmp(line, "GET") == 0 && value[0])
        snprintf(out, sizeof out, "VALUE %s\n", value);
    else if (strcmp(line, "GET") == 0)
        snprintf(out, sizeof out, "EMPTY\n");
    else if (strncmp(line, "SET ", 4) == 0)
        snprintf(out, sizeof out, "ERR bad value\n");
    else
        snprintf(out, sizeof out, "ERR unknown request\n");
    reply(slot, out);
}

/* Take one complete line out of c's buffer, without its line ending; 0 if none yet. */
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

/* One recv into c's buffer: > 0 bytes read, 0 at EOF, < 0 on a reset or a line too
 * long for the buffer. */
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

/* Act on the buffered requests of every connection that waits for no OK, while the
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
    for (;;) {
        drain();
        emit_state();
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
            struct sockaddr_in peer;
            socklen_t plen = sizeof peer;
            int fd = accept(lfd, (struct sockaddr *)&peer, &plen);
            int i = 0;
            while (i < MAX_CLIENTS && clients[i].fd >= 0)
                i++;
            if (fd >= 0 && i == MAX_CLIENTS) {
                close(fd);        /* too many clients */
            } else if (fd >= 0) {
                char ip[INET_ADDRSTRLEN] = "?";
                inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof ip);
                clients[i] = (struct conn){ .fd = fd };
                snprintf(clients[i].peer, sizeof clients[i].peer, "%s:%u", ip,
                         (unsigned)ntohs(peer.sin_port));
            }
        }
        for (int i = 0; i < MAX_CLIENTS; i++) {
            short ev = pfd[1 + i].revents;
            if (clients[i].fd < 0 || ev == 0)
                continue;
            if (clients[i].waiting)   /* not read: only a hangup or an error wakes it */
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
        fprintf(stderr, "register: bad address %s (want IP:PORT)\n", s);
        exit(2);
    }
    sa->sin_port = htons(port);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: register ADDR\n");
        return 2;
    }
    struct sockaddr_in addr;
    parse_addr(argv[1], &addr);

    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);  /* a line of output survives a SIGKILL after it */
    ensure_open(STATE_FD);
    for (int i = 0; i < MAX_CLIENTS; i++)
        clients[i].fd = -1;
    recover();

    int one = 1;
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(lfd, (const struct sockaddr *)&addr, sizeof addr) < 0 || listen(lfd, 16) < 0)
        die("listen");
    serve();
    return 0;
}
