/*
 * probe_sockopt: socket options.
 *
 *   probe_sockopt PORT      (one node talking to itself; uses PORT..PORT+4)
 *
 * Checks: defaults (SO_REUSEADDR, SO_REUSEPORT, SO_KEEPALIVE, TCP_NODELAY 0;
 * SO_TYPE, SO_DOMAIN, SO_PROTOCOL, SO_ACCEPTCONN; buffer sizes > 0; timeouts 0);
 * boolean options read back as 1 whatever non-zero value was set; an int option
 * shorter than an int is EINVAL; TCP_KEEPIDLE round trip; SO_RCVTIMEO makes recv
 * and accept time out with EAGAIN after that long (the clock moves by it);
 * SO_SNDTIMEO round trip; SO_REUSEADDR does not allow binding a listening port;
 * two sockets bound to one port need SO_REUSEADDR on both and only one may listen;
 * SO_REUSEPORT lets two listen; SO_LINGER {1, 0} makes close reset the peer.
 */

#include "probe.h"

static int get_int(int fd, int level, int opt, const char *name)
{
    int v = -12345;
    socklen_t len = sizeof v;
    if (getsockopt(fd, level, opt, &v, &len) < 0)
        fail("getsockopt(%s): %s", name, en(errno));
    else if (len != sizeof v)
        fail("getsockopt(%s): optlen %u", name, (unsigned)len);
    return v;
}

static void set_int(int fd, int level, int opt, int v, const char *name)
{
    if (setsockopt(fd, level, opt, &v, sizeof v) < 0)
        fail("setsockopt(%s, %d): %s", name, v, en(errno));
}

