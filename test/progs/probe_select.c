/*
 * probe_select: select and pselect6 on virtual sockets.
 *
 *   probe_select PORT       (one node talking to itself)
 *
 * Checks: select reports a listener readable once a connection is queued, a
 * connected socket writable and readable once bytes arrived, and clears what is not
 * ready; a timeout returns 0, empties the sets, leaves the timeval at 0 and moves
 * the clock by its length; select with no descriptor at all is a sleep (the clock
 * moves by it); pselect with a timespec and a signal mask leaves the timespec alone;
 * no out-of-band data means no exception; a closed descriptor in a set is EBADF; a
 * negative nfds is EINVAL; EOF is readable.
 */

#include "probe.h"

#include <sys/select.h>

static void moved(const char *what, long before, long want)
{
    long d = mono_ns() - before;
    if (under_cmc ? d != want : d < want)
        fail("%s: the clock moved by %ld ns, expected %s%ld", what, d, under_cmc ? "" : ">= ", want);
}

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    int l = tcp_listener(port, 0);
    fd_set r, w, x;
    struct timeval tv = { 0, 0 };
    FD_ZERO(&r);
    FD_SET(l, &r);
    CHECK("select(listener, timeout 0) before any connect", select(l + 1, &r, NULL, NULL, &tv), 0);
    CHECK("listener not readable before any connect", FD_ISSET(l, &r), 0);
    int a = tcp_connect(port);
    FD_ZERO(&r);
    FD_SET(l, &r);
    CHECK("select(listener, no timeout) after connect", select(l + 1, &r, NULL, NULL, NULL), 1);
    CHECK("listener readable", !!FD_ISSET(l, &r), 1);
    int b = (int)OK("accept", accept(l, NULL, NULL));
    int top = (a > b ? a : b) + 1;
    FD_ZERO(&r);
    FD_ZERO(&w);
    FD_ZERO(&x);
    FD_SET(b, &r);
    FD_SET(a, &w);
    FD_SET(b, &x);
    tv = (struct timeval){ 0, 0 };
    CHECK("select(b read, a write, b except, timeout 0)", select(top, &r, &w, &x, &tv), 1);
    CHECK("b not readable yet", FD_ISSET(b, &r), 0);
    CHECK("a writable", !!FD_ISSET(a, &w), 1);
    CHECK("b no exception", FD_ISSET(b, &x), 0);
    phase();

    long t0 = mono_ns();
    FD_ZERO(&r);
    FD_SET(b, &r);
    tv = (struct timeval){ 0, 30000 };
    CHECK("select(b read, 30 ms) with nothing to read", select(top, &r, NULL, NULL, &tv), 0);
    CHECK("read set emptied by the timeout", FD_ISSET(b, &r), 0);
    CHECK("timeval after the timeout", tv.tv_sec * 1000000 + tv.tv_usec, 0);
    moved("select timeout 30 ms", t0, 30000000L);
    phase();

    t0 = mono_ns();
    FD_ZERO(&r);
    FD_SET(b, &r);
    struct timespec ts = { 0, 20000000 };
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGUSR1);
    CHECK("pselect(b read, 20 ms, sigmask) with nothing to read", pselect(top, &r, NULL, NULL, &ts, &mask), 0);
    CHECK("pselect leaves its timespec alone", ts.tv_nsec, 20000000);
    moved("pselect timeout 20 ms", t0, 20000000L);
    phase();

    t0 = mono_ns();
    tv = (struct timeval){ 0, 40000 };
    CHECK("select with no descriptor (a 40 ms sleep)", select(0, NULL, NULL, NULL, &tv), 0);
    moved("select(0, NULL, NULL, NULL, 40 ms)", t0, 40000000L);
    phase();

    CHECK("send s", send(a, "s", 1, 0), 1);
    FD_ZERO(&r);
    FD_SET(b, &r);
    FD_SET(l, &r);
    CHECK("select(b, listener; no timeout) after a send", select(top > l + 1 ? top : l + 1, &r, NULL, NULL, NULL), 1);
    CHECK("b readable", !!FD_ISSET(b, &r), 1);
    CHECK("listener not readable", FD_ISSET(l, &r), 0);
    FD_ZERO(&r);
    FD_SET(b, &r);
    ts = (struct timespec){ 0, 0 };
    CHECK("pselect(b read, 0, no mask)", pselect(top, &r, NULL, NULL, &ts, NULL), 1);
    char c;
    CHECK("recv s", recv(b, &c, 1, 0), 1);
    phase();

    int closed = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    close(closed);
    FD_ZERO(&r);
    FD_SET(closed, &r);
    FD_SET(b, &r);
    tv = (struct timeval){ 0, 0 };
    ERR("select with a closed descriptor", select(top > closed + 1 ? top : closed + 1, &r, NULL, NULL, &tv), EBADF);
    ERR("select with nfds -1", select(-1, NULL, NULL, NULL, &tv), EINVAL);
    OK("shutdown(a, SHUT_WR)", shutdown(a, SHUT_WR));
    FD_ZERO(&r);
    FD_SET(b, &r);
    CHECK("select(b read) after the peer's SHUT_WR", select(top, &r, NULL, NULL, NULL), 1);
    CHECK("EOF is readable", !!FD_ISSET(b, &r), 1);
    CHECK("recv at EOF", recv(b, &c, 1, 0), 0);
    finish();
    return 0;
}
