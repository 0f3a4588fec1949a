/*
 * filler: a node that, when a client's line arrives, takes more and more of the
 * machine until it is stopped (test/test_memory.py): `filler PORT file` writes a
 * file in its directory without end (fsyncing every 64 MiB), `filler PORT memory`
 * allocates and touches memory without end. Its state on fd 3 is {"started": B}.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void state(int started)
{
    char line[32];
    int n = snprintf(line, sizeof line, "{\"started\":%s}\n", started ? "true" : "false");
    if (write(3, line, (size_t)n) != n)
        exit(1);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: filler PORT file|memory\n");
        return 2;
    }
    state(0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 4) < 0)
        return 1;
    int c = accept(lfd, NULL, NULL);
    char buf[64];
    if (c < 0 || read(c, buf, sizeof buf) <= 0)
        return 1;
    state(1);
    static char block[1 << 20];
    memset(block, 'x', sizeof block);
    if (!strcmp(argv[2], "file")) {
        int fd = open("fill", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        for (long i = 1; fd >= 0; i++) {
            if (write(fd, block, sizeof block) != (ssize_t)sizeof block)
                return 1;
            if (i % 64 == 0)
                fsync(fd);
        }
        return 1;
    }
    for (;;) {
        char *p = malloc(1 << 20);
        if (!p)
            return 1;
        memset(p, 'y', 1 << 20);
    }
}
