/*
 * daemonize: runs a program as a daemon, the way a service's init script does.
 *
 *   daemonize PROGRAM ARGS...
 *
 * Forks; the parent exits 0. The child calls setsid() (a session and process group of
 * its own; a second setsid fails with EPERM, as on Linux), forks again and exits 0;
 * the grandchild moves into a group of its own with setpgid(0, 0) and execs PROGRAM
 * with ARGS. A relative PROGRAM is taken from this program's folder. The program is
 * then in no group of the node's launch, yet a CRASH, and cmc's end, must kill it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: daemonize PROGRAM ARGS...\n");
        return 2;
    }
    char path[4096];
    if (argv[1][0] == '/') {
        snprintf(path, sizeof path, "%s", argv[1]);
    } else {
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n < 0)
            return 1;
        self[n] = 0;
        snprintf(path, sizeof path, "%s/%s", dirname(self), argv[1]);
    }
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid > 0)
        return 0;                       /* the launched process ends at once */
    if (setsid() < 0) {
        perror("daemonize: setsid");
        _exit(1);
    }
    if (setsid() >= 0 || errno != EPERM) {      /* a session leader cannot again */
        fprintf(stderr, "daemonize: a second setsid did not fail with EPERM\n");
        _exit(1);
    }
    pid = fork();
    if (pid < 0)
        _exit(1);
    if (pid > 0)
        _exit(0);
    if (setpgid(0, 0) < 0) {
        perror("daemonize: setpgid");
        _exit(1);
    }
    execv(path, argv + 1);
    perror("daemonize: execv");
    _exit(127);
}
