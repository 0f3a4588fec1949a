/*
 * mmaplog: a log kept in a shared mapping of a file, made durable with msync.
 *
 *   mmaplog PORT [bug]
 *
 * Maps log.dat (4 KiB: a count, then that many 32-bit values) shared and writable.
 * Serves one connection at a time on 127.0.0.1:PORT: for each line "PUT N" it stores N
 * through the mapping, makes it durable with msync(MS_SYNC) and answers "ACK N". With
 * `bug` it answers at once and syncs when the client has gone (a batch of its PUTs):
 * a crash between the two loses an acknowledged value. Writes {"log":[...]} on fd 3 at start (what survived) and after
 * each PUT.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define SIZE 4096
#define MAX ((SIZE - 4) / 4)

static uint32_t *log_;

static void report(void)
{
    char line[SIZE * 4];
    int n = snprintf(line, sizeof line, "{\"log\":[");
    for (uint32_t i = 0; i < log_[0] && i < MAX; i++)
        n += snprintf(line + n, sizeof line - n, "%s%u", i ? "," : "", log_[1 + i]);
    n += snprintf(line + n, sizeof line - n, "]}\n");
    if (write(3, line, (size_t)n) != n)
        perror("mmaplog: write fd 3");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mmaplog PORT [bug]\n");
        return 2;
    }
    int bug = argc > 2 && strcmp(argv[2], "bug") == 0;
    int fd = open("log.dat", O_RDWR | O_CREAT, 0644);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        perror("mmaplog: log.dat");
        return 1;
    }
    if (st.st_size < SIZE && (ftruncate(fd, SIZE) < 0 || fsync(fd) < 0)) {
        perror("mmaplog: ftruncate");
        return 1;
    }
    log_ = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (log_ == MAP_FAILED) {
        perror("mmaplog: mmap");
        return 1;
    }
    report();

    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[1])) };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int l = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(l, 8) < 0) {
        perror("mmaplog: listen");
        return 1;
    }
    for (;;) {
        int c = accept(l, NULL, NULL);
        if (c < 0)
            continue;
        char buf[256];
        size_t have = 0;
        ssize_t got;
        while ((got = read(c, buf + have, sizeof buf - 1 - have)) > 0) {
            have += (size_t)got;
            buf[have] = 0;
            char *nl;
            while ((nl = strchr(buf, '\n'))) {
                *nl = 0;
                unsigned v;
                if (sscanf(buf, "PUT %u", &v) == 1 && log_[0] < MAX) {
                    log_[1 + log_[0]] = v;
                    log_[0]++;
                    char ack[64];
                    int n = snprintf(ack, sizeof ack, "ACK %u\n", v);
                    if (!bug)
                        msync(log_, SIZE, MS_SYNC);
                    report();
                    if (write(c, ack, (size_t)n) != n)
                        break;
                }
                have -= (size_t)(nl + 1 - buf);
                memmove(buf, nl + 1, have + 1);
            }
        }
        if (bug)
            msync(log_, SIZE, MS_SYNC);
        close(c);
    }
}
