/*
 * twopc: two-phase commit with a coordinator and two participants, each with a durable
 * log, and presumed abort.
 *
 *     twopc INDEX ADDR0 ADDR1 ADDR2
 *     e.g.  twopc 0 127.0.0.1:7300 127.0.0.1:7301 127.0.0.1:7302
 *     (0: the coordinator, 1 and 2: the participants; each listens on its own address)
 *
 * Clients talk to the coordinator, one request per line:
 *
 *     TX <id>  ->  COMMITTED <id>  |  ABORTED <id>
 *
 * The coordinator keeps one connection to each participant, opened at startup (and
 * reopened when it breaks). A participant greets every new coordinator connection with
 * "HELLO" and the transactions it has prepared but not seen decided; the coordinator
 * answers each from its decision log: COMMIT if the log has the commit, else ABORT
 * (presumed abort: no record means abort).
 *
 * A transaction: the coordinator sends "PREPARE id" to both participants; a participant
 * appends "P id" to its log, fsyncs, and votes "YES id" (it votes "NO id" for a
 * transaction it has already aborted). With two YES votes the coordinator decides
 * commit: it appends "C id" to its decision log and fsyncs, tells the client COMMITTED,
 * sends "COMMIT id" to both participants and waits for their "ACK id" (each logs
 * "C id" and fsyncs first). A vote that cannot be had (a participant down, a broken
 * connection) means abort: ABORTED to the client, ABORT to the participants. Nothing
 * is logged for an abort.
 *
 * It is written the way such a program ships: blocking sockets, poll, files, fsync, no
 * threads. It reports its state for a model checker, which costs nothing outside one:
 * after every change, the in-memory state as one JSON line on fd 3; after every fsync,
 * the on-disk state as one JSON line on fd 193.
 *
 * -DBUG plants a defect: the coordinator writes its commit record at the end of the
 * transaction, once the participants have acknowledged the COMMIT (one write, it
 * reasons, where the textbook has two), but tells the client COMMITTED as soon as it
 * decides. A coordinator crash in between restarts with no record of the commit, and
 * presumed abort aborts the transaction the client was told is committed. Without a
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
#include <unistd.h>

#define STATE_FD    3       /* in-memory state, one JSON line per change */
#define DURABLE_FD  193     /* on-disk state, one JSON line per fsync */
#define LOG_FILE    "log"
#define MAX_TX      64
#define MAX_CLIENTS 8
#define LINE_LEN    (8 + MAX_TX * 21)   /* a HELLO naming every transaction fits */
#define NPART       2
#define RETRY_MS    1000    /* the coordinator: how soon it retries a participant it lost */

static const char *role = "twopc";

static void die(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", role, what, strerror(errno));
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

static int listen_on(const struct sockaddr_in *sa)
{
    int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (const struct sockaddr *)sa, sizeof *sa) < 0 || listen(fd, 16) < 0)
        die("listen");
    return fd;
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
struct conn { int fd; size_t len; char buf[LINE_LEN]; };

static void close_conn(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->len = 0;
}

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

/* Block until a whole line arrives on c; 0 if the connection ends first. */
static int read_line(struct conn *c, char *out, size_t cap)
{
    while (!take_line(c, out, cap))
        if (fill(c) <= 0)
            return 0;
    return 1;
}

/* ---- sets of transaction ids, kept sorted so that the state lines are canonical ---- */

struct set { long v[MAX_TX]; int n; };

static int has(const struct set *s, long v)
{
    for (int i = 0; i < s->n; i++)
        if (s->v[i] == v)
            return 1;
    return 0;
}

static void add(struct set *s, long v)
{
    if (has(s, v) || s->n == MAX_TX)
        return;
    int i = s->n++;
    while (i > 0 && s->v[i - 1] > v) {
        s->v[i] = s->v[i - 1];
        i--;
    }
    s->v[i] = v;
}

static void del(struct set *s, long v)
{
    for (int i = 0; i < s->n; i++)
        if (s->v[i] == v) {
            memmove(s->v + i, s->v + i + 1, (size_t)(s->n - i - 1) * sizeof *s->v);
            s->n--;
            return;
        }
}

