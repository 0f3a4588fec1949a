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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "misbehave.h"

/* Write through a null pointer, with no sanitizer in the way: the process must die of
 * the real SIGSEGV (ASan would report it and exit 1, UBSan stop at the null store), so
 * the signal's disposition is reset to the default first. */
__attribute__((noinline, no_sanitize("address", "undefined")))
static void segv(int zero)
{
    signal(SIGSEGV, SIG_DFL);
    *(volatile int *)(long)zero = 1;
}

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
        segv(argc - 3);
    fprintf(stderr, "misbehave_die: exiting with status 7\n");
    exit(7);
}