static int bind_to(int port, int reuseaddr, int reuseport)
{
    int s = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    if (reuseaddr)
        set_int(s, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR");
    if (reuseport)
        set_int(s, SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT");
    struct sockaddr_in sa = sin4("127.0.0.1", port);
    if (bind(s, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(s);
        errno = e;
        return -1;
    }
    return s;
}

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    int s = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    CHECK("SO_REUSEADDR default", get_int(s, SOL_SOCKET, SO_REUSEADDR, "SO_REUSEADDR"), 0);
    CHECK("SO_REUSEPORT default", get_int(s, SOL_SOCKET, SO_REUSEPORT, "SO_REUSEPORT"), 0);
    CHECK("SO_KEEPALIVE default", get_int(s, SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE"), 0);
    CHECK("TCP_NODELAY default", get_int(s, IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY"), 0);
    CHECK("SO_ERROR", get_int(s, SOL_SOCKET, SO_ERROR, "SO_ERROR"), 0);
    CHECK("SO_TYPE", get_int(s, SOL_SOCKET, SO_TYPE, "SO_TYPE"), SOCK_STREAM);
    CHECK("SO_DOMAIN", get_int(s, SOL_SOCKET, SO_DOMAIN, "SO_DOMAIN"), AF_INET);
    CHECK("SO_PROTOCOL", get_int(s, SOL_SOCKET, SO_PROTOCOL, "SO_PROTOCOL"), IPPROTO_TCP);
    CHECK("SO_ACCEPTCONN (not listening)", get_int(s, SOL_SOCKET, SO_ACCEPTCONN, "SO_ACCEPTCONN"), 0);
    if (get_int(s, SOL_SOCKET, SO_RCVBUF, "SO_RCVBUF") <= 0)
        fail("SO_RCVBUF default is not positive");
    if (get_int(s, SOL_SOCKET, SO_SNDBUF, "SO_SNDBUF") <= 0)
        fail("SO_SNDBUF default is not positive");
    struct timeval tv = { 7, 7 };
    socklen_t len = sizeof tv;
    OK("getsockopt(SO_RCVTIMEO)", getsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, &len));
    CHECK("SO_RCVTIMEO default", tv.tv_sec * 1000000 + tv.tv_usec, 0);
    CHECK("SO_RCVTIMEO optlen", len, sizeof tv);
    struct linger lg = { 7, 7 };
    len = sizeof lg;
    OK("getsockopt(SO_LINGER)", getsockopt(s, SOL_SOCKET, SO_LINGER, &lg, &len));
    CHECK("SO_LINGER default onoff", lg.l_onoff, 0);
    CHECK("SO_LINGER optlen", len, sizeof lg);
    phase();

    set_int(s, SOL_SOCKET, SO_REUSEADDR, 5, "SO_REUSEADDR");
    CHECK("SO_REUSEADDR set to 5 reads 1", get_int(s, SOL_SOCKET, SO_REUSEADDR, "SO_REUSEADDR"), 1);
    set_int(s, SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT");
    CHECK("SO_REUSEPORT", get_int(s, SOL_SOCKET, SO_REUSEPORT, "SO_REUSEPORT"), 1);
    set_int(s, SOL_SOCKET, SO_KEEPALIVE, 3, "SO_KEEPALIVE");
    CHECK("SO_KEEPALIVE set to 3 reads 1", get_int(s, SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE"), 1);
    set_int(s, IPPROTO_TCP, TCP_NODELAY, 7, "TCP_NODELAY");
    CHECK("TCP_NODELAY set to 7 reads 1", get_int(s, IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY"), 1);
    set_int(s, IPPROTO_TCP, TCP_NODELAY, 0, "TCP_NODELAY");
    CHECK("TCP_NODELAY set to 0", get_int(s, IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY"), 0);
    set_int(s, IPPROTO_TCP, TCP_KEEPIDLE, 30, "TCP_KEEPIDLE");
    CHECK("TCP_KEEPIDLE", get_int(s, IPPROTO_TCP, TCP_KEEPIDLE, "TCP_KEEPIDLE"), 30);
    char two[2] = { 1, 0 };
    ERR("setsockopt(SO_KEEPALIVE) with optlen 2", setsockopt(s, SOL_SOCKET, SO_KEEPALIVE, two, 2), EINVAL);
    struct timeval snd = { 2, 500000 };
    OK("setsockopt(SO_SNDTIMEO)", setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &snd, sizeof snd));
    len = sizeof tv;
    OK("getsockopt(SO_SNDTIMEO)", getsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, &len));
    CHECK("SO_SNDTIMEO round trip", tv.tv_sec * 1000000 + tv.tv_usec, 2500000);
    ERR("setsockopt(SO_RCVTIMEO) with optlen 4",
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &snd, 4), EINVAL);
    close(s);
    phase();

    int l = tcp_listener(port, 0);
    CHECK("SO_ACCEPTCONN (listening)", get_int(l, SOL_SOCKET, SO_ACCEPTCONN, "SO_ACCEPTCONN"), 1);
    struct timeval rcv = { 0, 200000 };
    OK("setsockopt(listener, SO_RCVTIMEO)", setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof rcv));
    long t0 = mono_ns();
    ERR("accept times out (SO_RCVTIMEO)", accept(l, NULL, NULL), EAGAIN);
    long dt = mono_ns() - t0;
    if (under_cmc)
        CHECK("clock moved by SO_RCVTIMEO on accept (ns)", dt, 200000000L);
    else if (dt < 200000000L)
        fail("accept timed out after %ld ns, before SO_RCVTIMEO", dt);
    phase();

    int a = tcp_connect(port);
    int b = (int)OK("accept", accept(l, NULL, NULL));
    CHECK("SO_ACCEPTCONN (accepted)", get_int(b, SOL_SOCKET, SO_ACCEPTCONN, "SO_ACCEPTCONN"), 0);
    OK("setsockopt(SO_RCVTIMEO)", setsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof rcv));
    len = sizeof tv;
    OK("getsockopt(SO_RCVTIMEO)", getsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &tv, &len));
    CHECK("SO_RCVTIMEO round trip", tv.tv_sec * 1000000 + tv.tv_usec, 200000);
    char buf[8];
    t0 = mono_ns();
    ERR("recv times out (SO_RCVTIMEO)", recv(b, buf, sizeof buf, 0), EAGAIN);
    dt = mono_ns() - t0;
    if (under_cmc)
        CHECK("clock moved by SO_RCVTIMEO on recv (ns)", dt, 200000000L);
    else if (dt < 200000000L)
        fail("recv timed out after %ld ns, before SO_RCVTIMEO", dt);
    CHECK("send after the timeout", send(a, "ok", 2, 0), 2);
    /* Under cmc the timeout may fire before the bytes are delivered, in some
     * interleaving: retry on EAGAIN, as a program with SO_RCVTIMEO must. */
    ssize_t got;
    do got = recv(b, buf, 2, MSG_WAITALL); while (got < 0 && errno == EAGAIN);
    CHECK("recv within SO_RCVTIMEO (retrying after timeouts)", got, 2);
    phase();

    /* SO_LINGER {1, 0}: close sends a reset instead of a FIN */
    lg = (struct linger){ 1, 0 };
    OK("setsockopt(SO_LINGER {1,0})", setsockopt(a, SOL_SOCKET, SO_LINGER, &lg, sizeof lg));
    lg = (struct linger){ 7, 7 };
    len = sizeof lg;
    OK("getsockopt(SO_LINGER)", getsockopt(a, SOL_SOCKET, SO_LINGER, &lg, &len));
    CHECK("SO_LINGER onoff", lg.l_onoff, 1);
    CHECK("SO_LINGER linger", lg.l_linger, 0);
    OK("close with SO_LINGER {1,0}", close(a));
    struct timeval none = { 0, 0 };
    setsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
    ERR("peer of a SO_LINGER {1,0} close", recv(b, buf, sizeof buf, 0), ECONNRESET);
    phase();

    /* binding a port that is taken */
    ERR("bind (SO_REUSEADDR) to a listening port", bind_to(port, 1, 0), EADDRINUSE);
    int x1 = bind_to(port + 1, 0, 0);
    CHECK("first bind without SO_REUSEADDR", x1 >= 0, 1);
    ERR("second bind without SO_REUSEADDR", bind_to(port + 1, 0, 0), EADDRINUSE);
    int y1 = bind_to(port + 2, 1, 0);
    int y2 = bind_to(port + 2, 1, 0);
    CHECK("first bind with SO_REUSEADDR", y1 >= 0, 1);
    CHECK("second bind with SO_REUSEADDR (neither listens)", y2 >= 0, 1);
    if (y1 >= 0 && y2 >= 0) {
        OK("listen on the first", listen(y1, 4));
        ERR("listen on the second", listen(y2, 4), EADDRINUSE);
    }
    int z1 = bind_to(port + 3, 0, 1);
    int z2 = bind_to(port + 3, 0, 1);
    CHECK("first bind with SO_REUSEPORT", z1 >= 0, 1);
    CHECK("second bind with SO_REUSEPORT", z2 >= 0, 1);
    if (z1 >= 0 && z2 >= 0) {
        OK("listen on the first SO_REUSEPORT socket", listen(z1, 4));
        OK("listen on the second SO_REUSEPORT socket", listen(z2, 4));
        OK("close the second SO_REUSEPORT listener", close(z2));
        int c = tcp_connect(port + 3);
        OK("accept on the first SO_REUSEPORT listener", accept(z1, NULL, NULL));
        (void)c;
    }
    finish();
    return 0;
}
