/*
 * relay: a store-and-forward relay in front of a mailbox.
 *
 *     relay INDEX RELAY_ADDR MAILBOX_ADDR
 *     e.g.  relay 0 127.0.0.1:7100 127.0.0.1:7101      (0: the relay, 1: the mailbox)
 *
 * Clients talk to the relay, one request per line, served one at a time:
 *
 *     SEND <int>  ->  OK <int>      once the message is on the mailbox's disk
 *                 ->  FAIL <int>    if the relay could not hand it over
 *
 * The relay hands each message to the mailbox over a fresh connection, with the
 * close-delimited protocol of many spool and mail programs: it writes the message,
 * shuts its side down for writing, and waits for the mailbox to close the connection.
 * The mailbox reads a message until the end of the stream, appends it to the file
 * "mailbox" (one value per line), fsyncs, and only then closes: its orderly close is the
 * receipt. A connection that breaks before that is retried on a new connection (the
 * mailbox ignores a message it already has, so a retry after a lost receipt is safe).
 *
 * It is written the way such a program ships: blocking sockets, poll, files, fsync, no
 * threads. It also reports its state for a model checker, which costs nothing outside
 * one: after every change, the in-memory state as one JSON line on fd 3; after every
 * fsync, the on-disk state as one JSON line on fd 193.
 *
 * -DBUG plants a defect: the relay waits for the receipt with `recv(...) <= 0`, so a
 * connection reset (ECONNRESET, recv returns -1) counts as the mailbox's orderly close
 * (recv returns 0). When the network resets the connection before the message reached
 * the mailbox, the relay tells the client OK for a message that is nowhere. On a network
 * that loses nothing the bug cannot be seen.
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

#define STATE_FD     3     /* in-memory state, one JSON line per change */
#define DURABLE_FD   193   /* on-disk state, one JSON line per fsync */
#define BOX_FILE     "mailbox"
#define MAX_MSGS     256
#define MAX_CLIENTS  8
#define LINE_LEN     64
#define HANDOFF_TRIES 3    /* connections tried per message before answering FAIL */

static const char *role = "relay";

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

/* Outside a checker fds 3 and 193 may be closed: point them at /dev/null. */
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

/* ---- the mailbox ---- */

static long box[MAX_MSGS];
static int nbox;

static void emit_box(int fd)
{
    char line[32 + MAX_MSGS * 22];
    int n = snprintf(line, sizeof line, "{\"role\":\"mailbox\",\"log\":[");
    for (int i = 0; i < nbox; i++)
        n += snprintf(line + n, sizeof line - n, "%s%ld", i ? "," : "", box[i]);
    n += snprintf(line + n, sizeof line - n, "]}\n");
    write_all(fd, line, (size_t)n);
}

static int box_has(long v)
{
    for (int i = 0; i < nbox; i++)
        if (box[i] == v)
            return 1;
    return 0;
}

/* Read the mailbox file back; a last line without its newline is a torn append. */
static int open_box(void)
{
    FILE *f = fopen(BOX_FILE, "r");
    long good = 0;
    if (f) {
        char line[64];
        while (nbox < MAX_MSGS && fgets(line, sizeof line, f) && strchr(line, '\n')) {
            box[nbox++] = strtol(line, NULL, 10);
            good = ftell(f);
        }
        fclose(f);
    }
    int fd = open(BOX_FILE, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0 || ftruncate(fd, good) < 0)
        die(BOX_FILE);
    emit_box(STATE_FD);
    if (nbox > 0)
        emit_box(DURABLE_FD);
    return fd;
}

static void store(int box_fd, long v)
{
    char line[32];
    int n = snprintf(line, sizeof line, "%ld\n", v);
    if (nbox == MAX_MSGS || write_all(box_fd, line, (size_t)n) < 0 || fsync(box_fd) < 0)
        die(BOX_FILE);
    box[nbox++] = v;
    emit_box(DURABLE_FD);
    emit_box(STATE_FD);
    printf("mailbox: stored %ld\n", v);
}

static void run_mailbox(const struct sockaddr_in *self)
{
    int box_fd = open_box();
    int lfd = listen_on(self);
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            continue;
        /* A message is everything up to the end of the stream. */
        char msg[LINE_LEN];
        size_t len = 0;
        ssize_t n = -1;           /* a message that does not fit counts as broken */
        while (len < sizeof msg - 1 && (n = recv(fd, msg + len, sizeof msg - 1 - len, 0)) > 0)
            len += (size_t)n;
        if (n == 0) {             /* the whole message: store it, then the receipt */
            msg[len] = '\0';
            char *end;
            long v = strtol(msg, &end, 10);
            if (end != msg && (*end == '\n' || *end == '\0') && !box_has(v))
                store(box_fd, v);
        } else {
            printf("mailbox: connection broken, message discarded\n");
        }
        close(fd);                /* orderly close = "it is on disk" */
    }
}

/* ---- the relay ---- */

