/*
 * bgsave: a key-value store with a write-ahead log that compacts it by forking a
 * snapshot writer, the way Redis's BGSAVE and BGREWRITEAOF do.
 *
 *     bgsave ADDR [SAVE_EVERY [DELAY_MS]]
 *     e.g.  bgsave 127.0.0.1:7600 1 10        (defaults: 1 write, 10 ms)
 *
 * Clients send one request per line, answered in order:
 *
 *     SET <key> <int>  ->  OK <key> <int>        once the write is in the log, fsynced
 *     GET <key>        ->  VALUE <key> <int>  or  NONE <key>
 *
 * (a key is 1 to 15 letters, digits or '_'; anything else: ERR ...).
 *
 * Files in the working directory, each "key value" per line:
 *
 *     log           every write since the last snapshot (and possibly some before it),
 *                   appended and fsynced before the OK
 *     snapshot      the whole store as it was at some fork
 *     snapshot.tmp  the snapshot being written; log.tmp: the log being rewritten
 *
 * At start the server recovers: it removes the temp files, loads the snapshot, then
 * replays the log on top of it, in order. Replaying a write the snapshot already holds
 * is harmless (a SET overwrites), so at every moment snapshot + log must hold every
 * write that was acknowledged, and the log may only lose a record once a published
 * snapshot holds it.
 *
 * BGSAVE. After SAVE_EVERY writes since the last save began, and when no save runs,
 * the server forks. The child has the store as it was at the fork (copy-on-write), so
 * it needs no lock: it closes the listening socket (as Redis's child does), writes the
 * store to snapshot.tmp in chunks of CHUNK keys and sleeps DELAY_MS after each chunk
 * (Redis's rdb-key-save-delay: a slow disk; under a model checker the sleep is a
 * timeout that the checker fires when it chooses, so a CRASH can land while the child
 * runs), fsyncs the file, renames it to snapshot, fsyncs the directory and exits 0.
 * The parent goes on serving meanwhile: writes go to the log as always. It learns of
 * the child's end by SIGCHLD: the handler only sets a flag, and is installed without
 * SA_RESTART so that the parent's poll() returns EINTR; the loop then reaps the child
 * with waitpid() and, if it exited 0, cuts from the log the records written before the
 * fork (the snapshot has them), keeping those written since: the log is truncated when
 * it held nothing else, or rewritten as log.tmp, fsynced and renamed over log. Then,
 * if enough writes came in meanwhile, the next save starts at once.
 * (A SIGCHLD that arrives between the loop's look at the flag and poll() is seen one
 * request later: harmless, the log is only cut later. ppoll() with SIGCHLD blocked
 * outside it would close that window.)
 *
 * It is written the way such a program ships: blocking sockets, poll, files, fsync, one
 * thread, fork. It reports its state for a model checker after every change, as one JSON
 * line on fd 3, from the parent only (the child inherits fd 3 but never writes it: one
 * descriptor of the node, whose last line counts):
 *
 *     {"dirty":0,"kv":{"a":1},"log":[["a",1]],"saving":null,"snapshot":{}}
 *
 * kv is the store; log and snapshot what the files hold; dirty the writes since the
 * last save began; saving null, or {"covers":n,"kv":{...}} while a child writes a
 * snapshot: the store at the fork, which holds the first n records of the log. That is
 * canonical while a snapshot is one chunk (at most CHUNK keys), as in the model: the
 * child then is either asleep in its one sleep or gone, and the parent's state says
 * which. (For a larger store the child's progress through its chunks would be
 * missing.) Nothing is
 * written on fd 193: the files survive a crash, and the relaunched server reports what
 * it recovered from them on fd 3, so node[0] after a CRASH is what is durable.
 *
 * -DBUG plants a defect: the parent cuts the log as soon as it has forked, as if the
 * snapshot were already safe, instead of when the child has published it. A CRASH while
 * the child runs (it is asleep between chunks) leaves the old snapshot and a log
 * without the writes since: acknowledged writes are lost. Without a crash nothing shows
 * (the store in memory has everything), nor with a crash once the child is done.
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STATE_FD     3     /* in-memory state, one JSON line per change */
#define LOG_FILE     "log"
#define LOG_TMP      "log.tmp"
#define SNAP_FILE    "snapshot"
#define SNAP_TMP     "snapshot.tmp"
#define MAX_KEYS     64
#define MAX_LOG      1024
#define KEY_LEN      16    /* with its NUL */
#define CHUNK        16    /* keys the child writes between two sleeps */
#define MAX_CLIENTS  16
#define LINE_LEN     128

