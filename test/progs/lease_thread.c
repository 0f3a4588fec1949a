/*
 * lease_thread: a lease holder whose lease runs out in a background thread.
 *
 *   lease_thread PORT [--ms LEASE_MS]
 *
 * Listens on 127.0.0.1:PORT. The main thread serves every client with poll(): each
 * line is a request and gets a one-line answer.
 *
 *   ACQUIRE NAME   "GRANTED NAME TERM" when the lease is free (a new term begins) or
 *                  already NAME's (its term goes on, the deadline moves), else
 *                  "BUSY HOLDER"
 *   RENEW NAME     "RENEWED NAME TERM" when NAME holds the lease (its deadline moves
 *                  LEASE_MS on), else "LOST NAME"
 *
 * The reaper thread sleeps on a condition variable (CLOCK_MONOTONIC) until the
 * lease's deadline; when the wait times out with the deadline passed, the lease is
 * dropped. The main thread signals it whenever the deadline moves. Under cmc the
 * reaper's pthread_cond_timedwait is the node's only timed wait, so its FIRE is the
 * lease running out; between FIREs the clock stands still.
 *
 * State on fd 3, written under the lock after every change (the deadline is not in
 * it: cmc fingerprints the reaper's pending timeout by its duration):
 *     {"holder": NAME|null, "term": TERM, "expired": N, "renewed": R}
 * TERM counts the terms begun, N the leases that ran out, R the renewals since the
 * current term began (0 with no holder).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 8
#define NAME_MAX_LEN 32

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t moved;            /* the deadline moved, or the lease began */
static char holder[NAME_MAX_LEN];       /* "" when free */
static long term, expired, renewed;
static struct timespec deadline;
static long lease_ms = 5000;

static void emit(void)                  /* with the lock held */
{
    char line[160];
    int n;
    if (holder[0])
        n = snprintf(line, sizeof line,
                     "{\"holder\":\"%s\",\"term\":%ld,\"expired\":%ld,\"renewed\":%ld}\n",
                     holder, term, expired, renewed);
    else
        n = snprintf(line, sizeof line,
                     "{\"holder\":null,\"term\":%ld,\"expired\":%ld,\"renewed\":0}\n",
                     term, expired);
    if (write(3, line, (size_t)n) != n)
        perror("lease_thread: write fd 3");
}

static int before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void extend(void)                /* with the lock held */
{
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += lease_ms / 1000;
    deadline.tv_nsec += (lease_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
}

static void *reaper(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!holder[0])
            pthread_cond_wait(&moved, &lock);
        int rc = pthread_cond_timedwait(&moved, &lock, &deadline);
        if (rc != ETIMEDOUT && rc != 0) {
            fprintf(stderr, "lease_thread: pthread_cond_timedwait: %s\n", strerror(rc));
            exit(1);
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (holder[0] && !before(&now, &deadline)) {
            holder[0] = '\0';
            renewed = 0;
            expired++;
            emit();
        }
    }
    return NULL;
}

/* One request line; the answer into out (with its newline). */
static void serve(char *line, char *out, size_t cap)
{
    char verb[16], name[NAME_MAX_LEN];
    if (sscanf(line, "%15s %31s", verb, name) != 2) {
        snprintf(out, cap, "ERROR\n");
        return;
    }
    pthread_mutex_lock(&lock);
    if (strcmp(verb, "ACQUIRE") == 0) {
        if (!holder[0] || strcmp(holder, name) == 0) {
            if (!holder[0]) {
                snprintf(holder, sizeof holder, "%s", name);
                term++;
            }
            extend();
            pthread_cond_signal(&moved);
            emit();
            snprintf(out, cap, "GRANTED %s %ld\n", name, term);
        } else {
            snprintf(out, cap, "BUSY %s\n", holder);
        }
    } else if (strcmp(verb, "RENEW") == 0) {
        if (holder[0] && strcmp(holder, name) == 0) {
            extend();
            renewed++;
            pthread_cond_signal(&moved);
            emit();
            snprintf(out, cap, "RENEWED %s %ld\n", name, term);
        } else {
            snprintf(out, cap, "LOST %s\n", name);
        }
    } else {
        snprintf(out, cap, "ERROR\n");
    }
    pthread_mutex_unlock(&lock);
}

struct conn {
    int fd;
    size_t used;
    char buf[256];
};

/* Read what the connection has; answer every complete line. 0 when it ended. */
static int readable(struct conn *c)
{
    ssize_t got = read(c->fd, c->buf + c->used, sizeof c->buf - 1 - c->used);
    if (got <= 0)
        return 0;
    c->used += (size_t)got;
    char *nl;
    while ((nl = memchr(c->buf, '\n', c->used)) != NULL) {
        *nl = '\0';
        char out[96];
        serve(c->buf, out, sizeof out);
        size_t len = strlen(out);
        if (send(c->fd, out, len, MSG_NOSIGNAL) != (ssize_t)len)
            return 0;
        size_t rest = c->used - (size_t)(nl + 1 - c->buf);
        memmove(c->buf, nl + 1, rest);
        c->used = rest;
    }
    return c->used < sizeof c->buf - 1;     /* a line too long: drop the client */
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: lease_thread PORT [--ms LEASE_MS]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--ms") == 0 && i + 1 < argc)
            lease_ms = atol(argv[++i]);
    }

    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&moved, &attr);
    pthread_condattr_destroy(&attr);

    pthread_mutex_lock(&lock);
    emit();
    pthread_mutex_unlock(&lock);

    pthread_t t;
    int rc = pthread_create(&t, NULL, reaper, NULL);
    if (rc != 0) {
        fprintf(stderr, "lease_thread: pthread_create: %s\n", strerror(rc));
        return 1;
    }

    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 16) < 0) {
        perror("lease_thread: listen");
        return 1;
    }

    static struct conn conns[MAX_CONNS];
    int nconns = 0;
    for (;;) {
        struct pollfd pfd[1 + MAX_CONNS];
        pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        for (int i = 0; i < nconns; i++)
            pfd[1 + i] = (struct pollfd){ .fd = conns[i].fd, .events = POLLIN };
        int polled = nconns;
        if (poll(pfd, (nfds_t)(1 + polled), -1) < 0) {
            if (errno == EINTR)
                continue;
            perror("lease_thread: poll");
            return 1;
        }
        /* Downward, so that a closed connection's slot takes the last one, which was
         * either looked at already or accepted after this poll. */
        for (int i = polled - 1; i >= 0; i--) {
            if (pfd[1 + i].revents && !readable(&conns[i])) {
                close(conns[i].fd);
                conns[i] = conns[--nconns];
            }
        }
        if ((pfd[0].revents & POLLIN) && nconns < MAX_CONNS) {
            int c = accept(lfd, NULL, NULL);
            if (c >= 0)
                conns[nconns++] = (struct conn){ .fd = c };
        }
    }
}
