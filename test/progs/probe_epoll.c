/*
 * probe_epoll: the epoll family on virtual sockets.
 *
 *   probe_epoll PORT        (one node talking to itself)
 *
 * Checks: epoll_create1(EPOLL_CLOEXEC) and epoll_create; epoll_ctl errors (EEXIST,
 * ENOENT, EBADF, EINVAL for the epoll fd itself); level-triggered EPOLLIN reported
 * while bytes stay unread, with the registered data; EPOLLET reported once per
 * arrival; EPOLLONESHOT disarmed after one report until EPOLL_CTL_MOD; EPOLLOUT;
 * maxevents bounds the count and 0 is EINVAL; a listener is EPOLLIN once a
 * connection is queued; EPOLLRDHUP after the peer's SHUT_WR; a reset reports
 * EPOLLERR|EPOLLHUP unasked; a closed socket leaves the set; epoll_wait and
 * epoll_pwait time out (the clock moves by the timeout).
 */

#include "probe.h"

#include <sys/epoll.h>

static int ep;

static int ctl(int op, int fd, unsigned events, unsigned long data)
{
    struct epoll_event e = { .events = events, .data.u64 = data };
    return epoll_ctl(ep, op, fd, &e);
}

/* epoll_wait, checking that it returns one event with these events and data */
static void one(const char *what, int timeout, unsigned events, unsigned long data)
{
    struct epoll_event ev[4];
    memset(ev, 0, sizeof ev);
    int n = epoll_wait(ep, ev, 4, timeout);
    if (n != 1 || ev[0].events != events || ev[0].data.u64 != data)
        fail("%s: got %d events (first %#x data %#lx), expected 1 (%#x data %#lx)", what, n,
             n > 0 ? ev[0].events : 0, n > 0 ? (unsigned long)ev[0].data.u64 : 0, events, data);
}