static struct sockaddr_in mailbox_addr;

static void emit_relay(long pending, int tries)
{
    char line[96];
    int n;
    if (tries < 0)
        n = snprintf(line, sizeof line, "{\"role\":\"relay\",\"pending\":null}\n");
    else
        n = snprintf(line, sizeof line, "{\"role\":\"relay\",\"pending\":%ld,\"try\":%d}\n",
                     pending, tries);
    write_all(STATE_FD, line, (size_t)n);
}

/* One attempt to hand v to the mailbox: 1 once the mailbox closed the connection in
 * order (its receipt), 0 if the connection could not be made or broke. */
static int handoff_once(long v)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket");
    if (connect(fd, (const struct sockaddr *)&mailbox_addr, sizeof mailbox_addr) < 0) {
        close(fd);
        return 0;
    }
    char msg[32], buf[64];
    int len = snprintf(msg, sizeof msg, "%ld\n", v);
    if (send_all(fd, msg, (size_t)len) < 0 || shutdown(fd, SHUT_WR) < 0) {
        close(fd);
        return 0;
    }
    ssize_t n;
    for (;;) {                    /* wait for the mailbox's close */
        n = recv(fd, buf, sizeof buf, 0);
#ifdef BUG
        if (n <= 0)               /* BUG: a reset (-1, ECONNRESET) taken for the close */
            break;
#else
        if (n == 0)               /* orderly close: the receipt */
            break;
        if (n < 0 && errno != EINTR) {
            close(fd);
            return 0;
        }
#endif
    }
    close(fd);
    return 1;
}

static int handoff(long v)
{
    for (int t = 0; t < HANDOFF_TRIES; t++) {
        emit_relay(v, t);
        if (handoff_once(v))
            return 1;
        printf("relay: hand-off of %ld failed, attempt %d\n", v, t + 1);
    }
    return 0;
}

struct client { int fd; size_t len; char buf[LINE_LEN]; };

static void serve_line(struct client *c, const char *line)
{
    char out[48];
    long v;
    char *end;
    if (strncmp(line, "SEND ", 5) == 0 && (v = strtol(line + 5, &end, 10), end != line + 5)
        && *end == '\0') {
        int ok = handoff(v);
        emit_relay(0, -1);
        snprintf(out, sizeof out, "%s %ld\n", ok ? "OK" : "FAIL", v);
        printf("relay: %s", out);
    } else {
        snprintf(out, sizeof out, "ERR bad request\n");
    }
    if (send_all(c->fd, out, strlen(out)) < 0) {
        close(c->fd);
        c->fd = -1;
    }
}

static void run_relay(const struct sockaddr_in *self)
{
    struct client clients[MAX_CLIENTS];
    int lfd = listen_on(self);
    for (int i = 0; i < MAX_CLIENTS; i++)
        clients[i].fd = -1;
    emit_relay(0, -1);
    for (;;) {
        struct pollfd pfd[1 + MAX_CLIENTS];
        pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        for (int i = 0; i < MAX_CLIENTS; i++)
            pfd[1 + i] = (struct pollfd){ .fd = clients[i].fd, .events = POLLIN };
        if (poll(pfd, 1 + MAX_CLIENTS, -1) < 0) {
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
                clients[i] = (struct client){ .fd = fd };
        }
        for (int i = 0; i < MAX_CLIENTS; i++) {
            struct client *c = &clients[i];
            if (c->fd < 0 || pfd[1 + i].revents == 0)
                continue;
            ssize_t n = c->len < sizeof c->buf
                ? recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0) : -1;
            if (n <= 0) {         /* the client left (or sent a line too long) */
                close(c->fd);
                c->fd = -1;
                continue;
            }
            c->len += (size_t)n;
            char *nl;
            while (c->fd >= 0 && (nl = memchr(c->buf, '\n', c->len)) != NULL) {
                size_t used = (size_t)(nl - c->buf) + 1;
                char line[LINE_LEN];
                size_t k = used - 1;
                if (k > 0 && c->buf[k - 1] == '\r')
                    k--;
                memcpy(line, c->buf, k);
                line[k] = '\0';
                memmove(c->buf, c->buf + used, c->len - used);
                c->len -= used;
                serve_line(c, line);
            }
        }
    }
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[1], "0") != 0 && strcmp(argv[1], "1") != 0)) {
        fprintf(stderr, "usage: relay 0|1 RELAY_ADDR MAILBOX_ADDR (0: the relay)\n");
        return 2;
    }
    struct sockaddr_in addr[2];
    parse_addr(argv[2], &addr[0]);
    parse_addr(argv[3], &addr[1]);
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    ensure_open(STATE_FD);
    ensure_open(DURABLE_FD);
    if (argv[1][0] == '1') {
        role = "mailbox";
        run_mailbox(&addr[1]);
    } else {
        mailbox_addr = addr[1];
        run_relay(&addr[0]);
    }
    return 0;
}
