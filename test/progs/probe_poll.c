/*
 * probe_poll: poll and ppoll on virtual sockets (one node talking to itself).
 *
 *   probe_poll PORT
 *
 * Checks: a listener is POLLIN once a connection is queued; connected sockets are
 * POLLOUT; revents only holds what was asked for (plus POLLERR/POLLHUP); an fd of
 * -1 is ignored; a closed descriptor is POLLNVAL; the return value counts the
 * entries with revents; a timeout returns 0 and clears revents (and the clock moves
 * by the timeout), also for a poll with no descriptor at all (a sleep); ppoll with
 * a timespec, with none and with a signal mask; POLLRDHUP after the peer's SHUT_WR;
 * POLLOUT after one's own SHUT_WR (a write would not block: it fails at once) and
 * POLLHUP once both sides are shut.
 */

#include "probe.h"

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    int l = tcp_listener(port, 0);
    struct pollfd p[4];
    p[0] = (struct pollfd){ .fd = l, .events = POLLIN | POLLOUT };
    CHECK("poll(listener, 0) before any connect", poll(p, 1, 0), 0);
    CHECK("listener revents before any connect", p[0].revents, 0);
    phase();

    int a = tcp_connect(port);
    CHECK("poll(listener) after connect", wait_for(l, POLLIN | POLLOUT), POLLIN);
    int b = (int)OK("accept", accept(l, NULL, NULL));
    p[0] = (struct pollfd){ .fd = l, .events = POLLIN };
    CHECK("poll(listener, 0) after accept", poll(p, 1, 0), 0);
    p[0] = (struct pollfd){ .fd = a, .events = POLLIN | POLLOUT, .revents = 0x7 };
    p[1] = (struct pollfd){ .fd = -1, .events = POLLIN, .revents = 0x7 };
    p[2] = (struct pollfd){ .fd = b, .events = POLLOUT };
    p[3] = (struct pollfd){ .fd = b, .events = 0 };
    CHECK("poll(a, -1, b, b) count", poll(p, 4, 0), 2);
    CHECK("a revents: POLLOUT", p[0].revents, POLLOUT);
    CHECK("fd -1 revents", p[1].revents, 0);
    CHECK("b revents: POLLOUT", p[2].revents, POLLOUT);
    CHECK("b with events 0", p[3].revents, 0);
    int closed = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    OK("close", close(closed));
    p[0] = (struct pollfd){ .fd = closed, .events = POLLIN };
    p[1] = (struct pollfd){ .fd = a, .events = POLLIN };
    CHECK("poll(closed fd, a) count", poll(p, 2, 0), 1);
    CHECK("closed fd revents: POLLNVAL", p[0].revents, POLLNVAL);
    CHECK("a revents with nothing to read", p[1].revents, 0);
    phase();

    /* A timeout: nothing is in flight, so only the timeout can end these. */
    long t0 = mono_ns();
    p[0] = (struct pollfd){ .fd = b, .events = POLLIN, .revents = 0x7 };
    CHECK("poll(b, 30 ms) with nothing to read", poll(p, 1, 30), 0);
    CHECK("revents after a timeout", p[0].revents, 0);
    long dt = mono_ns() - t0;
    if (under_cmc)
        CHECK("clock moved by the poll timeout (ns)", dt, 30000000L);
    else if (dt < 30000000L)
        fail("poll returned after %ld ns, before its 30 ms timeout", dt);
    phase();
    t0 = mono_ns();
    struct timespec ts = { 0, 20000000 };
    CHECK("ppoll(b, 20 ms) with nothing to read", ppoll(p, 1, &ts, NULL), 0);
    dt = mono_ns() - t0;
    if (under_cmc)
        CHECK("clock moved by the ppoll timeout (ns)", dt, 20000000L);
    else if (dt < 20000000L)
        fail("ppoll returned after %ld ns, before its 20 ms timeout", dt);
    struct timespec zero = { 0, 0 };
    CHECK("ppoll(b, {0,0})", ppoll(p, 1, &zero, NULL), 0);
    t0 = mono_ns();
    CHECK("poll(NULL, 0, 25 ms): a sleep", poll(NULL, 0, 25), 0);
    dt = mono_ns() - t0;
    if (under_cmc)
        CHECK("clock moved by poll(NULL, 0, 25 ms) (ns)", dt, 25000000L);
    else if (dt < 25000000L)
        fail("poll(NULL, 0, 25) returned after %ld ns", dt);
    phase();

    CHECK("send x", send(a, "x", 1, 0), 1);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGUSR1);
    p[0] = (struct pollfd){ .fd = b, .events = POLLIN | POLLRDHUP };
    CHECK("ppoll(b, NULL timeout, sigmask) after a send", ppoll(p, 1, NULL, &mask), 1);
    CHECK("b revents: POLLIN", p[0].revents, POLLIN);
    char c;
    CHECK("recv x", recv(b, &c, 1, 0), 1);
    p[0] = (struct pollfd){ .fd = b, .events = POLLIN };
    CHECK("poll(b, 0) after reading everything", poll(p, 1, 0), 0);
    phase();

    OK("shutdown(a, SHUT_WR)", shutdown(a, SHUT_WR));
    CHECK("b after the peer's SHUT_WR", wait_until(b, POLLIN | POLLOUT | POLLRDHUP, POLLRDHUP),
          POLLIN | POLLOUT | POLLRDHUP);
    p[0] = (struct pollfd){ .fd = a, .events = POLLIN | POLLOUT | POLLRDHUP };
    CHECK("poll(a, 0) after its own SHUT_WR", poll(p, 1, 0), 1);
    CHECK("a after its own SHUT_WR: POLLOUT (a write would not block)", p[0].revents, POLLOUT);
    phase();

    OK("shutdown(b, SHUT_WR)", shutdown(b, SHUT_WR));
    CHECK("a once both sides are shut", wait_until(a, POLLIN | POLLOUT | POLLRDHUP, POLLRDHUP),
          POLLIN | POLLOUT | POLLRDHUP | POLLHUP);
    p[0] = (struct pollfd){ .fd = b, .events = POLLIN };
    CHECK("poll(b, 0) once both sides are shut", poll(p, 1, 0), 1);
    CHECK("b once both sides are shut (POLLHUP unasked)", p[0].revents, POLLIN | POLLHUP);
    p[0] = (struct pollfd){ .fd = b, .events = 0 };
    CHECK("b with events 0 once both sides are shut", poll(p, 1, 0), 1);
    CHECK("b revents with events 0: POLLHUP", p[0].revents, POLLHUP);
    finish();
    return 0;
}
