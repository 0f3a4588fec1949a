/*
 * pairtick: a node cmc cannot copy, with a timer under time virtual.
 *
 *   pairtick PORT
 *
 * It keeps both ends of an AF_UNIX socket pair open (a copy of it could not be made:
 * what one end holds, the other's reader would need), and answers each line a client
 * sends with "ok N", N the 100 ms ticks of its poll timeout seen so far. Under `time
 * virtual` the ticks are folded into the steps (a FIRE that shows nothing), and the
 * fold keeps a copy of the world it starts from: that copy lends the node's process,
 * which then cannot be forked when the tick runs it. cmc goes on without the copy
 * (test/test_copy_services.py: no traceback; the same counts as --no-fast).
 */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0)
        return 1;
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[1])),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(l, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(l, 4) != 0)
        return 1;
    int c = -1, ticks = 0;
    char buf[256];
    for (;;) {
        struct pollfd p = { .fd = c >= 0 ? c : l, .events = POLLIN };
        int r = poll(&p, 1, 100);
        if (r == 0) {
            ticks++;
            continue;
        }
        if (c < 0) {
            c = accept(l, NULL, NULL);
            continue;
        }
        ssize_t n = read(c, buf, sizeof buf);
        if (n <= 0) {
            close(c);
            c = -1;
            continue;
        }
        int k = snprintf(buf, sizeof buf, "ok %d\n", ticks);
        if (write(c, buf, (size_t)k) != k)
            return 1;
    }
}
