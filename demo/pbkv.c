/*
 * pbkv: a primary/backup key-value store that serves writes at the primary and reads
 * at the backup, the read-scaling arrangement of many replicated stores (a MySQL or
 * PostgreSQL read replica, a Redis replica taking reads).
 *
 *     pbkv primary LISTEN BACKUP     e.g.  pbkv primary 127.0.0.1:7801 127.0.0.1:7802
 *     pbkv backup  LISTEN            e.g.  pbkv backup  127.0.0.1:7802
 *
 * Both nodes are this one binary. Clients send one request per line and get one line
 * back for each, in order:
 *
 *     to the primary:  SET <key> <val>  ->  OK <key> <val>
 *     to the backup:   GET <key>        ->  VALUE <key> <val>  or  NONE <key>
 *
 * (a key or a value is 1 to 15 letters, digits, '_' or '-', kept as text; a request the
 * node does not serve: ERR ...).
 *
 * Replication. At start the primary listens (so clients can queue), then opens one TCP
 * connection to the backup (a blocking connect, retried a few times while it is
 * refused) and keeps it for its lifetime. Every write the primary takes gets the next
 * sequence number; the primary applies it to its own store, appends it to its log and
 * forwards it on that connection as
 *
 *     REPL <seq> <key> <val>   ->   ACK <seq>
 *
 * The backup applies a REPL whose seq is the next one it expects, appends it to its
 * log and answers ACK; one it has already applied (a resend) is ACKed again, unapplied;
 * one past a gap is refused (ERR). ACKs come back in order, so the primary's writes
 * awaiting an ACK are a queue. The client's OK is sent when its write's ACK arrives:
 * then every acknowledged write is in the backup's store, and a read at the backup
 * that starts after a write was acknowledged sees that write or a later one, so the
 * store's reads and writes are linearizable. A client connection waiting for its OK is
 * not read meanwhile. If the backup connection breaks the primary stops taking writes
 * (ERR no backup) and tells the writes still waiting for an ACK the same; there is no
 * failover here.
 *
 * Written the way such a program ships: blocking sockets, poll, line buffering, one
 * thread. After every change each node reports its state on fd 3 as one JSON line,
 * keys sorted; the primary's
 *
 *     {"backup":"up","kv":{"x":"2"},"log":[{"key":"x","seq":1,"val":"1"},
 *      {"key":"x","seq":2,"val":"2"}],"role":"primary","unacked":[{"conn":0,"seq":2}]}
 *
 * (backup: "connecting", "up" or "down"; log: every write applied, in order; unacked:
 * the writes sent to the backup and not yet ACKed, in order, each with the client slot
 * whose OK waits for that ACK, or null when none does), and the backup's
 *
 *     {"kv":{"x":"1"},"log":[{"key":"x","seq":1,"val":"1"}],"role":"backup"}
 *
 * Nothing else decides what a node does next: lines are handled as soon as they are
 * whole, so no bytes wait in a buffer between steps. Nothing goes to fd 193: the store
 * is in memory only.
 *
 * -DBUG plants the defect: the primary answers OK as soon as it has applied the write
 * itself and sent the REPL, without waiting for the ACK ("the backup will have it in a
 * moment"). A read at the backup that starts after that OK but is served before the
 * REPL arrives returns the old value: a stale read of an acknowledged write. No fault
 * is needed, only that order of deliveries. Nothing in the nodes' states is wrong on
 * its own (the backup still applies the primary's writes in order, and nothing the
 * backup has is unACKed by mistake); only the history of requests and replies, when
 * each OK came and when each read began, tells the builds apart.
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
#include <time.h>
#include <unistd.h>

#define STATE_FD      3     /* in-memory state, one JSON line per change */
#define TOKEN_LEN     16    /* a key or a value, with its NUL */
#define MAX_KEYS      64
#define MAX_LOG       256   /* writes a node takes in its lifetime */
#define MAX_CLIENTS   16
#define LINE_LEN      128
#define CONNECT_TRIES 3     /* refused connects to the backup, 100 ms apart */

struct entry { char key[TOKEN_LEN]; char val[TOKEN_LEN]; };
struct store { struct entry e[MAX_KEYS]; int n; };      /* sorted by key */

/* A connection, the bytes received on it that do not yet make a full line, and
 * whether it waits for an OK. */
struct conn { int fd; int waiting; size_t len; char buf[LINE_LEN]; };

/* A write sent to the backup and not yet ACKed, and the client slot its OK goes to
 * (-1: none). */
