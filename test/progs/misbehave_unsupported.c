/*
 * misbehave_unsupported: calls cmc does not emulate.
 *
 *   misbehave_unsupported raw|packet|ioctl PORT
 *
 * Blocks in accept() on 127.0.0.1:PORT; once a client connected it asks for a raw
 * socket (socket(AF_INET, SOCK_RAW, IPPROTO_ICMP)), a packet socket
 * (socket(AF_PACKET, SOCK_RAW, 0), which would reach the host's real network), or an
 * ioctl cmc does not know (SIOCGSTAMP) on the accepted virtual socket. cmc must stop
 * with exit status 3, naming the node, the step and the call with its arguments --
 * never hang, never answer something silently wrong.
 */
#include <arpa/inet.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "misbehave.h"

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int l = listen_on("misbehave_unsupported", argv[2]);
    int c = accept(l, NULL, NULL);
    if (c < 0) {
        perror("misbehave_unsupported: accept");
        return 1;
    }
    int r;
    if (strcmp(argv[1], "raw") == 0)
        r = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
    else if (strcmp(argv[1], "packet") == 0)
        r = socket(AF_PACKET, SOCK_RAW, 0);
    else {
        struct timeval tv;
        r = ioctl(c, SIOCGSTAMP, &tv);
    }
    fprintf(stderr, "misbehave_unsupported: %s returned %d\n", argv[1], r);
    if (r >= 0 && strcmp(argv[1], "ioctl") != 0)
        close(r);
    for (;;)
        accept(l, NULL, NULL);
}
