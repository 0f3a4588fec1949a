/*
 * probe_self: a node's connections to itself.
 *
 *   probe_self PORT      (one node; it listens on PORT, binds UDP PORT+1)
 *
 * Checks, as on loopback: a blocking connect to the node's own listener returns 0 and
 * accept hands over its other end, whose name is the connector's peer name; bytes sent
 * either way are read back in order; a non-blocking connect to it is EINPROGRESS and
 * then writable with SO_ERROR 0; a close is read as end of stream; a close with unread
 * data resets the peer (ECONNRESET); a datagram to its own UDP socket is received with
 * its source address. Under cmc none of this is the network's: it all happens at launch,
 * and the search has one world (test_probes.py: test_a_nodes_connections_to_itself).
 */

#include "probe.h"

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    int l = tcp_listener(port, 0);
    int c = tcp_connect(port);
    struct sockaddr_in peer, mine;
    socklen_t len = sizeof peer;
    int a = (int)OK("accept", accept(l, (struct sockaddr *)&peer, &len));
    len = sizeof mine;
    OK("getsockname(connector)", getsockname(c, (struct sockaddr *)&mine, &len));
    CHECK("accept names the connector's port", ntohs(peer.sin_port), ntohs(mine.sin_port));
    phase();

    char buf[64];
    CHECK("send ping", send(c, "ping", 4, 0), 4);
    CHECK("send ping again", send(c, "PING", 4, 0), 4);
    MEM("the acceptor reads both, in order", buf, recv_exact(a, buf, 8), "pingPING");
    CHECK("send pong", send(a, "pong", 4, 0), 4);
    MEM("the connector reads pong", buf, recv_exact(c, buf, 4), "pong");
    OK("close the connector", close(c));
    CHECK("the acceptor reads the end of the stream", recv(a, buf, sizeof buf, 0), 0);
    OK("close the acceptor", close(a));
    phase();

    int n = (int)OK("socket", socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
    struct sockaddr_in to = sin4("127.0.0.1", port);
    ERR("non-blocking connect to its own listener", connect(n, (struct sockaddr *)&to, sizeof to),
        EINPROGRESS);
    CHECK("the connecting socket turns writable", wait_until(n, POLLOUT, POLLOUT), POLLOUT);
    int err = -1;
    len = sizeof err;
    OK("getsockopt(SO_ERROR)", getsockopt(n, SOL_SOCKET, SO_ERROR, &err, &len));
    CHECK("SO_ERROR of the connection to itself", err, 0);
    int b = (int)OK("accept the second", accept(l, NULL, NULL));
    CHECK("send to the acceptor", send(n, "unread", 6, 0), 6);
    CHECK("the acceptor has the bytes", wait_until(b, POLLIN, POLLIN), POLLIN);
    OK("close the acceptor with the bytes unread", close(b));
    CHECK("the connector sees the reset", wait_until(n, POLLIN, POLLIN) & POLLERR, POLLERR);
    ERR("the connector's read after a reset", recv(n, buf, sizeof buf, 0), ECONNRESET);
    OK("close", close(n));
    phase();

    int u = (int)OK("socket(UDP)", socket(AF_INET, SOCK_DGRAM, 0));
    struct sockaddr_in here = sin4("127.0.0.1", port + 1);
    OK("bind(UDP)", bind(u, (struct sockaddr *)&here, sizeof here));
    int v = (int)OK("socket(UDP sender)", socket(AF_INET, SOCK_DGRAM, 0));
    CHECK("sendto its own UDP socket", sendto(v, "dgram", 5, 0, (struct sockaddr *)&here,
                                              sizeof here), 5);
    struct sockaddr_in from;
    len = sizeof from;
    MEM("the datagram arrives", buf, recvfrom(u, buf, sizeof buf, 0, (struct sockaddr *)&from,
                                              &len), "dgram");
    len = sizeof mine;
    OK("getsockname(UDP sender)", getsockname(v, (struct sockaddr *)&mine, &len));
    CHECK("from the sender's port", ntohs(from.sin_port), ntohs(mine.sin_port));
    finish();
    return 0;
}
