/*
 * pidboot: a node that reads its pid while it starts and relies on it afterwards
 * (test/test_zygote.py; docs/design.md, "Zygotes: a start run once").
 *
 *   pidboot PORT
 *
 * Its start reads its pid before it listens, so with --fast a relaunch forked from the
 * kept start is told the kept start's pid. Once it listens it does what PostgreSQL does
 * with its postmaster.pid: a pid file "pid" left by an earlier incarnation must name a
 * process that has ended (kill(pid, 0) fails with ESRCH), else it says so on stderr and
 * exits 1 (the node's error); then it writes its own pid there. Each line a client sends
 * is answered "ok N" (N: lines served) when, with the pid its start read:
 *   - getpid() still gives it;
 *   - kill(pid, SIGUSR1) and raise(SIGUSR1) (glibc: tgkill(getpid(), gettid())) each
 *     ran its handler;
 *   - /proc/PID/limits shows the descriptor limit it has just set (setrlimit);
 *   - a child it forks finds it its parent (getppid()) and exits 0, reaped natively;
 * and "bad WHAT" else. Its state on fd 3 is {"served":N}.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t usr1;

static void on_usr1(int sig)
{
    (void)sig;
    usr1++;
}

/* The soft descriptor limit /proc/PID/limits shows, or -1. */
static long limits_soft(pid_t pid)
{
    char path[64], buf[8192];
    snprintf(path, sizeof path, "/proc/%d/limits", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char *line = strstr(buf, "Max open files");
    return line ? strtol(line + strlen("Max open files"), NULL, 10) : -1;
}

/* What is amiss with the pid its start read, or NULL. */
static const char *check(pid_t me, int served)
{
    if (getpid() != me)
        return "getpid";
    int before = usr1;
    if (kill(me, SIGUSR1) || usr1 != before + 1)
        return "kill";
    if (raise(SIGUSR1) || usr1 != before + 2)
        return "raise";
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl))
        return "getrlimit";
    rl.rlim_cur = 200 + (rlim_t)served;
    if (setrlimit(RLIMIT_NOFILE, &rl) || limits_soft(me) != (long)rl.rlim_cur)
        return "limits";
    pid_t child = fork();
    if (child < 0)
        return "fork";
    if (child == 0)
        _exit(getppid() == me ? 0 : 1);
    int st;
    if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st))
        return "getppid";
    return NULL;
}

static void state(int served)
{
    char line[64];
    int len = snprintf(line, sizeof line, "{\"served\":%d}\n", served);
    if (write(3, line, (size_t)len) != len) {
        perror("pidboot: write fd 3");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: pidboot PORT\n");
        return 2;
    }
    pid_t me = getpid();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGUSR1, &sa, NULL)) {
        perror("pidboot: sigaction");
        return 1;
    }
    int srv = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(srv, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(srv, (struct sockaddr *)&a, sizeof a) || listen(srv, 8)) {
        perror("pidboot: listen");
        return 1;
    }
    char buf[4096];
    int fd = open("pid", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        buf[n > 0 ? n : 0] = 0;
        int old = atoi(buf);
        if (old > 0 && (kill(old, 0) == 0 || errno != ESRCH)) {
            fprintf(stderr, "pidboot: the pid file names pid %d, which is alive\n", old);
            return 1;
        }
    }
    fd = open("pid", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || dprintf(fd, "%d\n", (int)me) < 0) {
        perror("pidboot: pid file");
        return 1;
    }
    close(fd);
    int served = 0;
    state(served);
    for (;;) {
        int c = accept(srv, NULL, NULL);
        if (c < 0)
            continue;
        if (read(c, buf, sizeof buf) > 0) {
            const char *bad = check(me, served);
            state(++served);
            char line[64];
            int len = bad ? snprintf(line, sizeof line, "bad %s\n", bad)
                          : snprintf(line, sizeof line, "ok %d\n", served);
            if (write(c, line, (size_t)len) != len) { /* the client is gone */ }
        }
        close(c);
    }
}