struct rec { char key[KEY_LEN]; long val; };
struct store { struct rec r[MAX_KEYS]; int n; };    /* sorted by key */

/* A connection and the bytes received on it that do not yet make a full line. */
struct conn { int fd; size_t len; char buf[LINE_LEN]; };

static struct store kv;          /* the store */
static struct store snap;        /* what the snapshot file holds */
static struct rec logrec[MAX_LOG]; /* what the log file holds, in order */
static int nlog;
static int log_fd = -1;
static int dirty;                /* writes since the last save began */

static pid_t child = -1;         /* the save running, or -1 */
static int covers;               /* records of the log the running save holds */
static struct store saving;      /* the store at its fork */
static volatile sig_atomic_t child_exited;

static int save_every = 1;
static long delay_ms = 10;
static int lfd = -1;
static struct conn clients[MAX_CLIENTS];

static void die(const char *what)
{
    fprintf(stderr, "bgsave: %s: %s\n", what, strerror(errno));
    exit(1);
}

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

static const struct rec *store_get(const struct store *s, const char *key)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->r[i].key, key) == 0)
            return &s->r[i];
    return NULL;
}

static void store_set(struct store *s, const char *key, long val)
{
    int i = 0;
    while (i < s->n && strcmp(s->r[i].key, key) < 0)
        i++;
    if (i < s->n && strcmp(s->r[i].key, key) == 0) {
        s->r[i].val = val;
        return;
    }
    if (s->n == MAX_KEYS) {
        errno = ENOSPC;
        die("store full");
    }
    memmove(&s->r[i + 1], &s->r[i], (size_t)(s->n - i) * sizeof s->r[0]);
    snprintf(s->r[i].key, KEY_LEN, "%s", key);
    s->r[i].val = val;
    s->n++;
}

/* "key value" -> 1, else 0 (also for a line that is not one: a torn last line). */
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

static int json_store(char *out, size_t cap, const struct store *s)
{
    int n = snprintf(out, cap, "{");
    for (int i = 0; i < s->n; i++)
        n += snprintf(out + n, cap - n, "%s\"%s\":%ld", i ? "," : "", s->r[i].key, s->r[i].val);
    return n + snprintf(out + n, cap - n, "}");
}

/* One canonical JSON line, keys sorted, in one write(2). */
static void emit_state(void)
{
    static char line[256 + (MAX_LOG + 2 * MAX_KEYS) * 48];
    size_t cap = sizeof line;
    int n = snprintf(line, cap, "{\"dirty\":%d,\"kv\":", dirty);
    n += json_store(line + n, cap - n, &kv);
    n += snprintf(line + n, cap - n, ",\"log\":[");
    for (int i = 0; i < nlog; i++)
        n += snprintf(line + n, cap - n, "%s[\"%s\",%ld]", i ? "," : "", logrec[i].key,
                      logrec[i].val);
    n += snprintf(line + n, cap - n, "],\"saving\":");
    if (child > 0) {
        n += snprintf(line + n, cap - n, "{\"covers\":%d,\"kv\":", covers);
        n += json_store(line + n, cap - n, &saving);
        n += snprintf(line + n, cap - n, "}");
    } else
        n += snprintf(line + n, cap - n, "null");
    n += snprintf(line + n, cap - n, ",\"snapshot\":");
    n += json_store(line + n, cap - n, &snap);
    n += snprintf(line + n, cap - n, "}\n");
    write_all(STATE_FD, line, (size_t)n);   /* a lost state line must not stop the node */
}

/* ---- recovery ---- */

/* Read a file of records into *s (and, for the log, into logrec). The length of the
 * part made of whole lines, or -1 if there is no such file. */
static long load(const char *path, struct store *s, int is_log)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[LINE_LEN];
    long good = 0;
    struct rec r;
    while (fgets(line, sizeof line, f) && strchr(line, '\n')) {
        *strchr(line, '\n') = '\0';
        if (!parse_rec(line, &r))
            break;
        store_set(s, r.key, r.val);
        if (is_log) {
            if (nlog == MAX_LOG) {
                errno = ENOSPC;
                die("log full");
            }
            logrec[nlog++] = r;
        }
        good = ftell(f);
    }
    fclose(f);
    return good;
}

