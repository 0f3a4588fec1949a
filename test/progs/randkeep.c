/*
 * randkeep: a node that keeps /dev/urandom open and reads from it as it goes.
 *
 *   randkeep PORT
 *
 * Answers each line a client sends with "r HEX", four bytes read from the /dev/urandom
 * it opened at start (cmc answers that open with a file of the node's random stream).
 * A copy of its world must read on from where the original was: test_copy_services.py
 * (copied as replayed, nothing replayed for want of a copy; the JVM keeps /dev/random
 * and /dev/urandom open the same way).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    int r = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    unsigned char first[4];
    if (r < 0 || read(r, first, 4) != 4)
        return 1;
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[1])),
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
            unsigned char b[4];
            if (read(r, b, 4) != 4)
                return 1;
            int k = snprintf(buf, sizeof buf, "r %02x%02x%02x%02x\n", b[0], b[1], b[2], b[3]);
            if (write(p[i].fd, buf, (size_t)k) != k)
                return 1;
        }
    }
}
