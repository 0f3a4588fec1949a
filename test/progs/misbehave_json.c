/*
 * misbehave_json: a node that writes a line that is not JSON on fd 3 or fd 193.
 *
 *   misbehave_json 3|193 PORT
 *
 * Writes one valid JSON line on the descriptor, blocks in accept() on
 * 127.0.0.1:PORT, and once a client connected writes `{"broken": ` and a newline.
 * cmc must stop with exit status 3, naming the node, the step, the descriptor and the
 * line.
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
    int fd = atoi(argv[1]);
    int l = listen_on("misbehave_json", argv[2]);
    const char *good = "{\"fine\":1}\n", *bad = "{\"broken\": \n";
    if (write(fd, good, strlen(good)) < 0)
        perror("misbehave_json: write");
    if (accept(l, NULL, NULL) < 0) {
        perror("misbehave_json: accept");
        return 1;
    }
    if (write(fd, bad, strlen(bad)) < 0)
        perror("misbehave_json: write");
    for (;;)
        accept(l, NULL, NULL);
}
