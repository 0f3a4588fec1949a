/*
 * forkadvice: a node whose data lives in memory it asked a fork not to copy, or to wipe.
 *
 *   forkadvice dontfork|wipe PORT
 *
 * Maps two pages, checks that madvise answers as the kernel does (EINVAL for an address
 * not page-aligned, ENOMEM for a range running into an unmapped page, 0 for its own
 * page), gives its first page MADV_DONTFORK or MADV_WIPEONFORK and keeps its count of
 * clients there (starting at 40, so a wiped page shows as 1). Answers each client's line
 * with "count N". cmc copies a world by a fork: a copy must have that page as the
 * original has it (test_copy_services.py: `dontfork` copied as replayed, nothing
 * replayed; `wipe` replayed, saying why, with the same counts). Node's V8 marks its heap
 * MADV_DONTFORK: before cmc answered that advice itself, every copy of a Node process
 * faulted at its first JavaScript.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    long page = sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || munmap(m + page, page) != 0)
        return 1;
    int advice = strcmp(argv[1], "wipe") ? MADV_DONTFORK : MADV_WIPEONFORK;
    if (madvise(m + 1, page, advice) != -1 || errno != EINVAL) {
        fprintf(stderr, "forkadvice: an unaligned madvise was not EINVAL\n");
        return 1;
    }
    if (madvise(m, 2 * page, advice) != -1 || errno != ENOMEM) {
        fprintf(stderr, "forkadvice: madvise over an unmapped page was not ENOMEM\n");
        return 1;
    }
    if (madvise(m, page, advice) != 0) {
        perror("forkadvice: madvise");
        return 1;
    }
    int *count = (int *)m;
    *count = 40;
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[2])),
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
            int k = snprintf(buf, sizeof buf, "count %d\n", ++*count);
            if (write(p[i].fd, buf, (size_t)k) != k)
                return 1;
        }
    }
}
