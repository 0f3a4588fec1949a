/*
 * asleep: a node copied while one of its threads sleeps natively in epoll_wait, poll or
 * select, as the JVM's selector threads do (the wake-up descriptor of a selector with
 * nothing else to watch).
 *
 *   asleep epoll|poll|select|ppoll PORT
 *
 * The main thread accepts clients on PORT and reads one line from each, then hands the
 * connection to the worker thread through a pipe (its number, 4 bytes). The worker
 * waits for the pipe to be readable in the named call, with no timeout and nothing but
 * the pipe to watch: cmc lets the real kernel wait (calls/waits.py), so the worker sleeps
 * natively. Woken, it answers the client "served N by WAIT", N its count of clients, and
 * closes the connection. A copy of the world is made while the worker sleeps: both the
 * original's worker and the copy's make their wait again, the copy's on its own pipe
 * (test/test_copy_services.py: copied, none replayed, the counts of a replay). `ppoll`
 * waits with a signal mask of its own (SIGUSR1 blocked while it waits), which a thread
 * made again would keep: such a world is replayed, saying why.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

static int wake[2];
static const char *how;

static void wait_readable(int fd)
{
    if (!strcmp(how, "epoll")) {
        static int ep = -1;
        if (ep < 0) {
            ep = epoll_create1(EPOLL_CLOEXEC);
            struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
            if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
                exit(1);
        }
        struct epoll_event out;
        while (epoll_wait(ep, &out, 1, -1) < 1) {}
    } else if (!strcmp(how, "ppoll")) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGUSR1);
        while (ppoll(&p, 1, NULL, &mask) < 1) {}
    } else if (!strcmp(how, "poll")) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        while (poll(&p, 1, -1) < 1) {}
    } else {
        fd_set r;
        do {
            FD_ZERO(&r);
            FD_SET(fd, &r);
        } while (select(fd + 1, &r, NULL, NULL, NULL) < 1);
    }
}

static void *worker(void *arg)
{
    (void)arg;
    for (int served = 1;; served++) {
        int c;
        wait_readable(wake[0]);
        if (read(wake[0], &c, sizeof c) != sizeof c)
            exit(1);
        char out[64];
        int n = snprintf(out, sizeof out, "served %d by %s\n", served, how);
        if (write(c, out, (size_t)n) != n) {}
        close(c);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "epoll") && strcmp(argv[1], "poll")
                      && strcmp(argv[1], "select") && strcmp(argv[1], "ppoll")))
        return 2;
    how = argv[1];
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pipe2(wake, O_CLOEXEC) != 0)
        return 1;
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])),
                             .sin_addr.s_addr = htonl(0x7f000001) };
    if (bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 8) != 0)
        return 1;
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0)
        return 1;
    for (;;) {
        int c = accept(l, NULL, NULL);
        if (c < 0)
            continue;
        char line[128];
        size_t got = 0;
        while (got < sizeof line) {
            ssize_t r = read(c, line + got, 1);
            if (r <= 0 || line[got++] == '\n')
                break;
        }
        if (write(wake[1], &c, sizeof c) != sizeof c)
            return 1;
    }
}
