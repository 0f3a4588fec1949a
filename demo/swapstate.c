/*
 * swapstate: a key-value store that keeps its whole map in one file and replaces that
 * file atomically on every write: write a temp file, fsync it, rename it over the old
 * one, fsync the directory. That is how many programs save a small state (git's refs
 * and index, editors, config stores, Kafka's and ZooKeeper's small metadata files).
 *
 *     swapstate ADDR
 *     e.g.  swapstate 127.0.0.1:7710
 *
 * Clients send one request per line, answered in order:
 *
 *     SET <key> <int>  ->  OK <key> <int>        once the new map is durably in place
 *     GET <key>        ->  VALUE <key> <int>  or  NONE <key>
 *
 * (a key is 1 to 15 letters, digits or '_'; anything else: ERR ...).
 *
 * Files in the working directory, each "key value" per line:
 *
 *     state      the whole map, as of the last acknowledged write
 *     state.tmp  the next map being written (gone once renamed)
 *
 * A SET writes the new map to state.tmp, fsyncs it, renames it to state, and fsyncs
 * the directory: the rename changes the directory, and only the directory's fsync makes
 * the new name durable (a file system may otherwise come back from a crash with the old
 * state, or with none when there was none). Then the OK. At start the server removes a
 * leftover state.tmp (a save that a crash interrupted) and loads state if there is one.
 *
 * It is written the way such a program ships: blocking sockets, poll, files, fsync, one
 * thread. It reports its state for a model checker after every change (and right after
 * recovery), as one JSON line on fd 3:
 *
 *     {"kv":{"a":1,"b":2}}
 *
 * Nothing is written on fd 193: the files are the only durable state, and what of them
 * survives a CRASH is decided by the checker's disk model; the relaunched server
 * reports what it recovered on fd 3.
 *
 * -DBUG plants a defect: the directory is not fsynced after the rename. On a file system
 * that orders metadata (ext4 with data=ordered, or a checker whose disk makes a name
 * durable at once) nothing shows; on one where a rename is durable only once its
 * directory is fsynced, a CRASH after the OK brings back the old state, or none: an
 * acknowledged write is lost.
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
#define STATE_FILE   "state"
#define STATE_TMP    "state.tmp"
#define MAX_KEYS     64
#define KEY_LEN      16    /* with its NUL */
#define MAX_CLIENTS  16
#define LINE_LEN     128

struct rec { char key[KEY_LEN]; long val; };
struct store { struct rec r[MAX_KEYS]; int n; };    /* sorted by key */

/* A connection and the bytes received on it that do not yet make a full line. */
struct conn { int fd; size_t len; char buf[LINE_LEN]; };

static struct store kv;
static int lfd = -1;
static struct conn clients[MAX_CLIENTS];

static void die(const char *what)
{
    fprintf(stderr, "swapstate: %s: %s\n", what, strerror(errno));
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
    char line[32 + MAX_KEYS * 48];
    size_t cap = sizeof line;
    int n = snprintf(line, cap, "{\"kv\":{");
    for (int i = 0; i < kv.n; i++)
        n += snprintf(line + n, cap - n, "%s\"%s\":%ld", i ? "," : "", kv.r[i].key,
                      kv.r[i].val);
    n += snprintf(line + n, cap - n, "}}\n");
    write_all(STATE_FD, line, (size_t)n);   /* a lost state line must not stop the node */
}

/* ---- the file ---- */

static void recover(void)
{
    if (unlink(STATE_TMP) == 0)   /* a save that a crash interrupted */
        fsync_dir();
    else if (errno != ENOENT)
        die("unlink " STATE_TMP);
    FILE *f = fopen(STATE_FILE, "r");
    if (f) {
        char line[LINE_LEN];
        struct rec r;
        /* The file was fsynced before it got its name: it is whole. */
        while (fgets(line, sizeof line, f) && strchr(line, '\n')) {
            *strchr(line, '\n') = '\0';
            if (!parse_rec(line, &r)) {
                fprintf(stderr, "swapstate: %s: not a record: %s\n", STATE_FILE, line);
                exit(1);
            }
            store_set(r.key, r.val);
        }
        fclose(f);
    } else if (errno != ENOENT) {
        die(STATE_FILE);
    }
    const char *inc = getenv("CMC_INCARNATION");
    printf("swapstate: recovered %d key(s)%s%s%s\n", kv.n, f ? "" : " (no state file)",
           inc ? ", incarnation " : "", inc ? inc : "");
    emit_state();
}

/* Replace the state file by the map in memory. */
static void save(void)
{
    int fd = open(STATE_TMP, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        die(STATE_TMP);
    for (int i = 0; i < kv.n; i++) {
        char line[LINE_LEN];
        int len = snprintf(line, sizeof line, "%s %ld\n", kv.r[i].key, kv.r[i].val);
        if (write_all(fd, line, (size_t)len) < 0)
            die(STATE_TMP);
    }
    if (fsync(fd) < 0 || close(fd) < 0)
        die(STATE_TMP);
    if (rename(STATE_TMP, STATE_FILE) < 0)
        die("rename " STATE_TMP);
#ifdef BUG
    /* BUG: the rename is not made durable: the directory is not fsynced. */
#else
    fsync_dir();
#endif
}

/* ---- serving ---- */

static void close_conn(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->len = 0;
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

static void handle_request(struct conn *c, const char *line)
{
    char out[LINE_LEN + 32], key[LINE_LEN];
    struct rec r;
    if (strncmp(line, "SET ", 4) == 0 && parse_rec(line + 4, &r)) {
        store_set(r.key, r.val);
        save();                   /* durable first ... */
        emit_state();
        snprintf(out, sizeof out, "OK %s %ld\n", r.key, r.val);   /* ... then the OK */
    } else if (sscanf(line, "GET %127s", key) == 1 && valid_key(key)) {
        const struct rec *p = store_get(key);
        if (p)
            snprintf(out, sizeof out, "VALUE %s %ld\n", key, p->val);
        else
            snprintf(out, sizeof out, "NONE %s\n", key);
    } else {
        snprintf(out, sizeof out, "ERR unknown request\n");
    }
    if (write_all(c->fd, out, strlen(out)) < 0)
        close_conn(c);            /* the client went away: nothing more to tell it */
}

static void serve(void)
{
    for (int i = 0; i < MAX_CLIENTS; i++)
        clients[i].fd = -1;
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
        fprintf(stderr, "usage: swapstate ADDR\n");
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