struct pending { long seq; int slot; };

static int is_primary;
static struct store kv;
static struct entry wlog[MAX_LOG];   /* wlog[i] has seq i + 1 */
static long nlog;
static struct pending unacked[MAX_LOG];
static int nunacked;
static const char *backup_state = "connecting";
static struct conn backup = { .fd = -1 };
static struct conn clients[MAX_CLIENTS];
static int lfd = -1;

static void die(const char *what)
{
    fprintf(stderr, "pbkv: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* Outside a checker fd 3 may be closed: point it at /dev/null, so that no socket
 * takes that number and receives state lines. */
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

/* Send a whole line. MSG_NOSIGNAL: a reset peer is an error here, not a SIGPIPE. */
static int send_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
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

/* ---- the store and the log ---- */

static int valid_token(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= TOKEN_LEN)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
            return 0;
    return 1;
}

static const struct entry *store_get(const char *key)
{
    for (int i = 0; i < kv.n; i++)
        if (strcmp(kv.e[i].key, key) == 0)
            return &kv.e[i];
    return NULL;
}

static void store_set(const char *key, const char *val)
{
    int i = 0;
    while (i < kv.n && strcmp(kv.e[i].key, key) < 0)
        i++;
    if (i == kv.n || strcmp(kv.e[i].key, key) != 0) {
        memmove(&kv.e[i + 1], &kv.e[i], (size_t)(kv.n - i) * sizeof kv.e[0]);
        snprintf(kv.e[i].key, TOKEN_LEN, "%s", key);
        kv.n++;
    }
    snprintf(kv.e[i].val, TOKEN_LEN, "%s", val);
}

/* Apply a write and append it to the log: it gets seq nlog. */
static void apply(const char *key, const char *val)
{
    store_set(key, val);
    snprintf(wlog[nlog].key, TOKEN_LEN, "%s", key);
    snprintf(wlog[nlog].val, TOKEN_LEN, "%s", val);
    nlog++;
}

/* There is room for one more write (a key may be new, the log grows by one). */
static int room(void)
{
    return kv.n < MAX_KEYS && nlog < MAX_LOG;
}

/* ---- the state line ---- */

/* One canonical JSON line, keys sorted, in one write(2). Tokens need no escaping. */
static void emit_state(void)
{
    static char line[256 + MAX_KEYS * 40 + MAX_LOG * 64 + MAX_LOG * 32];
    size_t cap = sizeof line;
    int n = 0;
    n += snprintf(line + n, cap - n, "{");
    if (is_primary)
        n += snprintf(line + n, cap - n, "\"backup\":\"%s\",", backup_state);
    n += snprintf(line + n, cap - n, "\"kv\":{");
    for (int i = 0; i < kv.n; i++)
        n += snprintf(line + n, cap - n, "%s\"%s\":\"%s\"", i ? "," : "", kv.e[i].key,
                      kv.e[i].val);
    n += snprintf(line + n, cap - n, "},\"log\":[");
    for (long i = 0; i < nlog; i++)
        n += snprintf(line + n, cap - n, "%s{\"key\":\"%s\",\"seq\":%ld,\"val\":\"%s\"}",
                      i ? "," : "", wlog[i].key, i + 1, wlog[i].val);
    n += snprintf(line + n, cap - n, "],\"role\":\"%s\"", is_primary ? "primary" : "backup");
    if (is_primary) {
        n += snprintf(line + n, cap - n, ",\"unacked\":[");
        for (int i = 0; i < nunacked; i++) {
            char conn[16] = "null";
            if (unacked[i].slot >= 0)
                snprintf(conn, sizeof conn, "%d", unacked[i].slot);
            n += snprintf(line + n, cap - n, "%s{\"conn\":%s,\"seq\":%ld}", i ? "," : "",
                          conn, unacked[i].seq);
        }
        n += snprintf(line + n, cap - n, "]");
    }
    n += snprintf(line + n, cap - n, "}\n");
    /* A lost state line must not stop the node. */
    for (char *p = line; n > 0;) {
        ssize_t w = write(STATE_FD, p, (size_t)n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        p += w;
        n -= (int)w;
    }
}

/* ---- connections ---- */

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
    ssize_t n;
    do
        n = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
    while (n < 0 && errno == EINTR);
    if (n > 0)
        c->len += (size_t)n;
    return n;
}

static void close_client(int slot)
{
    if (clients[slot].fd >= 0)
        close(clients[slot].fd);
    clients[slot] = (struct conn){ .fd = -1 };
    int changed = 0;
    for (int i = 0; i < nunacked; i++)   /* its writes stay queued, unanswered */
        if (unacked[i].slot == slot) {
            unacked[i].slot = -1;
            changed = 1;
        }
    if (changed)
        emit_state();
}

static void reply(int slot, const char *line)
{
    if (clients[slot].fd >= 0 && send_all(clients[slot].fd, line, strlen(line)) < 0)
        close_client(slot);       /* the client went away: nothing more to tell it */
}

static void parse_addr(const char *s, struct sockaddr_in *sa)
{
    char host[64];
    unsigned short port;
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    if (sscanf(s, "%63[^:]:%hu", host, &port) != 2 ||
        inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
        fprintf(stderr, "pbkv: bad address %s (want IP:PORT)\n", s);
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

static void accept_client(void)
{
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0)
        return;
    int i = 0;
    while (i < MAX_CLIENTS && clients[i].fd >= 0)
        i++;
    if (i == MAX_CLIENTS)
        close(fd);                /* too many clients */
    else
        clients[i] = (struct conn){ .fd = fd };
}

/* ---- the primary ---- */

static void connect_backup(const struct sockaddr_in *sa)
{
    static const struct timespec pause = { 0, 100 * 1000 * 1000 };
    for (int i = 0; i < CONNECT_TRIES; i++) {
        if (i > 0)
            nanosleep(&pause, NULL);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0)
            die("socket");
        if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) == 0) {
            backup = (struct conn){ .fd = fd };
            backup_state = "up";
            printf("primary: connected to the backup\n");
            emit_state();
            return;
        }
        close(fd);
    }
    backup_state = "down";
    printf("primary: backup unreachable; not taking writes\n");
    emit_state();
}

