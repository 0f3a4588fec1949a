/*
 * flood: sends a burst of messages, to run into the channel cap (--channel-cap).
 *
 *   flood PORT N
 *
 * Connects to 127.0.0.1:PORT (the connect returns once its CONNECT is delivered),
 * sends N one-line messages in a row, each its own send() and so its own message
 * in flight, writes {"sent": N} on fd 3, then blocks reading forever.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: flood PORT N\n");
        return 2;
    }
    int port = atoi(argv[1]), n = atoi(argv[2]);
    if (write(3, "{\"sent\":0}\n", 11) != 11)
        perror("flood: write fd 3");

    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        perror("flood: connect");
        return 1;
    }
    for (int i = 0; i < n; i++)
        if (send(fd, "m\n", 2, 0) != 2) {
            perror("flood: send");
            return 1;
        }
    char line[64];
    int len = snprintf(line, sizeof line, "{\"sent\":%d}\n", n);
    if (write(3, line, (size_t)len) != len)
        perror("flood: write fd 3");
    char buf[64];
    while (read(fd, buf, sizeof buf) > 0)
        ;
    return 0;
}
