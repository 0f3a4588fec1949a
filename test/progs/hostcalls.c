/*
 * hostcalls: makes one call that would act on the host, with arguments that do nothing
 * should it run natively (so a test that fails leaves the host as it was).
 *
 *   hostcalls CALL
 *
 * CALL is one of: bpf perf_event_open userfaultfd mount settimeofday clock_settime
 * adjtimex sethostname reboot init_module kexec_load swapon keyctl syslog kill_init
 * kill_all setpriority_user pidfd_open_init, or kill_child (fork a child, SIGKILL it,
 * reap it: the node's own, allowed). Writes {"call":CALL,"ret":R,"errno":E} on fd 3
 * (when it is let run), then blocks in accept() on 127.0.0.1:9100.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timex.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "misbehave.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: hostcalls CALL\n");
        return 2;
    }
    const char *c = argv[1];
    char big[300];
    memset(big, 'x', sizeof big);
    struct timex tx = { .modes = 0 };
    long r = -2;
    if (!strcmp(c, "bpf"))
        r = syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, NULL, 0);
    else if (!strcmp(c, "perf_event_open"))
        r = syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0);
    else if (!strcmp(c, "userfaultfd"))
        r = syscall(SYS_userfaultfd, ~0);
    else if (!strcmp(c, "mount"))
        r = syscall(SYS_mount, "none", "/nonexistent-cmc", "nosuchfs", 0, NULL);
    else if (!strcmp(c, "settimeofday"))
        r = syscall(SYS_settimeofday, NULL, NULL);
    else if (!strcmp(c, "clock_settime"))
        r = syscall(SYS_clock_settime, CLOCK_REALTIME, NULL);
    else if (!strcmp(c, "adjtimex"))
        r = syscall(SYS_adjtimex, &tx);
    else if (!strcmp(c, "sethostname"))
        r = syscall(SYS_sethostname, big, sizeof big);
    else if (!strcmp(c, "reboot"))
        r = syscall(SYS_reboot, 0, 0, 0, NULL);
    else if (!strcmp(c, "init_module"))
        r = syscall(SYS_init_module, NULL, 0, "");
    else if (!strcmp(c, "kexec_load"))
        r = syscall(SYS_kexec_load, 0, 0, NULL, ~0UL);
    else if (!strcmp(c, "swapon"))
        r = syscall(SYS_swapon, "/nonexistent-cmc", 0);
    else if (!strcmp(c, "keyctl"))
        r = syscall(SYS_keyctl, ~0, 0, 0, 0, 0);
    else if (!strcmp(c, "syslog"))
        r = syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
    else if (!strcmp(c, "kill_init"))
        r = kill(1, 0);
    else if (!strcmp(c, "kill_all"))
        r = kill(-1, 0);
    else if (!strcmp(c, "setpriority_user"))
        r = setpriority(PRIO_USER, getuid(), getpriority(PRIO_USER, getuid()));
    else if (!strcmp(c, "pidfd_open_init"))
        r = syscall(SYS_pidfd_open, 1, 0);
    else if (!strcmp(c, "kill_child")) {
        pid_t pid = fork();
        if (pid == 0) {
            for (;;)
                pause();
        }
        r = kill(pid, SIGKILL);
        int st;
        waitpid(pid, &st, 0);
        if (!WIFSIGNALED(st))
            r = -3;
    }
    char line[128];
    int n = snprintf(line, sizeof line, "{\"call\":\"%s\",\"ret\":%ld,\"errno\":%d}\n", c, r,
                     r < 0 ? errno : 0);
    if (write(3, line, (size_t)n) != n)
        perror("hostcalls: write fd 3");
    accept(listen_on("hostcalls", "9100"), NULL, NULL);   /* blocks: an emulated call */
    return 0;
}
