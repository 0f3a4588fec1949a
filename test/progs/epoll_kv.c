/*
 * epoll_kv: a tiny key-value server on epoll and non-blocking sockets, for cmc to
 * check. One node; clients send lines:
 *
 *   PUT KEY VALUE   ->  OK KEY VALUE    once the write is durable
 *   GET KEY         ->  VAL KEY VALUE   or  NONE KEY
 *
 *   epoll_kv 127.0.0.1:PORT
 *
 * Writes are group-committed: a PUT changes the table at once and marks it dirty;
 * when no request came for 100 ms (epoll_wait's timeout, a FIRE under cmc), the table
 * goes to the file kv.db (write a temporary file, fsync, rename), the durable state
 * is reported on fd 193, and only then are the held "OK" replies sent. A restarted
 * server loads kv.db.
 *
 * Planted bug (-DBUG): "OK" is sent as soon as the PUT is applied in memory, before
 * the write is durable -- a crash before the next flush loses an acknowledged write.
 *
 * Connections are edge-triggered (EPOLLET): the server reads until EAGAIN, in small
 * reads, and keeps a partial line until its end arrives.
 *
 * fd 3:   {"kv":{"KEY":VALUE,...},"dirty":BOOL,"held":[[PORT,"OK KEY VALUE"],...]}
 * fd 193: {"kv":{"KEY":VALUE,...}}
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXKEYS 16
#define MAXCONNS 16
#define MAXHELD 16
#define LINE 128

struct entry { char key[32]; long value; };
struct conn { int fd, port; char in[LINE]; size_t inlen; };
struct held { int fd, port; char text[LINE]; };

static struct entry table[MAXKEYS];
static int nkeys, dirty;
static struct conn conns[MAXCONNS];
static struct held held[MAXHELD];
static int nheld;

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static int kv_json(char *out, size_t room)
{
    /* keys in sorted order: the state is canonical */
    int order[MAXKEYS];
    for (int i = 0; i < nkeys; i++)
        order[i] = i;
    for (int i = 1; i < nkeys; i++)
        for (int j = i; j > 0 && strcmp(table[order[j - 1]].key, table[order[j]].key) > 0; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int n = snprintf(out, room, "{");
    for (int i = 0; i < nkeys; i++)
        n += snprintf(out + n, room - (size_t)n, "%s\"%s\":%ld", i ? "," : "",
                      table[order[i]].key, table[order[i]].value);
    n += snprintf(out + n, room - (size_t)n, "}");
    return n;
}

static void report(void)
{
    char kv[1024], line[4096];
    kv_json(kv, sizeof kv);
    int n = snprintf(line, sizeof line, "{\"kv\":%s,\"dirty\":%s,\"held\":[", kv,
                     dirty ? "true" : "false");
    for (int i = 0; i < nheld; i++)
        n += snprintf(line + n, sizeof line - (size_t)n, "%s[%d,\"%s\"]", i ? "," : "",
                      held[i].port, held[i].text);
    n += snprintf(line + n, sizeof line - (size_t)n, "]}\n");
    if (write(3, line, (size_t)n) != n)
        die("epoll_kv: write fd 3");
}

static struct entry *lookup(const char *key)
{
    for (int i = 0; i < nkeys; i++)
        if (strcmp(table[i].key, key) == 0)
            return &table[i];
    return NULL;
}

static void put(const char *key, long value)
{
    struct entry *e = lookup(key);
    if (!e && nkeys < MAXKEYS) {
        e = &table[nkeys++];
        snprintf(e->key, sizeof e->key, "%s", key);
    }
    if (e)
        e->value = value;
}

static void send_all(int fd, const char *text)
{
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t n = send(fd, text + off, len - off, MSG_NOSIGNAL);
        if (n < 0)
            return;                 /* the client is gone; nothing to tell */
        off += (size_t)n;
    }
}

static void load(void)
{
    FILE *f = fopen("kv.db", "r");
    char key[32];
    long value;
    if (!f)
        return;
    while (fscanf(f, "%31s %ld", key, &value) == 2)
        put(key, value);
    fclose(f);
}

