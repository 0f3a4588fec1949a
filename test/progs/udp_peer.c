/*
 * udp_peer: two nodes that talk by UDP only, for the `peers` line's check of datagrams
 * (test/test_peers.py).
 *
 *   udp_peer listen PORT          bind 127.0.0.1:PORT, then receive datagrams forever,
 *                                 writing {"got":N} on fd 3 after each
 *   udp_peer send PORT            send one datagram "hello" to 127.0.0.1:PORT, then
 *                                 write {"sent":1} on fd 3 and block receiving on
 *                                 its socket (nobody answers: quiescent)
 *
 * The sender sleeps 1 s (a FIRE) before sending, so that the receiver is bound first
 * in some worlds and not in others.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void state(const char *line)
{
    if (write(3, line, strlen(line)) != (ssize_t)strlen(line))
        perror("udp_peer: write fd 3");
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: udp_peer listen|send PORT\n");
        return 2;
    }
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    if (s < 0) {
        perror("udp_peer: socket");
        return 1;
    }
    if (strcmp(argv[1], "listen") == 0) {
        if (bind(s, (struct sockaddr *)&sa, sizeof sa)) {
            perror("udp_peer: bind");
            return 1;
        }
        state("{\"got\":0}\n");
        for (int got = 1;; got++) {
            char buf[64], line[32];
            if (recv(s, buf, sizeof buf, 0) < 0) {
                perror("udp_peer: recv");
                return 1;
            }
            snprintf(line, sizeof line, "{\"got\":%d}\n", got);
            state(line);
        }
    }
    state("{\"sent\":0}\n");
    struct timespec second = { 1, 0 };
    nanosleep(&second, NULL);
    if (sendto(s, "hello", 5, 0, (struct sockaddr *)&sa, sizeof sa) != 5) {
        perror("udp_peer: sendto");
        return 1;
    }
    state("{\"sent\":1}\n");
    char c;
    (void)recv(s, &c, 1, 0);     /* nobody answers: blocked for good */
    return 0;
}
