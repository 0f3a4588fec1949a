/*
 * bootlog: a node whose start changes its own directory where cmc does not see it
 * (test/test_zygote.py; docs/design.md, "Zygotes: a start run once").
 *
 *   bootlog PORT [home|stat]
 *
 * At every start but the first it appends a line to boots.log in its directory, through
 * an open that runs natively (no O_CREAT, no O_TRUNC) and a write that does too (its
 * model has `disk off`): a start kept and copied with that line in it would have it in
 * every world it is forked into, and one copied without it would lack it, so a start
 * cmc keeps must end before that open. The first start creates the file. With `home`
 * the file is named by $HOME/boots.log (HOME is the node's directory), not relatively.
 * With `stat`, the start first asks whether a file `marked` is there (access(2), which
 * runs natively, unseen), before anything else, and the state has "marked": 0 or 1; a
 * client's line makes the file (an open that creates it, which cmc sees) and the state
 * says so. A kept start is used only where the directory shows what it showed to it. Its state
 * on fd 3 is {"boots": N}, the lines in the file; it answers each line a client
 * sends with "boots N".
 *
 *   bootlog PORT lock MB
 *
 * With `lock`, each start first takes an exclusive flock(2) of the file `lock` without
 * waiting (a call that runs natively: the real kernel's lock), then fills MB megabytes of
 * memory, so that its end, when it is killed, takes the kernel a while: the memory is
 * freed before the descriptors are closed and the lock let go. Its state has "locked":
 * 1 when another process still held the lock (the incarnation a CRASH ended), else 0.
 *
 * With `reserve`, each start first reserves 20 GiB of writable address space
 * (MAP_NORESERVE, untouched), as a sanitizer's shadow is: more than cmc searches for its
 * directory's name in a start it keeps.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bootlog PORT [home|stat|reserve|lock MB]\n");
        return 2;
    }
    const char *how = argc > 2 ? argv[2] : "";
    int stat_mode = strcmp(how, "stat") == 0;
    if (strcmp(how, "reserve") == 0 &&
        mmap(NULL, (size_t)20 << 30, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) == MAP_FAILED) {
        perror("bootlog: mmap");
        return 1;
    }
    int lock_mode = argc > 3 && strcmp(how, "lock") == 0, locked = 0;
    if (lock_mode) {
        int lfd = open("lock", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (lfd < 0) { perror("bootlog: lock"); return 1; }
        if (flock(lfd, LOCK_EX | LOCK_NB)) {
            if (errno != EWOULDBLOCK) { perror("bootlog: flock"); return 1; }
            locked = 1;
        }
        size_t size = (size_t)atoi(argv[3]) << 20;
        char *fill = malloc(size);
        if (fill == NULL) { perror("bootlog: malloc"); return 1; }
        memset(fill, 1, size);
    }
    int marked = stat_mode && access("marked", F_OK) == 0;
    char name[4096] = "boots.log";
    if (strcmp(how, "home") == 0)
        snprintf(name, sizeof name, "%s/boots.log", getenv("HOME") ? getenv("HOME") : ".");
    int fd = open(name, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd >= 0) {
        if (write(fd, "boot\n", 5) != 5) { perror("bootlog: write"); return 1; }
    } else {
        fd = open(name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) { perror("bootlog: create"); return 1; }
    }
    close(fd);
    char buf[4096];
    int boots = 0;
    fd = open(name, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf) : -1;
    for (ssize_t i = 0; i < n; i++)
        boots += buf[i] == '\n';
    if (fd >= 0)
        close(fd);
    char line[64];
    int len = stat_mode ? snprintf(line, sizeof line, "{\"boots\":%d,\"marked\":%d}\n",
                                   boots, marked)
            : lock_mode ? snprintf(line, sizeof line, "{\"boots\":%d,\"locked\":%d}\n",
                                   boots, locked)
                        : snprintf(line, sizeof line, "{\"boots\":%d}\n", boots);
    if (write(3, line, (size_t)len) != len) { perror("bootlog: write fd 3"); return 1; }

    int srv = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(srv, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(srv, (struct sockaddr *)&a, sizeof a) || listen(srv, 8)) {
        perror("bootlog: listen");
        return 1;
    }
    for (;;) {
        int c = accept(srv, NULL, NULL);
        if (c < 0)
            continue;
        if (read(c, buf, sizeof buf) > 0) {
            if (stat_mode && !marked) {
                int m = open("marked", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                if (m >= 0)
                    close(m);
                marked = 1;
                len = snprintf(line, sizeof line, "{\"boots\":%d,\"marked\":1}\n", boots);
                if (write(3, line, (size_t)len) != len) { perror("bootlog: write fd 3"); return 1; }
            }
            len = snprintf(line, sizeof line, "boots %d\n", boots);
            if (write(c, line, (size_t)len) != len) { /* the client is gone */ }
        }
        close(c);
    }
}
