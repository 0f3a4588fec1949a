/*
 * system_start: a node that runs a shell command with system() at start-up, then serves
 * like counter.c (system() makes a process of the node: docs/target-contract.md,
 * "Process trees"; the child execs /bin/sh, which forks and execs again for a command
 * that is not a builtin).
 *
 *   system_start PORT [--cmd COMMAND]
 *
 * At start it runs COMMAND (default: "echo started > started.txt; cat started.txt >
 * copy.txt", a builtin and an exec'd program, both writing into the node's working
 * directory) with system(), and requires that it exited with status 0; for the
 * default command it also reads copy.txt back and requires "started\n". Anything else
 * is an exit with status 1 and a message on stderr saying what went wrong.
 *
 * Then it listens on 127.0.0.1:PORT and, with poll(), accepts every connection and
 * reads every one of them. Its canonical state on fd 3 is {"count": N, "started":
 * true}, N the number of lines received so far over all connections; it writes it once
 * the command has run and after each change. It never replies. A connection that ends
 * (EOF or reset) is closed. So test/models/system_start.model has exactly the counts
 * of counter.model: the command at start changes no world.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_CONNS 16
#define DEFAULT_CMD "echo started > started.txt; cat started.txt > copy.txt"

static long count;

static void emit(void)
{
    char line[128];
    int n = snprintf(line, sizeof line, "{\"count\":%ld,\"started\":true}\n", count);
    if (write(3, line, (size_t)n) != n)
        perror("system_start: write fd 3");
}

/* Run cmd with system(); exit 1 unless it ran and exited with status 0. */
static void run_at_start(const char *cmd)
{
    int st = system(cmd);
    if (st == -1) {
        perror("system_start: system");
        exit(1);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (WIFSIGNALED(st))
            fprintf(stderr, "system_start: \"%s\" died of signal %d\n", cmd, WTERMSIG(st));
        else
            fprintf(stderr, "system_start: \"%s\" exited with status %d\n", cmd,
                    WEXITSTATUS(st));
        exit(1);
    }
    if (strcmp(cmd, DEFAULT_CMD) != 0)
        return;
    char buf[64] = "";
    FILE *f = fopen("copy.txt", "r");
    size_t got = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[got] = '\0';
    if (strcmp(buf, "started\n") != 0) {
        fprintf(stderr, "system_start: copy.txt holds \"%s\", not \"started\\n\"\n", buf);
        exit(1);
    }
    printf("system_start: the start-up command ran\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc != 2 && !(argc == 4 && strcmp(argv[2], "--cmd") == 0)) {
        fprintf(stderr, "usage: system_start PORT [--cmd COMMAND]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    run_at_start(argc == 4 ? argv[3] : DEFAULT_CMD);
    emit();

    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 16) < 0) {
        perror("system_start: listen");
        return 1;
    }

    int conns[MAX_CONNS], nconns = 0;
    for (;;) {
        struct pollfd pfd[1 + MAX_CONNS];
        pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        for (int i = 0; i < nconns; i++)
            pfd[1 + i] = (struct pollfd){ .fd = conns[i], .events = POLLIN };
        if (poll(pfd, (nfds_t)(1 + nconns), -1) < 0) {
            if (errno == EINTR)
                continue;
            perror("system_start: poll");
            return 1;
        }
        /* As in counter.c: only the connections poll() was given have a revents. */
        int polled = nconns;
        if ((pfd[0].revents & POLLIN) && nconns < MAX_CONNS) {
            int c = accept(lfd, NULL, NULL);
            if (c >= 0)
                conns[nconns++] = c;
        }
        for (int i = polled - 1; i >= 0; i--) {
            if (!pfd[1 + i].revents)
                continue;
            char buf[256];
            ssize_t got = read(conns[i], buf, sizeof buf);
            if (got <= 0) {                 /* EOF or reset: forget the connection */
                close(conns[i]);
                conns[i] = conns[--nconns];
                continue;
            }
            long before = count;
            for (ssize_t k = 0; k < got; k++)
                count += buf[k] == '\n';
            if (count != before)
                emit();
        }
    }
}