/* Make the table durable, say so on fd 193, then release the held replies. */
static void flush(void)
{
    FILE *f = fopen("kv.db.tmp", "w");
    if (!f)
        die("epoll_kv: kv.db.tmp");
    for (int i = 0; i < nkeys; i++)
        fprintf(f, "%s %ld\n", table[i].key, table[i].value);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0 || fclose(f) != 0)
        die("epoll_kv: write kv.db.tmp");
    if (rename("kv.db.tmp", "kv.db") != 0)
        die("epoll_kv: rename");
    char kv[1024], line[1100];
    kv_json(kv, sizeof kv);
    int n = snprintf(line, sizeof line, "{\"kv\":%s}\n", kv);
    if (write(193, line, (size_t)n) != n)
        die("epoll_kv: write fd 193");
    dirty = 0;
    for (int i = 0; i < nheld; i++) {
        char line[LINE + 1];
        snprintf(line, sizeof line, "%s\n", held[i].text);
        send_all(held[i].fd, line);
    }
    nheld = 0;
}

static void request(struct conn *c, char *line)
{
    char key[32], reply[LINE];
    long value;
    if (sscanf(line, "PUT %31s %ld", key, &value) == 2) {
        put(key, value);
        dirty = 1;
        snprintf(reply, sizeof reply, "OK %s %ld", key, value);     /* the line, without \n */
#ifdef BUG
        send_all(c->fd, reply);     /* acknowledged before the write is durable */
        send_all(c->fd, "\n");
#else
        if (nheld < MAXHELD) {
            held[nheld] = (struct held){ .fd = c->fd, .port = c->port };
            snprintf(held[nheld].text, sizeof held[nheld].text, "%s", reply);
            nheld++;
        }
#endif
    } else if (sscanf(line, "GET %31s", key) == 1) {
        struct entry *e = lookup(key);
        if (e)
            snprintf(reply, sizeof reply, "VAL %s %ld\n", key, e->value);
        else
            snprintf(reply, sizeof reply, "NONE %s\n", key);
        send_all(c->fd, reply);
    } else {
        send_all(c->fd, "ERR\n");
    }
}

static void drop(int ep, struct conn *c)
{
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    for (int i = 0; i < nheld; i++)     /* nobody to answer any more */
        if (held[i].fd == c->fd)
            held[i--] = held[--nheld];
    c->fd = -1;
}

/* Edge-triggered: read until EAGAIN, in small reads; a line may come in pieces. */
static void readable(int ep, struct conn *c)
{
    for (;;) {
        char buf[16];
        ssize_t n = read(c->fd, buf, sizeof buf);
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            drop(ep, c);
            return;
        }
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] == '\n') {
                c->in[c->inlen] = 0;
                request(c, c->in);
                c->inlen = 0;
            } else if (c->inlen < LINE - 1) {
                c->in[c->inlen++] = buf[i];
            }
        }
    }
}

int main(int argc, char **argv)
{
    if (argc != 2 || !strchr(argv[1], ':')) {
        fprintf(stderr, "usage: epoll_kv IP:PORT\n");
        return 2;
    }
    char ip[64];
    snprintf(ip, sizeof ip, "%.*s", (int)(strchr(argv[1], ':') - argv[1]), argv[1]);
    struct sockaddr_in sa = { .sin_family = AF_INET,
                              .sin_port = htons((unsigned short)atoi(strchr(argv[1], ':') + 1)) };
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
        fprintf(stderr, "epoll_kv: bad address %s\n", argv[1]);
        return 2;
    }
    for (int i = 0; i < MAXCONNS; i++)
        conns[i].fd = -1;
    load();
    report();

    int one = 1, l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(l, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(l, 16) < 0)
        die("epoll_kv: listen");
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_kv: epoll_create1");
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = l };
    if (epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev) < 0)
        die("epoll_kv: epoll_ctl");

    for (;;) {
        struct epoll_event evs[8];
        int n = epoll_wait(ep, evs, 8, dirty ? 100 : -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_kv: epoll_wait");
        }
        if (n == 0 && dirty)
            flush();
        for (int i = 0; i < n; i++) {
            if (evs[i].data.fd == l) {
                struct sockaddr_in peer;
                socklen_t len = sizeof peer;
                int c;
                while ((c = accept4(l, (struct sockaddr *)&peer, &len, SOCK_NONBLOCK)) >= 0) {
                    int slot = 0;
                    while (slot < MAXCONNS && conns[slot].fd >= 0)
                        slot++;
                    if (slot == MAXCONNS) {
                        close(c);
                        continue;
                    }
                    conns[slot] = (struct conn){ .fd = c, .port = ntohs(peer.sin_port) };
                    struct epoll_event ce = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET,
                                              .data.fd = c };
                    if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce) < 0)
                        die("epoll_kv: epoll_ctl(conn)");
                    len = sizeof peer;
                }
                continue;
            }
            for (int k = 0; k < MAXCONNS; k++)
                if (conns[k].fd == evs[i].data.fd)
                    readable(ep, &conns[k]);
        }
        report();
    }
}
