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
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lineserver.h"

static int *count;

static int counted(char *buf, size_t size)
{
    return snprintf(buf, size, "count %d\n", ++*count);
}

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
    count = (int *)m;
    *count = 40;
    return serve_lines(argv[2], counted);
}
