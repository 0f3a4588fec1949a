/*
 * lineserver.h: the loop of a node that answers each line a client sends, two clients at
 * a time, on 127.0.0.1:PORT (test/progs/randkeep.c, forkadvice.c).
 *
 * serve_lines(port, answer) accepts clients and, for each read that brings data, writes
 * what answer(buf, size) put in buf (its length, or -1 to stop with status 1); a client
 * that closes is closed. Returns 1 when a call fails.
 */
#ifndef LINESERVER_H
#define LINESERVER_H
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static int serve_lines(const char *port, int (*answer)(char *buf, size_t size))
{
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(atoi(port)),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(l, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(l, 4) != 0)
        return 1;
    struct pollfd p[3] = { { .fd = l, .events = POLLIN }, { .fd = -1 }, { .fd = -1 } };
    char buf[256];
    for (;;) {
        if (poll(p, 3, -1) < 0)
            return 1;
        if (p[0].revents & POLLIN) {
            int c = accept(l, NULL, NULL);
            p[p[1].fd < 0 ? 1 : 2] = (struct pollfd){ .fd = c, .events = POLLIN };
        }
        for (int i = 1; i < 3; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP)))
                continue;
            ssize_t n = read(p[i].fd, buf, sizeof buf);
            if (n <= 0) {
                close(p[i].fd);
                p[i].fd = -1;
                continue;
            }
            int k = answer(buf, sizeof buf);
            if (k < 0 || write(p[i].fd, buf, (size_t)k) != k)
                return 1;
        }
    }
}
#endif