/* The backup connection is gone: fail every write still waiting for its ACK. */
static void lose_backup(void)
{
    if (backup.fd >= 0)
        close(backup.fd);
    backup = (struct conn){ .fd = -1 };
    backup_state = "down";
    printf("primary: lost the backup; not taking writes\n");
    for (int i = 0; i < nunacked; i++) {
        int slot = unacked[i].slot;
        if (slot < 0)
            continue;
        clients[slot].waiting = 0;
        reply(slot, "ERR no backup\n");
    }
    nunacked = 0;
    emit_state();
}

static void primary_request(int slot, const char *line)
{
    char key[LINE_LEN], val[LINE_LEN], tail, out[2 * LINE_LEN + 64];
    if (sscanf(line, "SET %127s %127s%c", key, val, &tail) != 2 || !valid_token(key) ||
        !valid_token(val)) {
        reply(slot, strncmp(line, "GET ", 4) == 0 ? "ERR reads go to the backup\n"
                                                  : "ERR unknown request\n");
        return;
    }
    if (backup.fd < 0) {
        reply(slot, "ERR no backup\n");
        return;
    }
    if (!room()) {
        reply(slot, "ERR full\n");
        return;
    }
    apply(key, val);
    snprintf(out, sizeof out, "REPL %ld %s %s\n", nlog, key, val);
    if (send_all(backup.fd, out, strlen(out)) < 0) {
        emit_state();             /* applied here, then the backup went away */
        reply(slot, "ERR no backup\n");
        lose_backup();
        return;
    }
#ifdef BUG
    /* BUG: the write is applied here and on its way to the backup, so it is taken as
     * done: the OK goes out now, and the ACK only leaves the queue. */
    unacked[nunacked++] = (struct pending){ .seq = nlog, .slot = -1 };
    emit_state();
    snprintf(out, sizeof out, "OK %s %s\n", key, val);
    reply(slot, out);
#else
    unacked[nunacked++] = (struct pending){ .seq = nlog, .slot = slot };
    clients[slot].waiting = 1;    /* its OK comes with the backup's ACK */
    emit_state();
#endif
}

/* An ACK from the backup: the oldest write in the queue is on the backup now. */
static void primary_ack(const char *line)
{
    char *end;
    long seq;
    if (strncmp(line, "ACK ", 4) != 0 ||
        (errno = 0, seq = strtol(line + 4, &end, 10), *end != '\0' || errno != 0) ||
        nunacked == 0 || seq != unacked[0].seq) {
        fprintf(stderr, "pbkv: unexpected line from the backup: %s\n", line);
        lose_backup();
        return;
    }
    int slot = unacked[0].slot;
    const struct entry *w = &wlog[seq - 1];
    memmove(&unacked[0], &unacked[1], (size_t)(nunacked - 1) * sizeof unacked[0]);
    nunacked--;
    emit_state();
    if (slot >= 0) {
        char out[LINE_LEN];
        snprintf(out, sizeof out, "OK %s %s\n", w->key, w->val);
        clients[slot].waiting = 0;
        reply(slot, out);
    }
}

