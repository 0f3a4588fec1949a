/*
 * misbehave_fork: a node that creates a new process.
 *
 *   misbehave_fork fork|system|vfork PORT
 *
 * Blocks in accept() on 127.0.0.1:PORT; once a client connected it calls fork(),
 * system("true") (posix_spawn: clone with CLONE_VM|CLONE_VFORK) or vfork(). cmc
 * does not support processes other than the node's own (SPEC §2): it must stop with
 * exit status 3, naming the node, the step and the call, and no child may be left.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    pid_t pid;
    if (strcmp(argv[1], "system") == 0) {
        int st = system("sleep 31.5");
        fprintf(stderr, "misbehave_fork: system returned %d\n", st);
    } else {
        pid = strcmp(argv[1], "vfork") == 0 ? vfork() : fork();
        if (pid == 0) {
            execlp("sleep", "sleep", "31.5", (char *)NULL);
            _exit(127);
        }
        if (pid < 0)
            perror("misbehave_fork: fork");
        else
            waitpid(pid, NULL, 0);
    }
    for (;;)
        accept(l, NULL, NULL);
}
