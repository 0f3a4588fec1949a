/*
 * probe_udp: UDP datagrams, unconnected and connected.
 *
 *   probe_udp PORT          (one node talking to itself; uses PORT..PORT+2)
 *
 * cmc may deliver datagrams in any order (as UDP may), so every check holds in any
 * order. Checks: SO_TYPE; sendto/recvfrom keep datagram boundaries and give the
 * sender's address; FIONREAD is the size of the next datagram; a short buffer
 * truncates the datagram and the rest is discarded (recvmsg says MSG_TRUNC, recv
 * with MSG_TRUNC returns the real length); MSG_PEEK; a datagram of 0 bytes; a
 * connected socket sends without an address, knows its peer and receives only from
 * it; send without a destination is EDESTADDRREQ, also after connect(AF_UNSPEC);
 * poll; a connected socket whose datagram found no one gets ECONNREFUSED.
 */

#include "probe.h"

static int udp(const char *ip, int port)
{
    int s = (int)OK("socket(SOCK_DGRAM)", socket(AF_INET, SOCK_DGRAM, 0));
    if (port >= 0) {
        struct sockaddr_in sa = sin4(ip, port);
        OK("bind(udp)", bind(s, (struct sockaddr *)&sa, sizeof sa));
    }
    return s;
}

/* receive one datagram (blocking), returning its length and sender's port */
static long take(int s, char *buf, size_t room, int *from_port)
{
    struct sockaddr_in from;
    socklen_t len = sizeof from;
    memset(&from, 0, sizeof from);
    long n = recvfrom(s, buf, room, 0, (struct sockaddr *)&from, &len);
    if (n < 0)
        fail("recvfrom: %s", en(errno));
    else if (len != sizeof from || from.sin_family != AF_INET ||
             from.sin_addr.s_addr != htonl(INADDR_LOOPBACK))
        fail("recvfrom address: len %u family %d", (unsigned)len, from.sin_family);
    if (from_port)
        *from_port = ntohs(from.sin_port);
    return n;
}

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    int u1 = udp("127.0.0.1", port), u2 = udp("127.0.0.1", port + 1);
    int v = -1;
    socklen_t len = sizeof v;
    OK("getsockopt(SO_TYPE)", getsockopt(u1, SOL_SOCKET, SO_TYPE, &v, &len));
    CHECK("SO_TYPE", v, SOCK_DGRAM);
    struct sockaddr_in to1 = sin4("127.0.0.1", port);
    char buf[64] = "";
    ERR("recv(MSG_DONTWAIT) with nothing queued", recv(u1, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
    struct pollfd p = { .fd = u1, .events = POLLIN | POLLOUT };
    CHECK("poll(udp, 0) with nothing queued", poll(&p, 1, 0), 1);
    CHECK("revents: POLLOUT", p.revents, POLLOUT);
    phase();

    CHECK("sendto one", sendto(u2, "one", 3, 0, (struct sockaddr *)&to1, sizeof to1), 3);
    CHECK("sendto two!!", sendto(u2, "two!!", 5, 0, (struct sockaddr *)&to1, sizeof to1), 5);
    int seen_one = 0, seen_two = 0;
    for (int i = 0; i < 2; i++) {
        wait_for(u1, POLLIN);
        int n = -1;
        OK("ioctl(FIONREAD)", ioctl(u1, FIONREAD, &n));
        int from = 0;
        long got = take(u1, buf, sizeof buf, &from);
        CHECK("FIONREAD = the size of the next datagram", n, got);
        CHECK("sender's port", from, port + 1);
        if (got == 3 && memcmp(buf, "one", 3) == 0)
            seen_one++;
        else if (got == 5 && memcmp(buf, "two!!", 5) == 0)
            seen_two++;
        else
            fail("datagram %d: %ld bytes \"%.*s\"", i, got, (int)(got > 0 ? got : 0), buf);
    }
    CHECK("each datagram once: one", seen_one, 1);
    CHECK("each datagram once: two!!", seen_two, 1);
    phase();

    CHECK("sendto truncated!", sendto(u2, "truncated!", 10, 0, (struct sockaddr *)&to1, sizeof to1), 10);
    wait_for(u1, POLLIN);
    CHECK("recv(4) of a 10-byte datagram", recv(u1, buf, 4, 0), 4);
    MEM("truncated", buf, 4, "trun");
    ERR("the rest was discarded", recv(u1, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
    CHECK("sendto peekaboo", sendto(u2, "peekaboo", 8, 0, (struct sockaddr *)&to1, sizeof to1), 8);
    wait_for(u1, POLLIN);
    CHECK("recv(2, MSG_PEEK|MSG_TRUNC) gives the real length", recv(u1, buf, 2, MSG_PEEK | MSG_TRUNC), 8);
    CHECK("recv(64, MSG_PEEK)", recv(u1, buf, sizeof buf, MSG_PEEK), 8);
    char small[3] = "";
    struct iovec iov = { small, sizeof small };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    CHECK("recvmsg(3) of an 8-byte datagram", recvmsg(u1, &mh, 0), 3);
    CHECK("recvmsg says MSG_TRUNC", mh.msg_flags & MSG_TRUNC, MSG_TRUNC);
    MEM("peekaboo", small, 3, "pee");
    CHECK("sendto of 0 bytes", sendto(u2, "", 0, 0, (struct sockaddr *)&to1, sizeof to1), 0);
    wait_for(u1, POLLIN);
    int from = 0;
    CHECK("a datagram of 0 bytes", take(u1, buf, sizeof buf, &from), 0);
    CHECK("its sender", from, port + 1);
    phase();

    /* connected UDP */
    int u3 = udp(NULL, -1);
    ERR("send without a destination", send(u3, "x", 1, 0), EDESTADDRREQ);
    OK("connect(udp)", connect(u3, (struct sockaddr *)&to1, sizeof to1));
    struct sockaddr_in me = { 0 }, peer = { 0 };
    len = sizeof me;
    OK("getsockname(connected udp)", getsockname(u3, (struct sockaddr *)&me, &len));
    CHECK("connected udp got a port", ntohs(me.sin_port) != 0, 1);
    len = sizeof peer;
    OK("getpeername(connected udp)", getpeername(u3, (struct sockaddr *)&peer, &len));
    CHECK("getpeername(connected udp)", ntohs(peer.sin_port), port);
    CHECK("send on connected udp", send(u3, "conn", 4, 0), 4);
    wait_for(u1, POLLIN);
    CHECK("recvfrom the connected socket", take(u1, buf, sizeof buf, &from), 4);
    CHECK("its address is the connected socket's name", from, ntohs(me.sin_port));
    /* u3 takes datagrams from its peer u1 only: u2's is dropped */
    CHECK("sendto u3 from a stranger", sendto(u2, "stranger", 8, 0, (struct sockaddr *)&me, sizeof me), 8);
    CHECK("sendto u3 from its peer", sendto(u1, "peer", 4, 0, (struct sockaddr *)&me, sizeof me), 4);
    CHECK("connected udp receives from its peer only", recv(u3, buf, sizeof buf, 0), 4);
    MEM("peer", buf, 4, "peer");
    struct sockaddr unspec = { .sa_family = AF_UNSPEC };
    OK("connect(AF_UNSPEC)", connect(u3, &unspec, sizeof unspec));
    ERR("send after connect(AF_UNSPEC)", send(u3, "x", 1, 0), EDESTADDRREQ);
    phase();

    /* a connected socket whose datagram found no one: ECONNREFUSED (ICMP) */
    int u4 = udp(NULL, -1);
    struct sockaddr_in nobody = sin4("127.0.0.1", port + 2);
    OK("connect(udp) to a port nobody bound", connect(u4, (struct sockaddr *)&nobody, sizeof nobody));
    CHECK("send to nobody", send(u4, "lost", 4, 0), 4);
    ERR("recv after sending to nobody", recv(u4, buf, sizeof buf, 0), ECONNREFUSED);
    finish();
    return 0;
}
