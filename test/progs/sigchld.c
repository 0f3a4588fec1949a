/*
 * sigchld: a signal that interrupts a held emulated call (docs/target-contract.md,
 * "Process trees").
 *
 *   sigchld eintr|restart PORT
 *
 * Serves one client on 127.0.0.1:PORT. Once it has accepted the client it forks a
 * child that sleeps 1 s (a FIRE of the child's nanosleep) and exits, and reads
 * the client's line with recv(). The child's end sends SIGCHLD; the parent catches
 * it with a handler installed without SA_RESTART (mode eintr) or with it (mode
 * restart). As on Linux: without SA_RESTART a recv that is waiting when the signal
 * comes fails with EINTR (the parent replies "EINTR" and reads again); with
 * SA_RESTART it is made again and the client never sees it. The parent reaps the
 * child (waitpid) once the handler ran, and replies "GOT <line> chld=<handler runs>
 * reaped=<children reaped>" when the line comes.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t chld;

static void on_chld(int sig)
{
    (void)sig;
    chld++;
}

static void say(int c, const char *line)
{
    size_t n = strlen(line);
    if (send(c, line, n, 0) != (ssize_t)n)
        perror("sigchld: send");
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "eintr") != 0 && strcmp(argv[1], "restart") != 0)) {
        fprintf(stderr, "usage: sigchld eintr|restart PORT\n");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_chld;
    sa.sa_flags = strcmp(argv[1], "restart") == 0 ? SA_RESTART : 0;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGCHLD, &sa, NULL) != 0) {
        perror("sigchld: sigaction");
        return 1;
    }
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)atoi(argv[2]));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 4) != 0) {
        perror("sigchld: listen");
        return 1;
    }
    int c;
    while ((c = accept(l, NULL, NULL)) < 0 && errno == EINTR) {}
    if (c < 0) {
        perror("sigchld: accept");
        return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("sigchld: fork");
        return 1;
    }
    if (pid == 0) {
        struct timespec one = { 1, 0 };
        nanosleep(&one, NULL);
        _exit(0);
    }
    int reaped = 0;
    char line[256];
    size_t have = 0;
    for (;;) {
        ssize_t n = recv(c, line + have, sizeof line - 1 - have, 0);
        if (chld && !reaped && waitpid(pid, NULL, WNOHANG) == pid)
            reaped = 1;
        if (n < 0 && errno == EINTR) {
            say(c, "EINTR\n");
            continue;
        }
        if (n <= 0)
            break;
        have += (size_t)n;
        line[have] = '\0';
        char *nl = strchr(line, '\n');
        if (nl == NULL)
            continue;
        *nl = '\0';
        char out[400];
        snprintf(out, sizeof out, "GOT %s chld=%d reaped=%d\n", line, (int)chld, reaped);
        say(c, out);
        have = 0;
    }
    for (;;)
        pause();
}
