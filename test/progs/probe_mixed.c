/*
 * probe_mixed: readiness of real descriptors (a pipe, an AF_UNIX socketpair) inside
 * one poll, select or epoll set together with virtual sockets.
 *
 *   probe_mixed PORT        (one node talking to itself)
 *
 * Checks, for poll, select and epoll alike: a readable pipe alone, a readable
 * virtual socket alone, both; a pipe whose writer is closed (POLLHUP); a socketpair;
 * a timeout with everything idle (the clock moves by it); a real fd that is not
 * open is POLLNVAL/EBADF.
 */

#include "probe.h"

#include <sys/epoll.h>
#include <sys/select.h>

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    int l = tcp_listener(port, 0);
    int a = tcp_connect(port);
    int b = (int)OK("accept", accept(l, NULL, NULL));
    int pp[2], sv[2];
    OK("pipe", pipe(pp));
    OK("socketpair", socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    char buf[16];

    /* poll */
    struct pollfd p[3];
    CHECK("write the pipe", write(pp[1], "p", 1), 1);
    p[0] = (struct pollfd){ .fd = pp[0], .events = POLLIN };
    p[1] = (struct pollfd){ .fd = b, .events = POLLIN };
    CHECK("poll(pipe, socket): the pipe is ready", poll(p, 2, -1), 1);
    CHECK("pipe revents", p[0].revents, POLLIN);
    CHECK("socket revents", p[1].revents, 0);
    CHECK("read the pipe", read(pp[0], buf, sizeof buf), 1);
    CHECK("send on the socket", send(a, "s", 1, 0), 1);
    CHECK("poll(pipe, socket): the socket gets ready", poll(p, 2, -1), 1);
    CHECK("pipe revents", p[0].revents, 0);
    CHECK("socket revents", p[1].revents, POLLIN);
    CHECK("write the pipe", write(pp[1], "p", 1), 1);
    CHECK("poll(pipe, socket, 0): both ready", poll(p, 2, 0), 2);
    CHECK("pipe revents (both)", p[0].revents, POLLIN);
    CHECK("socket revents (both)", p[1].revents, POLLIN);
    CHECK("write the socketpair", write(sv[1], "u", 1), 1);
    p[2] = (struct pollfd){ .fd = sv[0], .events = POLLIN | POLLOUT };
    CHECK("poll(pipe, socket, socketpair, 0)", poll(p, 3, 0), 3);
    CHECK("socketpair revents", p[2].revents, POLLIN | POLLOUT);
    phase();

    /* select */
    fd_set r;
    FD_ZERO(&r);
    FD_SET(pp[0], &r);
    FD_SET(b, &r);
    FD_SET(sv[0], &r);
    int top = b > pp[0] ? b : pp[0];
    top = (top > sv[0] ? top : sv[0]) + 1;
    struct timeval tv = { 0, 0 };
    CHECK("select(pipe, socket, socketpair) all readable", select(top, &r, NULL, NULL, &tv), 3);
    CHECK("read the pipe", read(pp[0], buf, sizeof buf), 1);
    CHECK("read the socketpair", read(sv[0], buf, sizeof buf), 1);
    FD_ZERO(&r);
    FD_SET(pp[0], &r);
    FD_SET(b, &r);
    FD_SET(sv[0], &r);
    CHECK("select: only the socket left", select(top, &r, NULL, NULL, NULL), 1);
    CHECK("select: socket set", !!FD_ISSET(b, &r), 1);
    CHECK("select: pipe not set", FD_ISSET(pp[0], &r), 0);
    CHECK("recv the socket", recv(b, buf, sizeof buf, 0), 1);
    phase();

    /* epoll */
    int ep = (int)OK("epoll_create1", epoll_create1(0));
    struct epoll_event e = { .events = EPOLLIN, .data.u64 = 1 };
    OK("EPOLL_CTL_ADD pipe", epoll_ctl(ep, EPOLL_CTL_ADD, pp[0], &e));
    e = (struct epoll_event){ .events = EPOLLIN, .data.u64 = 2 };
    OK("EPOLL_CTL_ADD socket", epoll_ctl(ep, EPOLL_CTL_ADD, b, &e));
    e = (struct epoll_event){ .events = EPOLLIN, .data.u64 = 3 };
    OK("EPOLL_CTL_ADD socketpair", epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &e));
    struct epoll_event ev[4] = { 0 };   /* read below even if a wait gave fewer */
    CHECK("epoll_wait(0): nothing ready", epoll_wait(ep, ev, 4, 0), 0);
    CHECK("write the pipe", write(pp[1], "p", 1), 1);
    CHECK("epoll_wait(-1): the pipe", epoll_wait(ep, ev, 4, -1), 1);
    CHECK("epoll: pipe data", ev[0].data.u64, 1);
    CHECK("read the pipe", read(pp[0], buf, sizeof buf), 1);
    CHECK("send on the socket", send(a, "s", 1, 0), 1);
    CHECK("epoll_wait(-1): the socket", epoll_wait(ep, ev, 4, -1), 1);
    CHECK("epoll: socket data", ev[0].data.u64, 2);
    CHECK("write the socketpair", write(sv[1], "u", 1), 1);
    CHECK("epoll_wait(0): socket and socketpair", epoll_wait(ep, ev, 4, 0), 2);
    CHECK("epoll: the two data", ev[0].data.u64 + ev[1].data.u64, 5);
    CHECK("recv the socket", recv(b, buf, sizeof buf, 0), 1);
    CHECK("read the socketpair", read(sv[0], buf, sizeof buf), 1);
    phase();

    /* timeouts with everything idle, then HUP on the pipe, then a closed real fd */
    long t0 = mono_ns();
    p[0] = (struct pollfd){ .fd = pp[0], .events = POLLIN };
    p[1] = (struct pollfd){ .fd = b, .events = POLLIN };
    CHECK("poll(pipe, socket, 30 ms) idle", poll(p, 2, 30), 0);
    CHECK("epoll_wait(20 ms) idle", epoll_wait(ep, ev, 4, 20), 0);
    long dt = mono_ns() - t0;
    if (under_cmc ? dt != 50000000L : dt < 50000000L)
        fail("idle timeouts: the clock moved by %ld ns, expected 50 ms", dt);
    close(pp[1]);
    CHECK("poll(pipe, socket) after the writer closed", poll(p, 2, -1), 1);
    CHECK("pipe revents: POLLHUP", p[0].revents, POLLHUP);
    CHECK("epoll after the writer closed", epoll_wait(ep, ev, 4, -1), 1);
    CHECK("epoll: EPOLLHUP on the pipe", ev[0].events, EPOLLHUP);
    int gone = (int)OK("pipe", pipe(pp));
    close(pp[0]);
    close(pp[1]);
    (void)gone;
    p[0] = (struct pollfd){ .fd = pp[0], .events = POLLIN };
    CHECK("poll(closed real fd, socket, 0)", poll(p, 2, 0), 1);
    CHECK("closed real fd: POLLNVAL", p[0].revents, POLLNVAL);
    finish();
    return 0;
}
