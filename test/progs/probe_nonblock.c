/*
 * probe_nonblock: non-blocking TCP sockets.
 *
 *   probe_nonblock 0 PORT   server: SOCK_NONBLOCK listener on 127.0.0.1:PORT
 *   probe_nonblock 1 PORT   client: O_NONBLOCK (fcntl) connect
 *
 * Checks: accept on an empty backlog is EAGAIN; a non-blocking connect is
 * EINPROGRESS, then poll reports POLLOUT and SO_ERROR is 0, a second connect
 * reports the success (0) and a third is EISCONN; accept() does not inherit O_NONBLOCK; recv with nothing buffered is
 * EAGAIN; poll with timeout 0 on nothing is 0; EOF after the peer's close.
 * The exchange is ordered so that every EAGAIN is certain natively too: each side
 * expects nothing while the other one waits for it.
 */

#include "probe.h"

static void server(int port)
{
    int s = tcp_listener(port, SOCK_NONBLOCK);
    CHECK("listener F_GETFL has O_NONBLOCK", !!(fcntl(s, F_GETFL) & O_NONBLOCK), 1);
    ERR("accept on an empty backlog", accept(s, NULL, NULL), EAGAIN);
    struct pollfd p = { .fd = s, .events = POLLIN };
    CHECK("poll(listener, timeout 0) before any connect", poll(&p, 1, 0), 0);
    CHECK("poll(listener) revents before any connect", p.revents, 0);
    phase();

    CHECK("poll(listener, -1) revents", wait_for(s, POLLIN), POLLIN);
    struct sockaddr_in peer = { 0 };
    socklen_t len = sizeof peer;
    int c = (int)OK("accept", accept(s, (struct sockaddr *)&peer, &len));
    CHECK("accept addrlen", len, sizeof peer);
    CHECK("accept peer family", peer.sin_family, AF_INET);
    CHECK("accepted socket does not inherit O_NONBLOCK", fcntl(c, F_GETFL) & O_NONBLOCK, 0);
    ERR("accept with the backlog empty again", accept(s, NULL, NULL), EAGAIN);
    OK("fcntl(F_SETFL, O_NONBLOCK)", fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK));
    char buf[64] = "";
    ERR("recv before the client sent anything", recv(c, buf, sizeof buf, 0), EAGAIN);
    ERR("read before the client sent anything", read(c, buf, sizeof buf), EAGAIN);
    CHECK("send hello", send(c, "hello", 5, 0), 5);
    phase();

    CHECK("poll(accepted) for the ping", wait_for(c, POLLIN) & POLLIN, POLLIN);
    size_t got = 0;
    while (got < 10) {             /* non-blocking: EAGAIN until the rest arrives */
        ssize_t r = recv(c, buf + got, 10 - got, 0);
        if (r > 0)
            got += (size_t)r;
        else if (r < 0 && errno == EAGAIN)
            wait_for(c, POLLIN);
        else {
            fail("recv ping: %zd (%s)", r, en(errno));
            break;
        }
    }
    MEM("ping", buf, got, "ping-12345");
    ERR("recv after the whole ping", recv(c, buf, sizeof buf, 0), EAGAIN);
    CHECK("send bye", send(c, "bye", 3, 0), 3);
    phase();

    CHECK("poll(accepted) for EOF", wait_for(c, POLLIN) & POLLIN, POLLIN);
    CHECK("recv at EOF", recv(c, buf, sizeof buf, 0), 0);
    CHECK("recv at EOF again", recv(c, buf, sizeof buf, 0), 0);
    finish();
}

static void client(int port)
{
    int s = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    CHECK("new socket is blocking", fcntl(s, F_GETFL) & O_NONBLOCK, 0);
    OK("fcntl(F_SETFL, O_NONBLOCK)", fcntl(s, F_SETFL, O_NONBLOCK));
    CHECK("F_GETFL after F_SETFL", fcntl(s, F_GETFL), O_RDWR | O_NONBLOCK);
    struct sockaddr_in sa = sin4("127.0.0.1", port);
    ERR("non-blocking connect", connect(s, (struct sockaddr *)&sa, sizeof sa), EINPROGRESS);
    phase();

    struct pollfd p = { .fd = s, .events = POLLOUT };
    while (poll(&p, 1, -1) == 0)
        ;
    CHECK("poll after connect: POLLOUT", p.revents, POLLOUT);
    int err = -1;
    socklen_t len = sizeof err;
    OK("getsockopt(SO_ERROR)", getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len));
    CHECK("SO_ERROR after connect", err, 0);
    CHECK("SO_ERROR optlen", len, sizeof err);
    /* Linux: the first connect() after the handshake completed reports its success (0);
     * only the next one says EISCONN. */
    CHECK("connect again once connected", connect(s, (struct sockaddr *)&sa, sizeof sa), 0);
    ERR("connect a third time", connect(s, (struct sockaddr *)&sa, sizeof sa), EISCONN);
    phase();

    char buf[64] = "";
    CHECK("poll for hello", wait_for(s, POLLIN) & POLLIN, POLLIN);
    CHECK("recv hello (5 bytes)", recv_exact(s, buf, 5), 5);
    MEM("hello", buf, 5, "hello");
    ERR("recv while the server waits for the ping", recv(s, buf, sizeof buf, 0), EAGAIN);
    CHECK("send ping", send(s, "ping-12345", 10, 0), 10);
    phase();

    size_t got = 0;
    while (got < 3) {
        ssize_t r = recv(s, buf + got, 3 - got, 0);
        if (r > 0)
            got += (size_t)r;
        else if (r < 0 && errno == EAGAIN)
            wait_for(s, POLLIN);
        else {
            fail("recv bye: %zd (%s)", r, en(errno));
            break;
        }
    }
    MEM("bye", buf, got, "bye");
    OK("close", close(s));
    finish();
}

int main(int argc, char **argv)
{
    p_init();
    if (argc != 3) {
        fprintf(stderr, "usage: probe_nonblock 0|1 PORT\n");
        return 2;
    }
    if (atoi(argv[1]) == 0)
        server(atoi(argv[2]));
    else
        client(atoi(argv[2]));
    return 0;
}