static void none(const char *what)
{
    struct epoll_event ev[4];
    int n = epoll_wait(ep, ev, 4, 0);
    if (n != 0)
        fail("%s: got %d events (first %#x data %#lx), expected none", what, n,
             n > 0 ? ev[0].events : 0, n > 0 ? (unsigned long)ev[0].data.u64 : 0);
}

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    int old = (int)OK("epoll_create(1)", epoll_create(1));
    CHECK("epoll_create: no close-on-exec", fcntl(old, F_GETFD), 0);
    close(old);
    ep = (int)OK("epoll_create1(EPOLL_CLOEXEC)", epoll_create1(EPOLL_CLOEXEC));
    CHECK("epoll_create1(EPOLL_CLOEXEC): close-on-exec", fcntl(ep, F_GETFD), FD_CLOEXEC);
    int l = tcp_listener(port, 0);
    OK("EPOLL_CTL_ADD listener", ctl(EPOLL_CTL_ADD, l, EPOLLIN, 0x11));
    none("epoll_wait(0) before any connect");
    int a = tcp_connect(port);
    one("listener after a connect", -1, EPOLLIN, 0x11);
    int b = (int)OK("accept", accept(l, NULL, NULL));
    none("epoll_wait(0) after accept");
    ERR("EPOLL_CTL_ADD twice", ctl(EPOLL_CTL_ADD, l, EPOLLIN, 0), EEXIST);
    ERR("EPOLL_CTL_MOD of an fd not in the set", ctl(EPOLL_CTL_MOD, a, EPOLLIN, 0), ENOENT);
    ERR("EPOLL_CTL_DEL of an fd not in the set", ctl(EPOLL_CTL_DEL, a, 0, 0), ENOENT);
    ERR("EPOLL_CTL_ADD of the epoll fd itself", ctl(EPOLL_CTL_ADD, ep, EPOLLIN, 0), EINVAL);
    int closed = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    close(closed);
    ERR("EPOLL_CTL_ADD of a closed fd", ctl(EPOLL_CTL_ADD, closed, EPOLLIN, 0), EBADF);
    OK("EPOLL_CTL_DEL listener", ctl(EPOLL_CTL_DEL, l, 0, 0));
    struct epoll_event evs[4];
    ERR("epoll_wait with maxevents 0", epoll_wait(ep, evs, 0, 0), EINVAL);
    phase();

    /* level-triggered */
    OK("EPOLL_CTL_ADD b (EPOLLIN)", ctl(EPOLL_CTL_ADD, b, EPOLLIN, 0xB));
    none("b before any send");
    CHECK("send 1", send(a, "1", 1, 0), 1);
    one("b after a send", -1, EPOLLIN, 0xB);
    one("b again while unread (level-triggered)", 0, EPOLLIN, 0xB);
    char buf[16] = "";
    CHECK("recv 1", recv(b, buf, sizeof buf, 0), 1);
    none("b once drained");
    phase();

    /* edge-triggered */
    OK("EPOLL_CTL_MOD b (EPOLLIN|EPOLLET)", ctl(EPOLL_CTL_MOD, b, EPOLLIN | EPOLLET, 0xBE));
    CHECK("send 2", send(a, "2", 1, 0), 1);
    one("b after a send (EPOLLET)", -1, EPOLLIN, 0xBE);
    none("b again while unread (EPOLLET: no new arrival)");
    CHECK("send 3", send(a, "3", 1, 0), 1);
    one("b after another send (EPOLLET)", -1, EPOLLIN, 0xBE);
    CHECK("recv 23", recv_exact(b, buf, 2), 2);
    MEM("23", buf, 2, "23");
    phase();

    /* one-shot */
    OK("EPOLL_CTL_MOD b (EPOLLIN|EPOLLONESHOT)", ctl(EPOLL_CTL_MOD, b, EPOLLIN | EPOLLONESHOT, 0xB1));
    CHECK("send 4", send(a, "4", 1, 0), 1);
    one("b after a send (EPOLLONESHOT)", -1, EPOLLIN, 0xB1);
    none("b again while unread (EPOLLONESHOT: disarmed)");
    OK("EPOLL_CTL_MOD b re-arms", ctl(EPOLL_CTL_MOD, b, EPOLLIN | EPOLLONESHOT, 0xB2));
    one("b after re-arming, still unread", 0, EPOLLIN, 0xB2);
    CHECK("recv 4", recv(b, buf, sizeof buf, 0), 1);
    phase();

    /* EPOLLOUT and maxevents */
    OK("EPOLL_CTL_ADD a (EPOLLOUT)", ctl(EPOLL_CTL_ADD, a, EPOLLOUT, 0xA));
    one("a writable", 0, EPOLLOUT, 0xA);
    OK("EPOLL_CTL_MOD b (EPOLLOUT)", ctl(EPOLL_CTL_MOD, b, EPOLLOUT, 0xB0));
    CHECK("two writable sockets", epoll_wait(ep, evs, 4, 0), 2);
    CHECK("maxevents 1 gives one", epoll_wait(ep, evs, 1, 0), 1);
    OK("EPOLL_CTL_DEL a", ctl(EPOLL_CTL_DEL, a, 0, 0));
    OK("EPOLL_CTL_MOD b (EPOLLIN|EPOLLRDHUP)", ctl(EPOLL_CTL_MOD, b, EPOLLIN | EPOLLRDHUP, 0xBD));
    phase();

    /* timeouts */
    long t0 = mono_ns();
    CHECK("epoll_wait(30 ms) with nothing ready", epoll_wait(ep, evs, 4, 30), 0);
    long dt = mono_ns() - t0;
    if (under_cmc ? dt != 30000000L : dt < 30000000L)
        fail("epoll_wait timeout: the clock moved by %ld ns", dt);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGUSR1);
    t0 = mono_ns();
    CHECK("epoll_pwait(20 ms, sigmask) with nothing ready", epoll_pwait(ep, evs, 4, 20, &mask), 0);
    dt = mono_ns() - t0;
    if (under_cmc ? dt != 20000000L : dt < 20000000L)
        fail("epoll_pwait timeout: the clock moved by %ld ns", dt);
    phase();

    /* EPOLLRDHUP, then a reset, then close */
    OK("shutdown(a, SHUT_WR)", shutdown(a, SHUT_WR));
    one("b after the peer's SHUT_WR", -1, EPOLLIN | EPOLLRDHUP, 0xBD);
    int c = tcp_connect(port);
    int d = (int)OK("accept", accept(l, NULL, NULL));
    OK("EPOLL_CTL_ADD c (EPOLLIN)", ctl(EPOLL_CTL_ADD, c, EPOLLIN, 0xC));
    OK("EPOLL_CTL_DEL b", ctl(EPOLL_CTL_DEL, b, 0, 0));
    CHECK("send unread", send(c, "unread", 6, 0), 6);
    wait_for(d, POLLIN);
    OK("close with unread data (a reset)", close(d));
    one("c after a reset: EPOLLERR|EPOLLHUP unasked", -1,
        EPOLLIN | EPOLLERR | EPOLLHUP, 0xC);
    OK("close c", close(c));
    none("a closed socket leaves the set");
    finish();
    return 0;
}