static void recover(void)
{
    unlink(SNAP_TMP);             /* a save that a crash interrupted */
    unlink(LOG_TMP);              /* a log rewrite that a crash interrupted */
    load(SNAP_FILE, &snap, 0);
    kv = snap;
    long good = load(LOG_FILE, &kv, 1);
    log_fd = open(LOG_FILE, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (log_fd < 0 || ftruncate(log_fd, good < 0 ? 0 : good) < 0)   /* cut a torn append */
        die(LOG_FILE);
    if (good < 0)                 /* just created: make its directory entry durable */
        fsync_dir();
    const char *inc = getenv("CMC_INCARNATION");
    printf("bgsave: recovered %d key(s), %d from the snapshot, %d log record(s)%s%s\n",
           kv.n, snap.n, nlog, inc ? ", incarnation " : "", inc ? inc : "");
    emit_state();
}

/* ---- the log ---- */

static void log_append(const char *key, long val)
{
    char line[LINE_LEN];
    int n = snprintf(line, sizeof line, "%s %ld\n", key, val);
    if (nlog == MAX_LOG) {
        errno = ENOSPC;
        die("log full");
    }
    if (write_all(log_fd, line, (size_t)n) < 0 || fsync(log_fd) < 0)
        die(LOG_FILE);
    snprintf(logrec[nlog].key, KEY_LEN, "%s", key);
    logrec[nlog++].val = val;
}

/* Cut the first n records from the log: they are (or, in the BUG build, are about to
 * be) in the snapshot. The records after them stay, durably, before the cut. */
static void log_cut(int n)
{
    if (n == 0)
        return;
    if (n == nlog) {
        if (ftruncate(log_fd, 0) < 0 || fsync(log_fd) < 0)
            die("truncate " LOG_FILE);
    } else {
        int fd = open(LOG_TMP, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0)
            die(LOG_TMP);
        for (int i = n; i < nlog; i++) {
            char line[LINE_LEN];
            int len = snprintf(line, sizeof line, "%s %ld\n", logrec[i].key, logrec[i].val);
            if (write_all(fd, line, (size_t)len) < 0)
                die(LOG_TMP);
        }
        if (fsync(fd) < 0 || close(fd) < 0 || rename(LOG_TMP, LOG_FILE) < 0)
            die("rewrite " LOG_FILE);
        fsync_dir();
        close(log_fd);
        log_fd = open(LOG_FILE, O_WRONLY | O_APPEND);
        if (log_fd < 0)
            die(LOG_FILE);
    }
    memmove(logrec, logrec + n, (size_t)(nlog - n) * sizeof logrec[0]);
    nlog -= n;
    printf("bgsave: cut %d record(s) from the log, %d left\n", n, nlog);
}

/* ---- the snapshot child ---- */

static void child_sleep(void)
{
    struct timespec t = { delay_ms / 1000, (delay_ms % 1000) * 1000000L };
    while (nanosleep(&t, &t) < 0 && errno == EINTR)
        ;
}

/* In the child: write the store as it was at the fork, publish it, exit. Never returns. */
static void child_save(void)
{
    signal(SIGCHLD, SIG_DFL);
    close(lfd);                   /* the child serves nobody; its client descriptors
                                   * are closed when it exits */
    int fd = open(SNAP_TMP, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        _exit(1);
    for (int i = 0; i < kv.n || i == 0; i += CHUNK) {
        for (int j = i; j < kv.n && j < i + CHUNK; j++) {
            char line[LINE_LEN];
            int len = snprintf(line, sizeof line, "%s %ld\n", kv.r[j].key, kv.r[j].val);
            if (write_all(fd, line, (size_t)len) < 0)
                _exit(1);
        }
        child_sleep();            /* rdb-key-save-delay: a slow disk */
    }
    if (fsync(fd) < 0 || close(fd) < 0 || rename(SNAP_TMP, SNAP_FILE) < 0)
        _exit(1);
    int dir = open(".", O_RDONLY | O_DIRECTORY);
    if (dir < 0 || fsync(dir) < 0)
        _exit(1);
    _exit(0);                     /* not exit(): no atexit handlers, no stdio flush */
}

static void on_sigchld(int sig)
{
    (void)sig;
    child_exited = 1;
}

/* Start a save if enough writes came in and none runs. */
static void maybe_bgsave(void)
{
    if (child > 0 || dirty < save_every)
        return;
    pid_t pid = fork();
    if (pid < 0) {
        perror("bgsave: fork");   /* try again after the next write */
        return;
    }
    if (pid == 0)
        child_save();
    child = pid;
    covers = nlog;
    saving = kv;
    dirty = 0;
    printf("bgsave: saving %d key(s) in the background\n", kv.n);
#ifdef BUG
    /* BUG: the log is cut at the fork, as if the snapshot were already safe. Until the
     * child has renamed it into place, a crash leaves the old snapshot and this log. */
    log_cut(covers);
    covers = 0;
#endif
    emit_state();
}

/* After SIGCHLD: reap the save; if it succeeded, its snapshot is published. */
static void reap(void)
{
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        if (pid != child)
            continue;
        child = -1;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            snap = saving;
            printf("bgsave: snapshot of %d key(s) saved\n", snap.n);
            log_cut(covers);     /* BUG build: covers is 0, the log was cut at the fork */
        } else {              /* the log keeps everything; the next save, after
                                   * SAVE_EVERY more writes, saves the whole store */
            printf("bgsave: background save failed (status %#x)\n", st);
        }
        covers = 0;
        emit_state();
    }
}

