/*
 * misbehave_thread: two threads blocked in emulated calls at once.
 *
 *   misbehave_thread PORT
 *
 * Listens on 127.0.0.1:PORT, connects to itself, then starts a thread that blocks in
 * recv() on the connection (nothing is ever sent) while the main thread blocks in
 * accept() (nobody else connects). cmc serves one blocked thread per node (SPEC §2):
 * it must stop with exit status 3, naming the node and the calls.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "misbehave.h"

static int conn;

static void *reader(void *arg)
{
    char buf[8];
    (void)arg;
    if (recv(conn, buf, sizeof buf, 0) < 0)
        perror("misbehave_thread: recv");
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    int l = listen_on("misbehave_thread", argv[1]);
    struct sockaddr_in sa = loopback(argv[1]);
    conn = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(conn, (struct sockaddr *)&sa, sizeof sa) < 0) {
        perror("misbehave_thread: connect");
        return 1;
    }
    int a = accept(l, NULL, NULL);
    if (a < 0) {
        perror("misbehave_thread: accept");
        return 1;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, reader, NULL) != 0) {
        perror("misbehave_thread: pthread_create");
        return 1;
    }
    for (;;)
        accept(l, NULL, NULL);
}