static int put_set(char *out, size_t cap, const char *name, const struct set *s)
{
    int n = snprintf(out, cap, ",\"%s\":[", name);
    for (int i = 0; i < s->n; i++)
        n += snprintf(out + n, cap - n, "%s%ld", i ? "," : "", s->v[i]);
    return n + snprintf(out + n, cap - n, "]");
}

/* What a node knows: prepared (participants), committed, aborted. */
struct knows { struct set prepared, committed, aborted; };

static struct knows mem, disk;
static int log_fd = -1;
static int is_coordinator;
static long cur_tx;               /* the coordinator: the transaction it is running */
static const char *phase = "";    /* ... and where it is: "voting", "committing" */

static void emit(int fd, const struct knows *k)
{
    char line[96 + 3 * MAX_TX * 24];
    int n = snprintf(line, sizeof line, "{\"role\":\"%s\"", role);
    if (is_coordinator && fd == STATE_FD && *phase)
        n += snprintf(line + n, sizeof line - n, ",\"tx\":%ld,\"phase\":\"%s\"", cur_tx, phase);
    if (!is_coordinator)
        n += put_set(line + n, sizeof line - n, "prepared", &k->prepared);
    n += put_set(line + n, sizeof line - n, "committed", &k->committed);
    n += put_set(line + n, sizeof line - n, "aborted", &k->aborted);
    n += snprintf(line + n, sizeof line - n, "}\n");
    write_all(fd, line, (size_t)n);
}

static void apply(struct knows *k, char kind, long t)
{
    if (kind == 'P') {
        add(&k->prepared, t);
    } else if (kind == 'C') {
        del(&k->prepared, t);
        add(&k->committed, t);
    } else if (kind == 'A') {
        del(&k->prepared, t);
        add(&k->aborted, t);
    }
}

