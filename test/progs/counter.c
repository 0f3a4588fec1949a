/*
 * counter: a one-node toy whose state space is known by hand (test/test_search.py).
 *
 *   counter PORT [--tick MS] [--pid-at N] [--first 1]
 *
 * Listens on 127.0.0.1:PORT and, with poll(), accepts every connection and reads
 * every one of them. Its canonical state on fd 3 is {"count": N}, the number of
 * lines received so far over all connections; it writes it at start and after
 * each change. It never replies. A connection that ends (EOF or reset) is closed.
 *
 * --tick MS   poll with a timeout of MS milliseconds instead of forever: a periodic
 *             timer whose firing changes nothing (every world has a FIRE that leads
 *             back to itself; such a world still counts as quiescent: docs/cmc.md,
 *             "Properties: when each is checked").
 * --pid-at N  once the count reaches N, add the process id to the state: a planted
 *             nondeterminism (each launch has another pid) for the --det tests.
 * --first 1   answer a line "?" with the first line it ever received: state it keeps
 *             and does not declare, for the --check-merges tests (two worlds alike on
 *             fd 3 that answer "?" differently).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CONNS 16

static long count;
static long pid_at = -1;
static int answer_first;
static char first[64];          /* --first: the first line received, undeclared */

static void emit(void)
{
    char line[128];
    int n;
    if (pid_at >= 0 && count >= pid_at)
        n = snprintf(line, sizeof line, "{\"count\":%ld,\"pid\":%ld}\n", count, (long)getpid());
    else
        n = snprintf(line, sizeof line, "{\"count\":%ld}\n", count);
    if (write(3, line, (size_t)n) != n)
        perror("counter: write fd 3");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: counter PORT [--tick MS] [--pid-at N] [--first 1]\n");
        return 2;
    }
    int port = atoi(argv[1]), tick = -1;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--tick") == 0)
            tick = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--pid-at") == 0)
            pid_at = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--first") == 0)
            answer_first = atoi(argv[i + 1]);
    }
    emit();

    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 16) < 0) {
        perror("counter: listen");
        return 1;
    }

    int conns[MAX_CONNS], nconns = 0;
    for (;;) {
        struct pollfd pfd[1 + MAX_CONNS];
        pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        for (int i = 0; i < nconns; i++)
            pfd[1 + i] = (struct pollfd){ .fd = conns[i], .events = POLLIN };
        int ready = poll(pfd, (nfds_t)(1 + nconns), tick);
        if (ready < 0) {
            if (errno == EINTR)
                continue;
            perror("counter: poll");
            return 1;
        }
        if (ready == 0)
            continue;                       /* the tick: nothing changes */
        /* Only the connections poll() was given have a revents: one accepted below is
         * looked at from the next poll on (its pfd entry was never filled). A close
         * moves the last connection, possibly that new one, into slot i, which the
         * downward loop does not look at again. */
        int polled = nconns;
        if ((pfd[0].revents & POLLIN) && nconns < MAX_CONNS) {
            int c = accept(lfd, NULL, NULL);
            if (c >= 0)
                conns[nconns++] = c;
        }
        for (int i = polled - 1; i >= 0; i--) {
            if (!pfd[1 + i].revents)
                continue;
            char buf[256];
            ssize_t got = read(conns[i], buf, sizeof buf);
            if (got <= 0) {                 /* EOF or reset: forget the connection */
                close(conns[i]);
                conns[i] = conns[--nconns];
                continue;
            }
            if (answer_first && got > 0 && buf[0] == '?') {
                char out[80];
                int n = snprintf(out, sizeof out, "%s\n", first[0] ? first : "none");
                if (write(conns[i], out, (size_t)n) != n)
                    perror("counter: write");
            } else if (answer_first && !first[0]) {
                size_t k = 0;
                while (k < (size_t)got && k < sizeof first - 1 && buf[k] != '\n') {
                    first[k] = buf[k];
                    k++;
                }
                first[k] = 0;
            }
            long before = count;
            for (ssize_t k = 0; k < got; k++)
                count += buf[k] == '\n';
            if (count != before)
                emit();
        }
    }
}
