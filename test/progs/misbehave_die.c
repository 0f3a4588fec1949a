/*
 * misbehave_die: a node that dies outside a CRASH action.
 *
 *   misbehave_die abort|exit|segv PORT
 *
 * Listens on 127.0.0.1:PORT and blocks in accept(); once a client connected it
 * calls abort() (SIGABRT), exit(7), or writes through a null pointer (SIGSEGV).
 * cmc must stop with exit status 3 and name the node and the step.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "misbehave.h"

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int l = listen_on("misbehave_die", argv[2]);
    if (write(3, "{\"up\":true}\n", 12) != 12)
        perror("misbehave_die: fd 3");
    if (accept(l, NULL, NULL) < 0) {
        perror("misbehave_die: accept");
        return 1;
    }
    if (strcmp(argv[1], "abort") == 0)
        abort();
    if (strcmp(argv[1], "segv") == 0)
        *(volatile int *)(long)(argc - 3) = 1;
    fprintf(stderr, "misbehave_die: exiting with status 7\n");
    exit(7);
}
