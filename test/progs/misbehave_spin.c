/*
 * misbehave_spin: a node that runs without ever blocking.
 *
 *   misbehave_spin cpu|calls PORT
 *
 * Listens on 127.0.0.1:PORT; once a client connected it spins: `cpu` in a loop
 * that makes no system call at all, `calls` in a busy loop of non-blocking emulated
 * calls (recv(MSG_DONTWAIT) answering EAGAIN on the accepted socket, then
 * clock_gettime), the classic busy-polling bug. Either way it never blocks, and cmc
 * must stop at the watchdog (--watchdog) with exit status 3.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "misbehave.h"

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int l = listen_on("misbehave_spin", argv[2]);
    int c = accept(l, NULL, NULL);
    if (c < 0) {
        perror("misbehave_spin: accept");
        return 1;
    }
    char buf[64];
    if (strcmp(argv[1], "cpu") == 0) {
        for (volatile unsigned long i = 0;; i++)
            ;
    }
    for (;;) {                      /* never blocks: recv says EAGAIN until data comes */
        struct timespec t;
        if (recv(c, buf, sizeof buf, MSG_DONTWAIT) > 0)
            continue;
        clock_gettime(CLOCK_MONOTONIC, &t);
    }
}
