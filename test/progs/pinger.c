/*
 * pinger: on a timer, connects and sends one line.
 *
 *   pinger PORT
 *
 * Writes {"sent":0} on fd 3, sleeps 1 s (nanosleep: a FIRE), connects to
 * 127.0.0.1:PORT (the connect returns once its CONNECT is delivered), sends "ping\n",
 * writes {"sent":1}, then blocks reading until the peer closes, and exits.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: pinger PORT\n");
        return 2;
    }
    if (write(3, "{\"sent\":0}\n", 11) != 11)
        perror("pinger: write fd 3");
    struct timespec second = { 1, 0 };
    nanosleep(&second, NULL);

    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        perror("pinger: connect");
        return 1;
    }
    if (send(fd, "ping\n", 5, 0) != 5) {
        perror("pinger: send");
        return 1;
    }
    if (write(3, "{\"sent\":1}\n", 11) != 11)
        perror("pinger: write fd 3");
    char buf[64];
    while (read(fd, buf, sizeof buf) > 0)
        ;
    return 0;
}
