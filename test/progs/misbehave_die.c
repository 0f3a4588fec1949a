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

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[2])) };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(l, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(l, 4) < 0) {
        perror("misbehave_die: listen");
        return 1;
    }
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
