/*
 * probe_refused: connecting where nothing listens.
 *
 *   probe_refused PORT      (one node; nothing listens on PORT..PORT+3 on 127.0.0.x)
 *
 * Checks: a blocking connect to an address no node has bound is ECONNREFUSED; a
 * non-blocking one is EINPROGRESS, then poll reports POLLIN|POLLOUT|POLLERR|POLLHUP,
 * SO_ERROR is ECONNREFUSED once and 0 after; a port whose listener was closed
 * refuses; a listener on 127.0.0.1 does not take a connection to 127.0.0.3.
 */

#include "probe.h"

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    int s = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    struct sockaddr_in to = sin4("127.0.0.1", port);
    ERR("blocking connect to a port nobody bound", connect(s, (struct sockaddr *)&to, sizeof to),
        ECONNREFUSED);
    int err = -1;
    socklen_t len = sizeof err;
    OK("getsockopt(SO_ERROR)", getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len));
    CHECK("SO_ERROR after a refused blocking connect", err, 0);
    phase();

    int n = (int)OK("socket", socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
    struct sockaddr_in two = sin4("127.0.0.2", port + 1);
    ERR("non-blocking connect to 127.0.0.2 (nobody)", connect(n, (struct sockaddr *)&two, sizeof two),
        EINPROGRESS);
    CHECK("poll on the refused socket", wait_until(n, POLLIN | POLLOUT, POLLERR | POLLOUT),
          POLLIN | POLLOUT | POLLERR | POLLHUP);
    err = -1;
    OK("getsockopt(SO_ERROR)", getsockopt(n, SOL_SOCKET, SO_ERROR, &err, &len));
    CHECK("SO_ERROR after a refused non-blocking connect", err, ECONNREFUSED);
    err = -1;
    OK("getsockopt(SO_ERROR)", getsockopt(n, SOL_SOCKET, SO_ERROR, &err, &len));
    CHECK("SO_ERROR read twice", err, 0);
    len = sizeof two;
    ERR("getpeername of a refused socket", getpeername(n, (struct sockaddr *)&two, &len), ENOTCONN);
    phase();

    int l = tcp_listener(port + 2, 0);
    OK("close the listener", close(l));
    int c = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    to = sin4("127.0.0.1", port + 2);
    ERR("connect to a port whose listener was closed", connect(c, (struct sockaddr *)&to, sizeof to),
        ECONNREFUSED);
    phase();

    int l1 = tcp_listener(port + 3, 0);
    int c3 = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    struct sockaddr_in three = sin4("127.0.0.3", port + 3);
    ERR("connect to 127.0.0.3 when only 127.0.0.1 listens",
        connect(c3, (struct sockaddr *)&three, sizeof three), ECONNREFUSED);
    (void)l1;
    finish();
    return 0;
}
