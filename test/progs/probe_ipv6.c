/*
 * probe_ipv6: AF_INET6 streams, dual stack and v4-mapped addresses.
 *
 *   probe_ipv6 PORT         (one node talking to itself; uses PORT..PORT+3)
 *
 * Checks: an AF_INET6 listener on [::1] and a connection to it, with 28-byte
 * AF_INET6 names on both sides; IPV6_V6ONLY is 0 by default and a [::] listener
 * accepts an IPv4 connection, named ::ffff:127.0.0.1; an AF_INET6 socket connects
 * to an IPv4 listener through a v4-mapped address; address families that do not
 * match the socket are EINVAL/EAFNOSUPPORT; with IPV6_V6ONLY set, a [::] listener
 * refuses IPv4 (ECONNREFUSED).
 */

#include "probe.h"

static void expect6(int fd, int peer, const char *ip, int port, const char *what)
{
    struct sockaddr_in6 sa;
    memset(&sa, 0, sizeof sa);
    socklen_t len = sizeof sa;
    int r = peer ? getpeername(fd, (struct sockaddr *)&sa, &len)
                 : getsockname(fd, (struct sockaddr *)&sa, &len);
    char got[INET6_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET6, &sa.sin6_addr, got, sizeof got);
    if (r < 0)
        fail("%s: %s", what, en(errno));
    else if (len != sizeof sa || sa.sin6_family != AF_INET6 || strcmp(got, ip) != 0 ||
             (port >= 0 && ntohs(sa.sin6_port) != port))
        fail("%s: got len %u family %d [%s]:%d, expected [%s]:%d", what, (unsigned)len,
             sa.sin6_family, got, ntohs(sa.sin6_port), ip, port);
}

static int listener6(const char *ip, int port, int v6only)
{
    int one = 1, s = (int)OK("socket(AF_INET6)", socket(AF_INET6, SOCK_STREAM, 0));
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (v6only >= 0)
        OK("setsockopt(IPV6_V6ONLY)", setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only));
    struct sockaddr_in6 sa = sin6(ip, port);
    OK("bind(AF_INET6)", bind(s, (struct sockaddr *)&sa, sizeof sa));
    OK("listen(AF_INET6)", listen(s, 4));
    return s;
}

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    int l = listener6("::1", port, -1);
    expect6(l, 0, "::1", port, "getsockname([::1] listener)");
    int c = (int)OK("socket(AF_INET6)", socket(AF_INET6, SOCK_STREAM, 0));
    struct sockaddr_in6 to = sin6("::1", port);
    OK("connect([::1])", connect(c, (struct sockaddr *)&to, sizeof to));
    expect6(c, 1, "::1", port, "getpeername(v6 connector)");
    expect6(c, 0, "::1", -1, "getsockname(v6 connector)");
    struct sockaddr_in6 peer = { 0 };
    socklen_t len = sizeof peer;
    int a = (int)OK("accept(AF_INET6)", accept(l, (struct sockaddr *)&peer, &len));
    CHECK("accept address length", len, sizeof peer);
    CHECK("accept address family", peer.sin6_family, AF_INET6);
    expect6(a, 0, "::1", port, "getsockname(v6 accepted)");
    expect6(a, 1, "::1", -1, "getpeername(v6 accepted)");
    CHECK("send over IPv6", send(c, "six", 3, 0), 3);
    char buf[8] = "";
    CHECK("recv over IPv6", recv_exact(a, buf, 3), 3);
    MEM("six", buf, 3, "six");
    int dom = -1;
    len = sizeof dom;
    OK("getsockopt(SO_DOMAIN)", getsockopt(l, SOL_SOCKET, SO_DOMAIN, &dom, &len));
    CHECK("SO_DOMAIN of an AF_INET6 socket", dom, AF_INET6);
    phase();

    /* dual stack: an IPv4 client of a [::] listener */
    int d = listener6("::", port + 1, -1);
    int v = -1;
    len = sizeof v;
    OK("getsockopt(IPV6_V6ONLY)", getsockopt(d, IPPROTO_IPV6, IPV6_V6ONLY, &v, &len));
    CHECK("IPV6_V6ONLY default", v, 0);
    int c4 = tcp_connect(port + 1);
    int a4 = (int)OK("accept(v4 client of [::])", accept(d, NULL, NULL));
    expect6(a4, 1, "::ffff:127.0.0.1", -1, "getpeername(v4 client of [::])");
    expect6(a4, 0, "::ffff:127.0.0.1", port + 1, "getsockname(v4 client of [::])");
    CHECK("send from the v4 client", send(c4, "four", 4, 0), 4);
    CHECK("recv on the dual-stack socket", recv_exact(a4, buf, 4), 4);
    MEM("four", buf, 4, "four");
    phase();

    /* an AF_INET6 client of an IPv4 listener, through a v4-mapped address */
    int l4 = tcp_listener(port + 2, 0);
    int m = (int)OK("socket(AF_INET6)", socket(AF_INET6, SOCK_STREAM, 0));
    struct sockaddr_in6 mapped = sin6("::ffff:127.0.0.1", port + 2);
    OK("connect(::ffff:127.0.0.1)", connect(m, (struct sockaddr *)&mapped, sizeof mapped));
    expect6(m, 0, "::ffff:127.0.0.1", -1, "getsockname(v4-mapped connector)");
    struct sockaddr_in p4 = { 0 };
    len = sizeof p4;
    int am = (int)OK("accept(v4 listener)", accept(l4, (struct sockaddr *)&p4, &len));
    CHECK("v4 listener sees an AF_INET peer", p4.sin_family, AF_INET);
    CHECK("v4 listener sees a 16-byte address", len, sizeof p4);
    CHECK("v4 listener sees 127.0.0.1", p4.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
    (void)am;
    phase();

    /* families that do not match the socket */
    int s6 = (int)OK("socket(AF_INET6)", socket(AF_INET6, SOCK_STREAM, 0));
    struct sockaddr_in v4 = sin4("127.0.0.1", port + 3);
    ERR("bind(AF_INET6 socket, sockaddr_in)", bind(s6, (struct sockaddr *)&v4, sizeof v4), EINVAL);
    int s4 = (int)OK("socket(AF_INET)", socket(AF_INET, SOCK_STREAM, 0));
    struct sockaddr_in6 v6 = sin6("::1", port + 3);
    ERR("bind(AF_INET socket, sockaddr_in6)", bind(s4, (struct sockaddr *)&v6, sizeof v6), EAFNOSUPPORT);
    ERR("connect(AF_INET socket, sockaddr_in6)", connect(s4, (struct sockaddr *)&v6, sizeof v6), EAFNOSUPPORT);
    phase();

    /* IPV6_V6ONLY: a [::] listener takes no IPv4 connection */
    int only = listener6("::", port + 3, 1);
    int r4 = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    struct sockaddr_in t4 = sin4("127.0.0.1", port + 3);
    ERR("IPv4 connect to a V6ONLY [::] listener", connect(r4, (struct sockaddr *)&t4, sizeof t4), ECONNREFUSED);
    (void)only;
    finish();
    return 0;
}
