/* misbehave.h: what the misbehave_*.c programs (and a few other test programs that end
 * blocked in accept) share: a TCP listener on 127.0.0.1:PORT, set up the way any server
 * does it (and failing loudly). */
#ifndef CMC_MISBEHAVE_H
#define CMC_MISBEHAVE_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

static struct sockaddr_in loopback(const char *port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(port)) };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    return sa;
}

/* A listening socket on 127.0.0.1:port; on failure "WHO: listen: ..." and exit 1. */
static int listen_on(const char *who, const char *port)
{
    struct sockaddr_in sa = loopback(port);
    int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(l, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(l, 4) < 0) {
        char what[128];
        snprintf(what, sizeof what, "%s: listen", who);
        perror(what);
        exit(1);
    }
    return l;
}

#endif
