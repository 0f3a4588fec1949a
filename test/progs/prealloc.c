/*
 * prealloc: a log that preallocates its files, as etcd's WAL and many databases do
 * (docs/performance.md, "What a world costs"; test/test_memory.py).
 *
 *   prealloc PORT [MB]
 *
 * At its first start it makes two files of MB megabytes (default 64): wal.0 with
 * fallocate(2), wal.1 by writing zeros, 1 MiB at a time; both fsynced, and the
 * directory. Then it listens on 127.0.0.1:PORT; each line a client sends is a record
 * of 32 bytes written at the next free slot of wal.0 and fsynced, then answered
 * "ok N". At a restart it counts the records back (a slot that is all zero ends the
 * log). Its state on fd 3 is {"records": N}.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define SLOT 32
#define MAX_CONNS 16

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void emit(long records)
{
    char line[64];
    int n = snprintf(line, sizeof line, "{\"records\":%ld}\n", records);
    if (write(3, line, (size_t)n) != n)
        die("prealloc: write fd 3");
}

static void make_files(long mb)
{
    int fd = open("wal.0", O_RDWR | O_CREAT | O_EXCL, 0644);
    if (fd < 0 || fallocate(fd, 0, 0, mb << 20) < 0 || fsync(fd) < 0)
        die("prealloc: wal.0");
    close(fd);
    static char zeros[1 << 20];
    fd = open("wal.1", O_RDWR | O_CREAT | O_EXCL, 0644);
    if (fd < 0)
        die("prealloc: wal.1");
    for (long i = 0; i < mb; i++)
        if (write(fd, zeros, sizeof zeros) != (ssize_t)sizeof zeros)
            die("prealloc: write wal.1");
    if (fsync(fd) < 0)
        die("prealloc: fsync wal.1");
    close(fd);
    int dir = open(".", O_RDONLY | O_DIRECTORY);
    if (dir < 0 || fsync(dir) < 0)
        die("prealloc: fsync .");
    close(dir);
}

static long count_records(int fd)
{
    char slot[SLOT], zero[SLOT] = {0};
    long n = 0;
    while (pread(fd, slot, SLOT, n * SLOT) == SLOT && memcmp(slot, zero, SLOT))
        n++;
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: prealloc PORT [MB]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    long mb = argc > 2 ? atol(argv[2]) : 64;
    struct stat st;
    if (stat("wal.0", &st) < 0)
        make_files(mb);
    int log = open("wal.0", O_RDWR);
    if (log < 0)
        die("prealloc: open wal.0");
    long records = count_records(log);
    emit(records);

    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 16) < 0)
        die("prealloc: listen");

    int conns[MAX_CONNS], nconns = 0;
    for (;;) {
        struct pollfd pfd[1 + MAX_CONNS];
        pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        for (int i = 0; i < nconns; i++)
            pfd[1 + i] = (struct pollfd){ .fd = conns[i], .events = POLLIN };
        if (poll(pfd, (nfds_t)(1 + nconns), -1) < 0)
            die("prealloc: poll");
        if ((pfd[0].revents & POLLIN) && nconns < MAX_CONNS) {
            int c = accept(lfd, NULL, NULL);
            if (c >= 0)
                conns[nconns++] = c;
        }
        for (int i = nconns - 1; i >= 0; i--) {
            if (!pfd[1 + i].revents)
                continue;
            char buf[256];
            ssize_t n = read(conns[i], buf, sizeof buf);
            if (n <= 0) {
                close(conns[i]);
                conns[i] = conns[--nconns];
                continue;
            }
            for (ssize_t k = 0; k < n; k++) {
                if (buf[k] != '\n')
                    continue;
                char slot[SLOT];
                memset(slot, 0, SLOT);
                snprintf(slot, SLOT, "record %ld", records + 1);
                if (pwrite(log, slot, SLOT, records * SLOT) != SLOT || fdatasync(log) < 0)
                    die("prealloc: append");
                records++;
                emit(records);
                char ok[32];
                int m = snprintf(ok, sizeof ok, "ok %ld\n", records);
                if (write(conns[i], ok, (size_t)m) != m)
                    break;
            }
        }
    }
}