/* ---- serving ---- */

/* Send a whole line. MSG_NOSIGNAL: a reset peer is an error here, not a SIGPIPE. */
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

static void handle_request(struct conn *c, const char *line)
{
    char out[LINE_LEN + 32], key[LINE_LEN];
    struct rec r;
    if (strncmp(line, "SET ", 4) == 0 && parse_rec(line + 4, &r)) {
        log_append(r.key, r.val);         /* durable first ... */
        store_set(&kv, r.key, r.val);
        dirty++;
        emit_state();
        snprintf(out, sizeof out, "OK %s %ld\n", r.key, r.val);   /* ... then the OK */
    } else if (sscanf(line, "GET %127s", key) == 1 && valid_key(key)) {
        const struct rec *p = store_get(&kv, key);
        if (p)
            snprintf(out, sizeof out, "VALUE %s %ld\n", key, p->val);
        else
            snprintf(out, sizeof out, "NONE %s\n", key);
    } else {
        snprintf(out, sizeof out, "ERR unknown request\n");
    }
    if (send_line(c->fd, out) < 0)
        close_conn(c);            /* the client went away: nothing more to tell it */
}

static void serve(void)
{
    for (int i = 0; i < MAX_CLIENTS; i++)
        clients[i].fd = -1;
    for (;;) {
        if (child_exited) {       /* set by SIGCHLD, which ended poll() with EINTR */
            child_exited = 0;
            reap();
        }
        maybe_bgsave();

        struct pollfd pfd[1 + MAX_CLIENTS];
        pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        for (int i = 0; i < MAX_CLIENTS; i++)   /* slot i is pfd[1 + i]; fd -1: unused */
            pfd[1 + i] = (struct pollfd){ .fd = clients[i].fd, .events = POLLIN };
        if (poll(pfd, 1 + MAX_CLIENTS, -1) < 0) {
            if (errno == EINTR)
                continue;         /* a SIGCHLD: the loop's top reaps */
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
    if (argc < 2 || argc > 4 || (argc > 2 && (save_every = atoi(argv[2])) < 1) ||
        (argc > 3 && (delay_ms = atol(argv[3])) < 0)) {
        fprintf(stderr, "usage: bgsave ADDR [SAVE_EVERY (>= 1) [DELAY_MS]]\n");
        return 2;
    }
    struct sockaddr_in addr;
    parse_addr(argv[1], &addr);

    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = { .sa_handler = on_sigchld, .sa_flags = SA_NOCLDSTOP };
    sigemptyset(&sa.sa_mask);     /* no SA_RESTART: SIGCHLD ends a blocked poll, EINTR */
    if (sigaction(SIGCHLD, &sa, NULL) < 0)
        die("sigaction");
    setvbuf(stdout, NULL, _IOLBF, 0);  /* a line of output survives a SIGKILL after it,
                                        * and no buffered output is copied into a child */
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