/* Read the log back; a last line without its newline is a torn append: cut it. */
static void recover(void)
{
    FILE *f = fopen(LOG_FILE, "r");
    long good = 0;
    if (f) {
        char line[64], kind;
        long t;
        while (fgets(line, sizeof line, f) && strchr(line, '\n')) {
            if (sscanf(line, "%c %ld", &kind, &t) == 2)
                apply(&disk, kind, t);
            good = ftell(f);
        }
        fclose(f);
    }
    log_fd = open(LOG_FILE, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (log_fd < 0 || ftruncate(log_fd, good) < 0)
        die(LOG_FILE);
    if (!f) {
        int dir = open(".", O_RDONLY | O_DIRECTORY);
        if (dir < 0 || fsync(dir) < 0)
            die("fsync .");
        close(dir);
    }
    mem = disk;
    emit(STATE_FD, &mem);
    if (disk.prepared.n + disk.committed.n + disk.aborted.n > 0)
        emit(DURABLE_FD, &disk);
}

/* Append a record, fsync, and only then report it durable (and known). */
static void log_record(char kind, long t)
{
    char line[32];
    int n = snprintf(line, sizeof line, "%c %ld\n", kind, t);
    if (write_all(log_fd, line, (size_t)n) < 0 || fsync(log_fd) < 0)
        die(LOG_FILE);
    apply(&disk, kind, t);
    emit(DURABLE_FD, &disk);
    apply(&mem, kind, t);
    emit(STATE_FD, &mem);
}

/* Know something without logging it (the coordinator's aborts: presumed abort). */
static void learn(char kind, long t)
{
    apply(&mem, kind, t);
    emit(STATE_FD, &mem);
}

/* ---- a participant ---- */

static void run_participant(const struct sockaddr_in *self)
{
    int lfd = listen_on(self);
    for (;;) {                    /* one coordinator connection at a time */
        struct conn c = { .fd = accept(lfd, NULL, NULL) };
        if (c.fd < 0)
            continue;
        char line[LINE_LEN], out[LINE_LEN];
        int n = snprintf(out, sizeof out, "HELLO");
        for (int i = 0; i < mem.prepared.n; i++)
            n += snprintf(out + n, sizeof out - n, " %ld", mem.prepared.v[i]);
        snprintf(out + n, sizeof out - n, "\n");
        int ok = send_line(c.fd, out) == 0;
        while (ok && read_line(&c, line, sizeof line)) {
            long t;
            if (sscanf(line, "PREPARE %ld", &t) == 1) {
                if (has(&mem.aborted, t)) {
                    snprintf(out, sizeof out, "NO %ld\n", t);
                } else {
                    if (!has(&mem.prepared, t) && !has(&mem.committed, t))
                        log_record('P', t);
                    snprintf(out, sizeof out, "YES %ld\n", t);
                }
            } else if (sscanf(line, "COMMIT %ld", &t) == 1) {
                if (!has(&mem.committed, t))
                    log_record('C', t);
                snprintf(out, sizeof out, "ACK %ld\n", t);
            } else if (sscanf(line, "ABORT %ld", &t) == 1) {
                if (!has(&mem.aborted, t) && !has(&mem.committed, t))
                    log_record('A', t);
                snprintf(out, sizeof out, "ACK %ld\n", t);
            } else {
                continue;
            }
            ok = send_line(c.fd, out) == 0;
        }
        printf("%s: coordinator connection closed\n", role);
        close_conn(&c);
    }
}

/* ---- the coordinator ---- */

static struct sockaddr_in part_addr[NPART];
static struct conn part[NPART] = { { .fd = -1 }, { .fd = -1 } };

/* Tell participant p the outcome of t. */
static void tell(int p, long t)
{
    char line[48];
    snprintf(line, sizeof line, "%s %ld\n", has(&mem.committed, t) ? "COMMIT" : "ABORT", t);
    if (part[p].fd >= 0 && send_line(part[p].fd, line) < 0)
        close_conn(&part[p]);
}

/* (Re)open the connection to participant p and settle what it is in doubt about.
 * 1 if connected. */
static int connect_part(int p)
{
    if (part[p].fd >= 0)
        return 1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket");
    if (connect(fd, (const struct sockaddr *)&part_addr[p], sizeof part_addr[p]) < 0) {
        close(fd);
        return 0;
    }
    part[p] = (struct conn){ .fd = fd };
    char line[LINE_LEN];
    if (!read_line(&part[p], line, sizeof line) || strncmp(line, "HELLO", 5) != 0) {
        close_conn(&part[p]);
        return 0;
    }
    printf("coordinator: participant %d connected: %s\n", p + 1, line);
    char *s = line + 5, *end;
    for (long t; (t = strtol(s, &end, 10)), end != s; s = end) {
        if (!has(&mem.committed, t))
            learn('A', t);        /* presumed abort: no commit record, so it aborted */
        tell(p, t);
    }
    return part[p].fd >= 0;
}

/* Wait for participant p's answer to `prefix id`, skipping other lines (late ACKs).
 * 1 if it came, 0 if the connection broke (or the answer is not the one wanted). */
static int await(int p, const char *want, const char *other, long t)
{
    char line[LINE_LEN], w[48], o[48];
    snprintf(w, sizeof w, "%s %ld", want, t);
    snprintf(o, sizeof o, "%s %ld", other, t);
    while (part[p].fd >= 0 && read_line(&part[p], line, sizeof line)) {
        if (strcmp(line, w) == 0)
            return 1;
        if (strcmp(line, o) == 0)
            return 0;
    }
    close_conn(&part[p]);
    return 0;
}

static void reply(struct conn *c, long t)
{
    char line[48];
    snprintf(line, sizeof line, "%s %ld\n", has(&mem.committed, t) ? "COMMITTED" : "ABORTED", t);
    printf("coordinator: %s", line);
    if (c->fd >= 0 && send_line(c->fd, line) < 0)
        close_conn(c);
}

static void run_tx(struct conn *client, long t)
{
    if (has(&mem.committed, t) || has(&mem.aborted, t)) {   /* decided already */
        reply(client, t);
        return;
    }
    char line[48];
    snprintf(line, sizeof line, "PREPARE %ld\n", t);
    cur_tx = t;
    phase = "voting";
    emit(STATE_FD, &mem);
    int yes = 1;
    for (int p = 0; p < NPART; p++)
        if (!connect_part(p) || send_line(part[p].fd, line) < 0) {
            close_conn(&part[p]);
            yes = 0;
        }
    for (int p = 0; p < NPART; p++)        /* phase one: the votes */
        if (part[p].fd >= 0 && !await(p, "YES", "NO", t))
            yes = 0;
    if (!yes) {                              /* abort: nothing to log */
        phase = "";
        learn('A', t);
        reply(client, t);
        for (int p = 0; p < NPART; p++)
            tell(p, t);
        return;
    }
    phase = "committing";
#ifdef BUG
    learn('C', t);                           /* BUG: decided, known, but not durable */
#else
    log_record('C', t);                      /* the commit point */
#endif
    reply(client, t);
    for (int p = 0; p < NPART; p++)          /* phase two */
        tell(p, t);
    for (int p = 0; p < NPART; p++)
        if (part[p].fd >= 0)
            await(p, "ACK", "NO", t);
    phase = "";
#ifdef BUG
    log_record('C', t);                      /* BUG: the commit record, written last */
#else
    emit(STATE_FD, &mem);
#endif
}

static void run_coordinator(const struct sockaddr_in *self)
{
    struct conn clients[MAX_CLIENTS];
    int lfd = listen_on(self);
    for (int i = 0; i < MAX_CLIENTS; i++)
        clients[i].fd = -1;
    for (;;) {
        int lost = 0;
        for (int p = 0; p < NPART; p++) {    /* at startup, and after a broken connection */
            connect_part(p);
            lost |= part[p].fd < 0;
        }
        struct pollfd pfd[1 + NPART + MAX_CLIENTS];
        pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        for (int p = 0; p < NPART; p++)
            pfd[1 + p] = (struct pollfd){ .fd = part[p].fd, .events = POLLIN };
        for (int i = 0; i < MAX_CLIENTS; i++)
            pfd[1 + NPART + i] = (struct pollfd){ .fd = clients[i].fd, .events = POLLIN };
        /* A participant not connected may be in doubt about a transaction, and only
         * a new connection tells it the outcome: retry it after RETRY_MS even when
         * nothing else happens. (Waiting for the next event instead left a participant
         * that crashed while greeting a restarted coordinator in doubt for ever: found
         * by the quiescent property no_participant_in_doubt at budget crash 2.) */
        if (poll(pfd, 1 + NPART + MAX_CLIENTS, lost ? RETRY_MS : -1) < 0) {
            if (errno == EINTR)
                continue;
            die("poll");
        }
        if (pfd[0].revents & POLLIN) {
            int fd = accept(lfd, NULL, NULL), i = 0;
            while (i < MAX_CLIENTS && clients[i].fd >= 0)
                i++;
            if (fd >= 0 && i == MAX_CLIENTS)
                close(fd);
            else if (fd >= 0)
                clients[i] = (struct conn){ .fd = fd };
        }
        for (int p = 0; p < NPART; p++) {      /* late ACKs; a broken connection */
            if (part[p].fd < 0 || pfd[1 + p].revents == 0)
                continue;
            if (fill(&part[p]) <= 0)
                close_conn(&part[p]);         /* reopened at the top of the loop */
            else
                part[p].len = 0;              /* nothing but ACKs comes unasked */
        }
        for (int i = 0; i < MAX_CLIENTS; i++) {
            struct conn *c = &clients[i];
            if (c->fd < 0 || pfd[1 + NPART + i].revents == 0)
                continue;
            if (fill(c) <= 0) {
                close_conn(c);
                continue;
            }
            char line[LINE_LEN];
            long t;
            while (c->fd >= 0 && take_line(c, line, sizeof line)) {
                if (sscanf(line, "TX %ld", &t) == 1)
                    run_tx(c, t);
                else if (send_line(c->fd, "ERR unknown request\n") < 0)
                    close_conn(c);
            }
        }
    }
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: twopc INDEX ADDR0 ADDR1 ADDR2 (0: the coordinator)\n");
        return 2;
    }
    int index = atoi(argv[1]);
    struct sockaddr_in addr[3];
    for (int i = 0; i < 3; i++)
        parse_addr(argv[2 + i], &addr[i]);
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    ensure_open(STATE_FD);
    ensure_open(DURABLE_FD);
    is_coordinator = index == 0;
    role = is_coordinator ? "coordinator" : index == 1 ? "p1" : "p2";
    recover();
    if (is_coordinator) {
        part_addr[0] = addr[1];
        part_addr[1] = addr[2];
        run_coordinator(&addr[0]);
    } else if (index == 1 || index == 2) {
        run_participant(&addr[index]);
    } else {
        fprintf(stderr, "twopc: INDEX must be 0, 1 or 2\n");
        return 2;
    }
    return 0;
}
