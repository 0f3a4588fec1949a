/*
 * probe_fcntl: fcntl, ioctl(FIONBIO/FIONREAD), fstat, and the dup family.
 *
 *   probe_fcntl PORT        (one node talking to itself)
 *
 * Checks: F_GETFL is O_RDWR (plus O_NONBLOCK once set, by F_SETFL or FIONBIO, and
 * shared by every duplicate); F_GETFD/F_SETFD; FIONREAD counts buffered bytes and
 * is EINVAL on a listener; fstat says S_IFSOCK, duplicates share an inode and two
 * sockets do not; dup/dup2/dup3/F_DUPFD/F_DUPFD_CLOEXEC: numbers, close-on-exec,
 * dup3 onto itself is EINVAL, dup2 onto itself returns it, dup2 onto an open socket
 * closes that one; a socket lives until its last descriptor is closed (the peer
 * sees EOF only then); a closed descriptor is EBADF.
 */

#include "probe.h"

#include <linux/sockios.h>

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    int s = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    CHECK("F_GETFL", fcntl(s, F_GETFL), O_RDWR);
    CHECK("F_GETFD", fcntl(s, F_GETFD), 0);
    OK("F_SETFD(FD_CLOEXEC)", fcntl(s, F_SETFD, FD_CLOEXEC));
    CHECK("F_GETFD after F_SETFD", fcntl(s, F_GETFD), FD_CLOEXEC);
    OK("F_SETFD(0)", fcntl(s, F_SETFD, 0));
    CHECK("F_GETFD after F_SETFD(0)", fcntl(s, F_GETFD), 0);
    int on = 1, off = 0;
    OK("ioctl(FIONBIO, 1)", ioctl(s, FIONBIO, &on));
    CHECK("F_GETFL after FIONBIO 1", fcntl(s, F_GETFL), O_RDWR | O_NONBLOCK);
    OK("ioctl(FIONBIO, 0)", ioctl(s, FIONBIO, &off));
    CHECK("F_GETFL after FIONBIO 0", fcntl(s, F_GETFL), O_RDWR);
    int sc = (int)OK("socket(SOCK_CLOEXEC|SOCK_NONBLOCK)",
                     socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    CHECK("F_GETFD of a SOCK_CLOEXEC socket", fcntl(sc, F_GETFD), FD_CLOEXEC);
    CHECK("F_GETFL of a SOCK_NONBLOCK socket", fcntl(sc, F_GETFL), O_RDWR | O_NONBLOCK);
    struct stat st = { 0 }, st2 = { 0 };
    OK("fstat", fstat(s, &st));
    CHECK("fstat: S_ISSOCK", S_ISSOCK(st.st_mode), 1);
    OK("fstat", fstat(sc, &st2));
    if (st.st_ino == st2.st_ino)
        fail("two sockets share st_ino %lu", (unsigned long)st.st_ino);
    close(sc);
    phase();

    int l = tcp_listener(port, 0);
    int n = -1;
    ERR("FIONREAD on a listener", ioctl(l, FIONREAD, &n), EINVAL);
    int a = tcp_connect(port);
    int b = (int)OK("accept", accept(l, NULL, NULL));
    CHECK("send 7 bytes", send(a, "1234567", 7, 0), 7);
    CHECK("poll for them", wait_for(b, POLLIN), POLLIN);
    OK("FIONREAD", ioctl(b, FIONREAD, &n));
    CHECK("FIONREAD", n, 7);
    char buf[16] = "";
    CHECK("recv 3", recv(b, buf, 3, 0), 3);
    OK("SIOCINQ", ioctl(b, SIOCINQ, &n));
    CHECK("SIOCINQ after reading 3", n, 4);
    CHECK("recv the rest", recv_exact(b, buf, 4), 4);
    phase();

    int d = (int)OK("dup", dup(a));
    if (d == a)
        fail("dup returned the same number");
    OK("fstat(dup)", fstat(d, &st2));
    OK("fstat", fstat(a, &st));
    CHECK("a dup shares the inode", st.st_ino == st2.st_ino, 1);
    OK("F_SETFD(FD_CLOEXEC) on the original", fcntl(a, F_SETFD, FD_CLOEXEC));
    CHECK("close-on-exec is per descriptor", fcntl(d, F_GETFD), 0);
    OK("F_SETFL(O_NONBLOCK) on the dup", fcntl(d, F_SETFL, O_NONBLOCK));
    CHECK("O_NONBLOCK is shared with the original", fcntl(a, F_GETFL), O_RDWR | O_NONBLOCK);
    OK("F_SETFL(0) on the dup", fcntl(d, F_SETFL, 0));
    int d2 = (int)OK("dup2", dup2(a, a + 100));
    CHECK("dup2 returns the new number", d2, a + 100);
    CHECK("dup2 clears close-on-exec", fcntl(d2, F_GETFD), 0);
    CHECK("dup2 onto itself", dup2(a, a), a);
    ERR("dup3 onto itself", dup3(a, a, 0), EINVAL);
    ERR("dup3 with a bad flag", dup3(a, a + 101, 1), EINVAL);
    int d3 = (int)OK("dup3(O_CLOEXEC)", dup3(a, a + 101, O_CLOEXEC));
    CHECK("dup3 returns the new number", d3, a + 101);
    CHECK("dup3(O_CLOEXEC) sets close-on-exec", fcntl(d3, F_GETFD), FD_CLOEXEC);
    int d4 = (int)OK("F_DUPFD", fcntl(a, F_DUPFD, a + 50));
    if (d4 < a + 50)
        fail("F_DUPFD(%d) gave %d", a + 50, d4);
    CHECK("F_DUPFD clears close-on-exec", fcntl(d4, F_GETFD), 0);
    int d5 = (int)OK("F_DUPFD_CLOEXEC", fcntl(a, F_DUPFD_CLOEXEC, a + 50));
    if (d5 < a + 50 || d5 == d4)
        fail("F_DUPFD_CLOEXEC(%d) gave %d", a + 50, d5);
    CHECK("F_DUPFD_CLOEXEC sets close-on-exec", fcntl(d5, F_GETFD), FD_CLOEXEC);
    phase();

    /* the socket lives until its last descriptor goes */
    OK("close the original", close(a));
    ERR("close it twice", close(a), EBADF);
    ERR("recv on a closed descriptor", recv(a, buf, 1, MSG_DONTWAIT), EBADF);
    ERR("fcntl on a closed descriptor", fcntl(a, F_GETFL), EBADF);
    ERR("fstat on a closed descriptor", fstat(a, &st), EBADF);
    OK("close(dup2)", close(d2));
    OK("close(dup3)", close(d3));
    OK("close(F_DUPFD)", close(d4));
    OK("close(F_DUPFD_CLOEXEC)", close(d5));
    CHECK("send through the last duplicate", send(d, "via", 3, 0), 3);
    CHECK("the peer reads it", recv_exact(b, buf, 3), 3);
    MEM("via", buf, 3, "via");
    /* dup2 onto a descriptor that holds another socket closes that socket: the
     * last descriptor of a goes, and its peer b reads EOF */
    int other = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    CHECK("dup2 onto the last descriptor of a", dup2(other, d), d);
    CHECK("the peer reads EOF once the last descriptor went", recv(b, buf, sizeof buf, 0), 0);
    CHECK("the moved descriptor is the other socket", fcntl(d, F_GETFL), O_RDWR);
    finish();
    return 0;
}
