/*
 * uninit: a program with a planted defect of the kind --det exists for: it
 * branches on a stack variable it never wrote (test/test_search.py).
 *
 *   uninit PORT [--wait]
 *
 * leave() fills a stack array with the addresses of its own slots and returns;
 * mode() then reads an array in the same place of the stack without writing it,
 * so it sees an address, which depends on where the stack starts: on the size of
 * the environment. The program's state on fd 3 is {"mode": "even"} or
 * {"mode": "odd"} by that value, and it then waits in accept() for ever. With
 * --wait it writes no state and waits in poll() with a timeout of 1000 + (that
 * value % 1000) ms instead: the difference is then only in its blocked call.
 * A correct program never does this; the test checks that --det reports it as
 * nondeterministic (a shifted stack), naming the node and the step.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define SLOTS 16

static __attribute__((noinline)) void leave(void)
{
    volatile uintptr_t slot[SLOTS];
    for (int i = 0; i < SLOTS; i++)
        slot[i] = (uintptr_t)&slot[i];
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
static __attribute__((noinline)) unsigned mode(void)
{
    volatile uintptr_t slot[SLOTS];             /* never written: the defect */
    return (unsigned)((slot[SLOTS / 2] >> 4) & 0xffff);
}
#pragma GCC diagnostic pop

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: uninit PORT [--wait]\n");
        return 2;
    }
    int wait = argc > 2 && strcmp(argv[2], "--wait") == 0;
    leave();
    unsigned m = mode();
    if (!wait) {
        char line[64];
        int n = snprintf(line, sizeof line, "{\"mode\":\"%s\",\"bits\":%u}\n",
                         m % 2 ? "odd" : "even", m);
        if (write(3, line, (size_t)n) != n)
            perror("uninit: write fd 3");
    }

    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 1) < 0) {
        perror("uninit: listen");
        return 1;
    }
    if (wait) {
        struct pollfd p = { .fd = lfd, .events = POLLIN };
        for (;;)
            if (poll(&p, 1, 1000 + (int)(m % 1000)) == 1 && (p.revents & POLLIN))
                close(accept(lfd, NULL, NULL));
    }
    for (;;) {
        int c = accept(lfd, NULL, NULL);
        if (c >= 0)
            close(c);
    }
}
