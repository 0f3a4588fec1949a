/*
 * probe_accept4: accept4 flags, SOCK_NONBLOCK/SOCK_CLOEXEC at socket(), accept's
 * address and errors.
 *
 *   probe_accept4 PORT      (one node talking to itself)
 *
 * Checks: accept4(SOCK_NONBLOCK|SOCK_CLOEXEC) sets both on the new descriptor,
 * accept4(0) and accept() set neither (nothing is inherited from a non-blocking
 * listener); a short address buffer is truncated and the full length returned;
 * accept4 with an unknown flag is EINVAL; accept on a socket that does not listen
 * is EINVAL; socket() with an unknown type flag is EINVAL.
 */

#include "probe.h"

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    int l = tcp_listener(port, 0);
    int a = tcp_connect(port);
    int b = (int)OK("accept4(SOCK_NONBLOCK|SOCK_CLOEXEC)",
                    accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC));
    CHECK("accept4(SOCK_NONBLOCK) F_GETFL", fcntl(b, F_GETFL), O_RDWR | O_NONBLOCK);
    CHECK("accept4(SOCK_CLOEXEC) F_GETFD", fcntl(b, F_GETFD), FD_CLOEXEC);
    char buf[8];
    ERR("recv on the non-blocking accepted socket", recv(b, buf, sizeof buf, 0), EAGAIN);
    phase();

    int c = tcp_connect(port);
    struct sockaddr_in cn = { 0 };
    socklen_t len = sizeof cn;
    OK("getsockname(connector)", getsockname(c, (struct sockaddr *)&cn, &len));
    struct sockaddr_in peer;
    memset(&peer, 0, sizeof peer);
    len = sizeof peer;
    int d = (int)OK("accept4(0)", accept4(l, (struct sockaddr *)&peer, &len, 0));
    CHECK("accept4(0) F_GETFL", fcntl(d, F_GETFL), O_RDWR);
    CHECK("accept4(0) F_GETFD", fcntl(d, F_GETFD), 0);
    CHECK("accept4 address length", len, sizeof peer);
    CHECK("accept4 address = connector's port", ntohs(peer.sin_port), ntohs(cn.sin_port));
    CHECK("accept4 address = connector's ip", peer.sin_addr.s_addr, cn.sin_addr.s_addr);
    phase();

    /* a non-blocking listener: accept() does not pass O_NONBLOCK on */
    OK("F_SETFL(O_NONBLOCK) on the listener", fcntl(l, F_SETFL, O_NONBLOCK));
    ERR("accept4 with an unknown flag", accept4(l, NULL, NULL, 0x1), EINVAL);
    ERR("accept on an empty non-blocking listener", accept(l, NULL, NULL), EAGAIN);
    int e = tcp_connect(port);
    wait_for(l, POLLIN);
    unsigned char small[16];
    memset(small, 0xAA, sizeof small);
    len = 6;
    int f = (int)OK("accept with a 6-byte address buffer", accept(l, (struct sockaddr *)small, &len));
    CHECK("accept with a short buffer returns the full length", len, sizeof(struct sockaddr_in));
    CHECK("accept with a short buffer wrote 6 bytes", small[6], 0xAA);
    CHECK("accept from a non-blocking listener: blocking", fcntl(f, F_GETFL), O_RDWR);
    (void)e;
    phase();

    int s = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    ERR("accept on a socket that does not listen", accept(s, NULL, NULL), EINVAL);
    ERR("socket with an unknown type flag", socket(AF_INET, SOCK_STREAM | 0x100, 0), EINVAL);
    int t = (int)OK("socket(SOCK_STREAM, IPPROTO_TCP)", socket(AF_INET, SOCK_STREAM, IPPROTO_TCP));
    CHECK("socket(SOCK_STREAM, IPPROTO_TCP) is blocking", fcntl(t, F_GETFL), O_RDWR);
    (void)a;
    finish();
    return 0;
}
