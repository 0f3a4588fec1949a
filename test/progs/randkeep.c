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
#include <stdio.h>
#include <unistd.h>

#include "lineserver.h"

static int r;

static int draw(char *buf, size_t size)
{
    unsigned char b[4];
    if (read(r, b, 4) != 4)
        return -1;
    return snprintf(buf, size, "r %02x%02x%02x%02x\n", b[0], b[1], b[2], b[3]);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    r = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    unsigned char first[4];
    if (r < 0 || read(r, first, 4) != 4)
        return 1;
    return serve_lines(argv[1], draw);
}
