/*
 * ipc: a parent and its child sharing memory the two ways programs do, under names
 * every world of a run would share if cmc let them (test/test_ipc.py):
 *
 *   ipc PORT
 *
 * At start it makes a POSIX shared-memory object /cmc-ipc-test (shm_open) and a SysV
 * segment with the fixed key 0x434d4301 (shmget), 4 KiB each, and maps both; a child
 * process adds 1 to a counter in each and exits, and the parent, once it has reaped
 * the child, reads them. For each line a client sends, the parent adds 1 to each. It
 * writes {"posix": P, "sysv": S} on fd 3 at start and after each line (then answers
 * "ok"). Neither object is ever removed by the program: what outlives a world is
 * cmc's to remove. A world that shares either with another world (or another run)
 * starts from another count, or sees its counter move by itself.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define KEY 0x434d4301

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static volatile long *posix_counter, *sysv_counter;

static void emit(void)
{
    char line[96];
    int n = snprintf(line, sizeof line, "{\"posix\":%ld,\"sysv\":%ld}\n",
                     *posix_counter, *sysv_counter);
    if (write(3, line, (size_t)n) != n)
        die("ipc: write fd 3");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: ipc PORT\n");
        return 2;
    }
    int fd = shm_open("/cmc-ipc-test", O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, 4096) < 0)
        die("ipc: shm_open");
    posix_counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (posix_counter == MAP_FAILED)
        die("ipc: mmap");
    close(fd);
    int id = shmget(KEY, 4096, IPC_CREAT | 0600);
    if (id < 0)
        die("ipc: shmget");
    sysv_counter = shmat(id, NULL, 0);
    if (sysv_counter == (void *)-1)
        die("ipc: shmat");
    pid_t child = fork();
    if (child < 0)
        die("ipc: fork");
    if (child == 0) {
        (*posix_counter)++;
        (*sysv_counter)++;
        _exit(0);
    }
    int status;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status))
        die("ipc: waitpid");
    emit();

    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 8) < 0)
        die("ipc: listen");
    for (;;) {
        int c = accept(lfd, NULL, NULL);
        if (c < 0)
            die("ipc: accept");
        char buf[64];
        ssize_t n;
        while ((n = read(c, buf, sizeof buf)) > 0) {
            for (ssize_t k = 0; k < n; k++) {
                if (buf[k] != '\n')
                    continue;
                (*posix_counter)++;
                (*sysv_counter)++;
                emit();
                if (write(c, "ok\n", 3) != 3)
                    break;
            }
        }
        close(c);
    }
}
