/*
 * misbehave_fork: a node whose process tree tries to leave cmc (docs/target-contract.md,
 * "Process trees").
 *
 *   misbehave_fork setsid|setpgid|unshare|ptrace PORT
 *
 * Blocks in accept() on 127.0.0.1:PORT; once a client connected it forks a child
 * (the child belongs to the node: that part is supported), and the child then calls
 * setsid() or setpgid(0, 0) (either would take it out of the node's process group,
 * which a CRASH kills), unshare(CLONE_NEWUTS), or ptrace(PTRACE_TRACEME). cmc must
 * stop with exit status 3, naming the node, the step, the process and the call, and
 * no process may be left (the child sleeps natively meanwhile in the setsid case
 * if cmc wrongly lets it run).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "misbehave.h"

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int l = listen_on("misbehave_fork", argv[2]);
    if (accept(l, NULL, NULL) < 0) {
        perror("misbehave_fork: accept");
        return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("misbehave_fork: fork");
        return 1;
    }
    if (pid == 0) {
        long r = -1;
        if (strcmp(argv[1], "setsid") == 0)
            r = setsid();
        else if (strcmp(argv[1], "setpgid") == 0)
            r = setpgid(0, 0);
        else if (strcmp(argv[1], "unshare") == 0)
            r = unshare(CLONE_NEWUTS);
        else if (strcmp(argv[1], "ptrace") == 0)
            r = ptrace(PTRACE_TRACEME, 0, NULL, NULL);
        fprintf(stderr, "misbehave_fork: %s returned %ld\n", argv[1], r);
        execlp("sleep", "sleep", "31.5", (char *)NULL);
        _exit(127);
    }
    waitpid(pid, NULL, 0);
    for (;;)
        accept(l, NULL, NULL);
}