/* ---- the backup ---- */

static void backup_request(int slot, const char *line)
{
    char key[LINE_LEN], val[LINE_LEN], tail, out[2 * LINE_LEN + 64];
    long seq;
    if (sscanf(line, "REPL %ld %127s %127s%c", &seq, key, val, &tail) == 3 &&
        valid_token(key) && valid_token(val)) {
        if (seq == nlog + 1) {
            if (!room()) {
                reply(slot, "ERR full\n");
                return;
            }
            apply(key, val);
            emit_state();
        } else if (seq < 1 || seq > nlog) {   /* a gap: refuse it */
            snprintf(out, sizeof out, "ERR expected seq %ld\n", nlog + 1);
            reply(slot, out);
            return;
        }                         /* else a resend of a write already here: ACK again */
        snprintf(out, sizeof out, "ACK %ld\n", seq);
        reply(slot, out);
        return;
    }
    if (sscanf(line, "GET %127s%c", key, &tail) == 1 && valid_token(key)) {
        const struct entry *e = store_get(key);
        if (e)
            snprintf(out, sizeof out, "VALUE %s %s\n", key, e->val);
        else
            snprintf(out, sizeof out, "NONE %s\n", key);
        reply(slot, out);
        return;
    }
    reply(slot, strncmp(line, "SET ", 4) == 0 ? "ERR writes go to the primary\n"
                                              : "ERR unknown request\n");
}

/* ---- serving ---- */

/* Answer the buffered requests of every client connection that waits for no OK. */
static void drain(void)
{
    for (int i = 0; i < MAX_CLIENTS; i++) {
        char line[LINE_LEN];
        while (clients[i].fd >= 0 && !clients[i].waiting &&
               take_line(&clients[i], line, sizeof line)) {
            if (is_primary)
                primary_request(i, line);
            else
                backup_request(i, line);
        }
    }
}

static void serve(void)
{
    for (;;) {
        drain();
        struct pollfd pfd[2 + MAX_CLIENTS];
        pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        pfd[1] = (struct pollfd){ .fd = backup.fd, .events = POLLIN };  /* -1: none */
        for (int i = 0; i < MAX_CLIENTS; i++)   /* slot i is pfd[2 + i]; fd -1: unused */
            pfd[2 + i] = (struct pollfd){ .fd = clients[i].fd,
                                          .events = clients[i].waiting ? 0 : POLLIN };
        if (poll(pfd, 2 + MAX_CLIENTS, -1) < 0) {
            if (errno == EINTR)
                continue;
            die("poll");
        }
        if (pfd[0].revents & POLLIN)
            accept_client();
        if (backup.fd >= 0 && pfd[1].revents) {
            char line[LINE_LEN];
            if (fill(&backup) <= 0)
                lose_backup();
            while (backup.fd >= 0 && take_line(&backup, line, sizeof line))
                primary_ack(line);
        }
        for (int i = 0; i < MAX_CLIENTS; i++) {
            short ev = pfd[2 + i].revents;
            if (clients[i].fd < 0 || ev == 0)
                continue;
            if (clients[i].waiting)   /* not read: only a hangup wakes it */
                close_client(i);
            else if (fill(&clients[i]) <= 0)   /* EOF, reset, or a line too long */
                close_client(i);
        }
    }
}

int main(int argc, char **argv)
{
    struct sockaddr_in self, peer;
    if (argc == 4 && strcmp(argv[1], "primary") == 0) {
        is_primary = 1;
        parse_addr(argv[2], &self);
        parse_addr(argv[3], &peer);
    } else if (argc == 3 && strcmp(argv[1], "backup") == 0) {
        parse_addr(argv[2], &self);
    } else {
        fprintf(stderr, "usage: pbkv primary LISTEN BACKUP | pbkv backup LISTEN\n");
        return 2;
    }

    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    ensure_open(STATE_FD);
    for (int i = 0; i < MAX_CLIENTS; i++)
        clients[i].fd = -1;
    emit_state();

    lfd = listen_on(&self);       /* first, so clients can queue while we connect */
    if (is_primary)
        connect_backup(&peer);
    printf("%s: serving on %s\n", argv[1], argv[2]);
    serve();
    return 0;
}
