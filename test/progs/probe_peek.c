/*
 * probe_peek: MSG_PEEK, MSG_DONTWAIT, MSG_WAITALL, FIONREAD and partial reads.
 *
 *   probe_peek PORT         (one node talking to itself)
 *
 * Checks: MSG_PEEK returns bytes without consuming them; a short read keeps the
 * rest buffered (FIONREAD counts it); MSG_DONTWAIT on a blocking socket with
 * nothing buffered is EAGAIN and leaves the socket blocking; MSG_WAITALL waits for
 * the whole length across two sends; a read of 0 bytes returns 0.
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
    char buf[64] = "";
    int n = -1;
    ERR("recv(MSG_DONTWAIT) with nothing buffered", recv(b, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
    ERR("recv(MSG_PEEK|MSG_DONTWAIT) with nothing buffered",
        recv(b, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT), EAGAIN);
    CHECK("socket still blocking after MSG_DONTWAIT", fcntl(b, F_GETFL) & O_NONBLOCK, 0);
    OK("ioctl(FIONREAD) with nothing buffered", ioctl(b, FIONREAD, &n));
    CHECK("FIONREAD with nothing buffered", n, 0);
    phase();

    CHECK("send 10 bytes", send(a, "0123456789", 10, 0), 10);
    CHECK("poll for them", wait_for(b, POLLIN), POLLIN);
    CHECK("recv(4, MSG_PEEK)", recv(b, buf, 4, MSG_PEEK), 4);
    MEM("peeked 4", buf, 4, "0123");
    CHECK("recv(64, MSG_PEEK)", recv(b, buf, sizeof buf, MSG_PEEK), 10);
    MEM("peeked all", buf, 10, "0123456789");
    OK("ioctl(FIONREAD)", ioctl(b, FIONREAD, &n));
    CHECK("FIONREAD after peeking", n, 10);
    CHECK("recv(4): a partial read", recv(b, buf, 4, 0), 4);
    MEM("read 4", buf, 4, "0123");
    OK("ioctl(FIONREAD)", ioctl(b, FIONREAD, &n));
    CHECK("FIONREAD after a partial read", n, 6);
    CHECK("recv(3, MSG_DONTWAIT)", recv(b, buf, 3, MSG_DONTWAIT), 3);
    MEM("read 3", buf, 3, "456");
    CHECK("read(64) takes the rest", read(b, buf, sizeof buf), 3);
    MEM("rest", buf, 3, "789");
    ERR("recv(MSG_DONTWAIT) once drained", recv(b, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
    phase();

    CHECK("send abc", send(a, "abc", 3, 0), 3);
    CHECK("send def", send(a, "def", 3, 0), 3);
    CHECK("recv(6, MSG_WAITALL) across two sends", recv(b, buf, 6, MSG_WAITALL), 6);
    MEM("waitall", buf, 6, "abcdef");
    phase();

    CHECK("send ghij", send(a, "ghij", 4, 0), 4);
    CHECK("poll for ghij", wait_for(b, POLLIN), POLLIN);
    CHECK("recv of 0 bytes with data buffered", recv(b, buf, 0, 0), 0);
    CHECK("recvfrom(MSG_PEEK) with a NULL address", recvfrom(b, buf, 2, MSG_PEEK, NULL, NULL), 2);
    MEM("peek gh", buf, 2, "gh");
    CHECK("recv ghij after the peeks", recv_exact(b, buf, 4), 4);
    MEM("ghij", buf, 4, "ghij");
    close(a);
    CHECK("recv(MSG_PEEK) at EOF", recv(b, buf, sizeof buf, MSG_PEEK), 0);
    CHECK("recv at EOF", recv(b, buf, sizeof buf, 0), 0);
    finish();
    return 0;
}
