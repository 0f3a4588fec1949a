/*
 * probe_iov: readv/writev, sendmsg/recvmsg, sendto on a connected stream.
 *
 *   probe_iov PORT          (one node talking to itself)
 *
 * Checks: writev gathers its iovecs into one send (an empty iovec included) and
 * readv scatters what it reads; sendmsg/recvmsg with several iovecs; recvmsg on a
 * stream sets msg_namelen, msg_controllen and msg_flags to 0; a stream ignores the
 * address given to sendto/sendmsg; a send of 0 bytes returns 0 and so does a read
 * of 0 bytes once data is buffered (with none, it waits: MSG_DONTWAIT gives EAGAIN); more than
 * IOV_MAX iovecs is EINVAL; a bad buffer is EFAULT.
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
    int b = (int)OK("accept", accept(l, NULL, NULL));
    phase();

    struct iovec wv[3] = { { "ab", 2 }, { "", 0 }, { "cdef", 4 } };
    CHECK("writev 3 iovecs", writev(a, wv, 3), 6);
    char x[4] = "....", y[10] = "..........";
    struct iovec rv[2] = { { x, 3 }, { y, 10 } };
    size_t got = 0;
    while (got < 6) {              /* readv may return part: scatter the rest */
        struct iovec part[2];
        int n = 0;
        if (got < 3)
            part[n++] = (struct iovec){ x + got, 3 - got };
        part[n++] = (struct iovec){ y + (got > 3 ? got - 3 : 0), 10 - (got > 3 ? got - 3 : 0) };
        ssize_t r = readv(b, part, n);
        if (r <= 0) {
            fail("readv: %zd (%s)", r, en(errno));
            break;
        }
        got += (size_t)r;
    }
    (void)rv;
    MEM("readv first iovec", x, 3, "abc");
    MEM("readv second iovec", y, 3, "def");
    CHECK("readv leaves the rest of the second iovec", y[3], '.');
    phase();

    struct iovec mv[2] = { { "hello ", 6 }, { "world", 5 } };
    struct msghdr mh = { .msg_iov = mv, .msg_iovlen = 2 };
    CHECK("sendmsg 2 iovecs", sendmsg(a, &mh, 0), 11);
    char p1[4] = "", p2[4] = "", p3[20] = "";
    struct iovec rmv[3] = { { p1, 4 }, { p2, 4 }, { p3, 20 } };
    struct sockaddr_in name;
    char control[64];
    struct msghdr rh = { .msg_name = &name, .msg_namelen = sizeof name, .msg_iov = rmv,
                         .msg_iovlen = 3, .msg_control = control,
                         .msg_controllen = sizeof control, .msg_flags = 0x7 };
    CHECK("poll for the sendmsg bytes", wait_for(b, POLLIN), POLLIN);
    CHECK("recvmsg 3 iovecs", recvmsg(b, &rh, 0), 11);
    MEM("recvmsg iovec 1", p1, 4, "hell");
    MEM("recvmsg iovec 2", p2, 4, "o wo");
    MEM("recvmsg iovec 3", p3, 3, "rld");
    CHECK("recvmsg msg_namelen on a stream", rh.msg_namelen, 0);
    CHECK("recvmsg msg_controllen", rh.msg_controllen, 0);
    CHECK("recvmsg msg_flags", rh.msg_flags, 0);
    phase();

    /* A connected stream ignores the address of sendto and sendmsg. */
    struct sockaddr_in elsewhere = sin4("127.0.0.1", 9);
    long r1 = sendto(a, "to", 2, 0, (struct sockaddr *)&elsewhere, sizeof elsewhere);
    CHECK("sendto with an address on a connected stream", r1, 2);
    struct iovec one = { "msg", 3 };
    struct msghdr nh = { .msg_name = &elsewhere, .msg_namelen = sizeof elsewhere,
                         .msg_iov = &one, .msg_iovlen = 1 };
    long r2 = sendmsg(a, &nh, 0);
    CHECK("sendmsg with an address on a connected stream", r2, 3);
    char buf[16] = "";
    size_t sent = (size_t)(r1 > 0 ? r1 : 0) + (size_t)(r2 > 0 ? r2 : 0);
    CHECK("recv what sendto and sendmsg sent", recv_exact(b, buf, sent), 5);
    MEM("sendto+sendmsg bytes", buf, 5, "tomsg");
    phase();

    CHECK("send of 0 bytes", send(a, "", 0, 0), 0);
    /* Linux: a read of 0 bytes waits for data like any read (the target is 1 byte) */
    ERR("recv(0 bytes, MSG_DONTWAIT) with nothing buffered", recv(b, buf, 0, MSG_DONTWAIT), EAGAIN);
    CHECK("writev of 0 iovecs", writev(a, wv, 0), 0);
    static struct iovec many[1025];
    for (int i = 0; i < 1025; i++)
        many[i] = (struct iovec){ "z", 1 };
    ERR("writev of 1025 iovecs (over IOV_MAX)", writev(a, many, 1025), EINVAL);
    ERR("send from a bad buffer", send(a, (void *)16, 4, 0), EFAULT);
    CHECK("send after the errors", send(a, "end", 3, 0), 3);
    CHECK("poll for end", wait_for(b, POLLIN), POLLIN);
    CHECK("recv of 0 bytes with data buffered", recv(b, buf, 0, 0), 0);
    struct iovec none = { buf, 0 };
    CHECK("readv of 0 bytes with data buffered", readv(b, &none, 1), 0);
    CHECK("recv end", recv_exact(b, buf, 3), 3);
    MEM("end", buf, 3, "end");
    finish();
    return 0;
}
