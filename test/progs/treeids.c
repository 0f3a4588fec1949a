/*
 * treeids: a server of a parent and one worker that checks, on every request, the ids
 * and signals a copy of a process tree must keep as the original's (docs/design.md,
 * "Copies of process trees").
 *
 *   treeids PORT
 *
 * The parent notes its pid, listens on 127.0.0.1:PORT, forks a worker and waits for it
 * (waitpid(-1), natively). The worker serves one connection at a time, one line each:
 *
 *   IDS  -> "IDS ok" when getpid() is still the pid it had when it began and getppid()
 *           the parent's pid as the parent noted it before the fork; "IDS bad ..." else
 *   SIG  -> the worker sends SIGUSR1 to getppid(); the parent's handler (no SA_RESTART)
 *           ends its waitpid with EINTR, and the parent sends SIGUSR2 to the pid fork
 *           returned it; the worker answers "SIG ok" once SIGUSR2 came
 *   EXIT -> "EXIT ok", and the worker exits 7; the parent reaps it and checks that
 *           waitpid gave the pid fork returned, status 7, and that getpid() is the pid it
 *           noted, then forks the next worker (which answers as the first did)
 *
 * A parent that finds anything amiss says so on stderr and exits 1: the node's error.
 * State: none on fd 3 (the node is fingerprinted by its input history).
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
#include <unistd.h>
#include "misbehave.h"

static volatile sig_atomic_t usr1, usr2;

static void on_usr1(int sig)
{
    (void)sig;
    usr1++;
}

static void on_usr2(int sig)
{
    (void)sig;
    usr2++;
}

static void catch(int sig, void (*fn)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);           /* no SA_RESTART: a wait ends with EINTR */
    if (sigaction(sig, &sa, NULL) < 0) {
        perror("treeids: sigaction");
        exit(1);
    }
}

static void say(int c, const char *line)
{
    size_t n = strlen(line);
    if (send(c, line, n, 0) != (ssize_t)n)
        perror("treeids: send");
}

static void worker(int lfd, pid_t parent)
{
    pid_t me = getpid();
    sigset_t usr2_only, old;
    sigemptyset(&usr2_only);
    sigaddset(&usr2_only, SIGUSR2);
    for (;;) {
        int c = accept(lfd, NULL, NULL);
        if (c < 0) {
            if (errno == EINTR)
                continue;
            perror("treeids: accept");
            _exit(1);
        }
        char buf[64];
        ssize_t n = recv(c, buf, sizeof buf - 1, 0);
        buf[n > 0 ? n : 0] = 0;
        char out[128];
        if (!strncmp(buf, "IDS", 3)) {
            pid_t now = getpid(), pp = getppid();
            if (now == me && pp == parent)
                snprintf(out, sizeof out, "IDS ok\n");
            else
                snprintf(out, sizeof out, "IDS bad pid %d/%d ppid %d/%d\n", (int)now, (int)me,
                         (int)pp, (int)parent);
            say(c, out);
        } else if (!strncmp(buf, "SIG", 3)) {
            sigprocmask(SIG_BLOCK, &usr2_only, &old);
            usr2 = 0;
            if (kill(getppid(), SIGUSR1) < 0) {
                snprintf(out, sizeof out, "SIG bad kill %s\n", strerror(errno));
            } else {
                while (!usr2)
                    sigsuspend(&old);
                snprintf(out, sizeof out, "SIG ok\n");
            }
            sigprocmask(SIG_SETMASK, &old, NULL);
            say(c, out);
        } else if (!strncmp(buf, "EXIT", 4)) {
            say(c, "EXIT ok\n");
            close(c);
            _exit(7);
        } else {
            say(c, "ERR\n");
        }
        close(c);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: treeids PORT\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    catch(SIGUSR1, on_usr1);
    catch(SIGUSR2, on_usr2);
    pid_t self = getpid();
    int lfd = listen_on("treeids", argv[1]);
    for (;;) {
        pid_t child = fork();
        if (child < 0) {
            perror("treeids: fork");
            return 1;
        }
        if (child == 0)
            worker(lfd, self);
        for (;;) {
            int st;
            pid_t got = waitpid(-1, &st, 0);
            if (got < 0 && errno == EINTR) {
                if (usr1) {
                    usr1 = 0;
                    if (kill(child, SIGUSR2) < 0) {
                        perror("treeids: kill worker");
                        return 1;
                    }
                }
                continue;
            }
            if (got != child || !WIFEXITED(st) || WEXITSTATUS(st) != 7 || getpid() != self) {
                fprintf(stderr, "treeids: waitpid gave %d (worker %d), status %#x, pid %d "
                        "(noted %d)\n", (int)got, (int)child, st, (int)getpid(), (int)self);
                return 1;
            }
            break;                      /* the next worker */
        }
    }
}
