/*
 * probe_names: getsockname and getpeername.
 *
 *   probe_names PORT        (one node talking to itself; uses PORT..PORT+2)
 *
 * Checks: an unbound socket is 0.0.0.0:0 and has no peer (ENOTCONN); binding port 0
 * picks an ephemeral port; a listener's name; a connected socket's name is
 * 127.0.0.1:EPHEMERAL and its peer the listener; the accepted socket's name is the
 * address connected to (also under a 0.0.0.0 listener, also 127.0.0.2) and its peer
 * the connector's name; accept's address is that peer; a bound connector keeps its
 * port; a short address buffer is truncated and the full length returned.
 */

#include "probe.h"

static void name_of(int fd, int peer, struct sockaddr_in *sa, const char *what)
{
    socklen_t len = sizeof *sa;
    memset(sa, 0, sizeof *sa);
    int r = peer ? getpeername(fd, (struct sockaddr *)sa, &len)
                 : getsockname(fd, (struct sockaddr *)sa, &len);
    if (r < 0)
        fail("%s: %s", what, en(errno));
    else if (len != sizeof *sa)
        fail("%s: length %u", what, (unsigned)len);
}

static void expect(const struct sockaddr_in *sa, const char *ip, int port, const char *what)
{
    char got[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &sa->sin_addr, got, sizeof got);
    if (sa->sin_family != AF_INET || strcmp(got, ip) != 0 ||
        (port >= 0 && ntohs(sa->sin_port) != port))
        fail("%s: got family %d %s:%d, expected %s:%d", what, sa->sin_family, got,
             ntohs(sa->sin_port), ip, port);
}

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    struct sockaddr_in sa, sb;
    int s = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    name_of(s, 0, &sa, "getsockname(unbound)");
    expect(&sa, "0.0.0.0", 0, "getsockname(unbound)");
    socklen_t len = sizeof sa;
    ERR("getpeername(unconnected)", getpeername(s, (struct sockaddr *)&sa, &len), ENOTCONN);
    struct sockaddr_in any = sin4("127.0.0.1", 0);
    OK("bind(127.0.0.1:0)", bind(s, (struct sockaddr *)&any, sizeof any));
    name_of(s, 0, &sa, "getsockname(bound to port 0)");
    expect(&sa, "127.0.0.1", -1, "getsockname(bound to port 0)");
    if (ntohs(sa.sin_port) < 1024)
        fail("bind to port 0 gave port %d", ntohs(sa.sin_port));
    ERR("bind again", bind(s, (struct sockaddr *)&any, sizeof any), EINVAL);
    close(s);
    phase();

    int l = tcp_listener(port, 0);
    name_of(l, 0, &sa, "getsockname(listener)");
    expect(&sa, "127.0.0.1", port, "getsockname(listener)");
    len = sizeof sa;
    ERR("getpeername(listener)", getpeername(l, (struct sockaddr *)&sa, &len), ENOTCONN);
    int a = tcp_connect(port);
    struct sockaddr_in an, ap, acc = { 0 };
    name_of(a, 0, &an, "getsockname(connector)");
    expect(&an, "127.0.0.1", -1, "getsockname(connector)");
    name_of(a, 1, &ap, "getpeername(connector)");
    expect(&ap, "127.0.0.1", port, "getpeername(connector)");
    len = sizeof acc;
    int b = (int)OK("accept", accept(l, (struct sockaddr *)&acc, &len));
    CHECK("accept addrlen", len, sizeof acc);
    expect(&acc, "127.0.0.1", ntohs(an.sin_port), "accept's address = connector's name");
    name_of(b, 0, &sb, "getsockname(accepted)");
    expect(&sb, "127.0.0.1", port, "getsockname(accepted)");
    name_of(b, 1, &sb, "getpeername(accepted)");
    expect(&sb, "127.0.0.1", ntohs(an.sin_port), "getpeername(accepted) = connector's name");
    /* a short buffer: truncated, and the full length is returned */
    unsigned char small[16];
    memset(small, 0xAA, sizeof small);
    len = 4;
    OK("getsockname(len 4)", getsockname(a, (struct sockaddr *)small, &len));
    CHECK("getsockname(len 4) returns the full length", len, sizeof(struct sockaddr_in));
    CHECK("getsockname(len 4) wrote 4 bytes", small[4], 0xAA);
    CHECK("getsockname(len 4) family", small[0] | small[1] << 8, AF_INET);
    phase();

    /* a bound connector keeps its port */
    int c = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    int one = 1;
    setsockopt(c, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in mine = sin4("127.0.0.1", port + 1);
    OK("bind connector", bind(c, (struct sockaddr *)&mine, sizeof mine));
    struct sockaddr_in to = sin4("127.0.0.1", port);
    OK("connect from a bound socket", connect(c, (struct sockaddr *)&to, sizeof to));
    name_of(c, 0, &sa, "getsockname(bound connector)");
    expect(&sa, "127.0.0.1", port + 1, "getsockname(bound connector)");
    int d = (int)OK("accept", accept(l, NULL, NULL));
    name_of(d, 1, &sb, "getpeername(accepted from a bound connector)");
    expect(&sb, "127.0.0.1", port + 1, "getpeername(accepted from a bound connector)");
    phase();

    /* a listener on 0.0.0.0: the accepted socket is named by the address connected to */
    int w = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    setsockopt(w, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in wild = sin4("0.0.0.0", port + 2);
    OK("bind(0.0.0.0)", bind(w, (struct sockaddr *)&wild, sizeof wild));
    OK("listen(0.0.0.0)", listen(w, 4));
    name_of(w, 0, &sa, "getsockname(0.0.0.0 listener)");
    expect(&sa, "0.0.0.0", port + 2, "getsockname(0.0.0.0 listener)");
    int e = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    struct sockaddr_in two = sin4("127.0.0.2", port + 2);
    OK("connect(127.0.0.2) to a 0.0.0.0 listener", connect(e, (struct sockaddr *)&two, sizeof two));
    name_of(e, 1, &sa, "getpeername(connector to 127.0.0.2)");
    expect(&sa, "127.0.0.2", port + 2, "getpeername(connector to 127.0.0.2)");
    name_of(e, 0, &an, "getsockname(connector to 127.0.0.2)");
    expect(&an, "127.0.0.1", -1, "getsockname(connector to 127.0.0.2)");
    int f = (int)OK("accept", accept(w, NULL, NULL));
    name_of(f, 0, &sb, "getsockname(accepted under 0.0.0.0)");
    expect(&sb, "127.0.0.2", port + 2, "getsockname(accepted under 0.0.0.0)");
    name_of(f, 1, &sb, "getpeername(accepted under 0.0.0.0)");
    expect(&sb, "127.0.0.1", ntohs(an.sin_port), "getpeername(accepted under 0.0.0.0)");
    finish();
    return 0;
}
