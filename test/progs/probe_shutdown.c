/*
 * probe_shutdown: shutdown, EOF, EPIPE/SIGPIPE, resets.
 *
 *   probe_shutdown PORT     (one node talking to itself)
 *
 * Checks: shutdown's argument and state errors; SHUT_WR gives the peer EOF after the
 * data sent before it, and the peer can still send back (half close); a write after
 * SHUT_WR is EPIPE, with SIGPIPE unless MSG_NOSIGNAL or SIGPIPE is ignored, and a
 * handler sees it once; SHUT_RD makes a read with nothing buffered return 0; closing
 * with unread data resets the peer: poll shows POLLERR|POLLHUP, the first read is
 * ECONNRESET, later reads 0, a write EPIPE; or SO_ERROR reports ECONNRESET first.
 */

#include "probe.h"

static volatile sig_atomic_t sigpipes;
static void on_sigpipe(int sig) { (void)sig; sigpipes++; }

static void pair(int l, int port, int *a, int *b)
{
    *a = tcp_connect(port);
    *b = (int)OK("accept", accept(l, NULL, NULL));
}

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    int l = tcp_listener(port, 0);
    int lone = (int)OK("socket", socket(AF_INET, SOCK_STREAM, 0));
    ERR("shutdown of an unconnected socket", shutdown(lone, SHUT_WR), ENOTCONN);
    ERR("shutdown(how=7) of an unconnected socket", shutdown(lone, 7), EINVAL);
    close(lone);
    int a, b;
    pair(l, port, &a, &b);
    ERR("shutdown(how=3)", shutdown(a, 3), EINVAL);
    phase();

    char buf[64] = "";
    CHECK("send data before SHUT_WR", send(a, "data", 4, 0), 4);
    OK("shutdown(SHUT_WR)", shutdown(a, SHUT_WR));
    OK("shutdown(SHUT_WR) again", shutdown(a, SHUT_WR));
    CHECK("peer reads the data", recv_exact(b, buf, 4), 4);
    MEM("data", buf, 4, "data");
    CHECK("peer reads EOF", recv(b, buf, sizeof buf, 0), 0);
    CHECK("peer reads EOF again", read(b, buf, sizeof buf), 0);
    CHECK("half close: the peer still sends", send(b, "back", 4, 0), 4);
    CHECK("half close: the shut side still reads", recv_exact(a, buf, 4), 4);
    MEM("back", buf, 4, "back");
    phase();

    ERR("send(MSG_NOSIGNAL) after SHUT_WR", send(a, "x", 1, MSG_NOSIGNAL), EPIPE);
    struct sigaction sa = { .sa_handler = on_sigpipe };
    sigemptyset(&sa.sa_mask);
    OK("sigaction(SIGPIPE)", sigaction(SIGPIPE, &sa, NULL));
    CHECK("no SIGPIPE with MSG_NOSIGNAL", sigpipes, 0);
    ERR("write after SHUT_WR", write(a, "x", 1), EPIPE);
    CHECK("SIGPIPE raised by the write", sigpipes, 1);
    signal(SIGPIPE, SIG_IGN);
    ERR("send after SHUT_WR, SIGPIPE ignored", send(a, "x", 1, 0), EPIPE);
    CHECK("no SIGPIPE when ignored", sigpipes, 1);
    phase();

    int c, d;
    pair(l, port, &c, &d);
    OK("shutdown(SHUT_RD)", shutdown(d, SHUT_RD));
    /* MSG_DONTWAIT: Linux answers 0 at once either way; a wrong answer cannot hang */
    CHECK("recv(MSG_DONTWAIT) after SHUT_RD with nothing buffered",
          recv(d, buf, sizeof buf, MSG_DONTWAIT), 0);
    struct pollfd p = { .fd = d, .events = POLLIN | POLLRDHUP };
    CHECK("poll after SHUT_RD", poll(&p, 1, 0), 1);
    CHECK("revents after SHUT_RD", p.revents, POLLIN | POLLRDHUP);
    phase();

    int e, f;
    pair(l, port, &e, &f);
    CHECK("send unread", send(e, "unread", 6, 0), 6);
    CHECK("poll for the unread bytes", wait_for(f, POLLIN), POLLIN);
    OK("close with unread data (a reset)", close(f));
    CHECK("poll on the reset socket",
          wait_until(e, POLLIN | POLLOUT | POLLRDHUP, POLLERR),
          POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDHUP);
    ERR("first recv after a reset", recv(e, buf, sizeof buf, 0), ECONNRESET);
    CHECK("second recv after a reset", recv(e, buf, sizeof buf, 0), 0);
    int err = -1;
    socklen_t len = sizeof err;
    OK("getsockopt(SO_ERROR)", getsockopt(e, SOL_SOCKET, SO_ERROR, &err, &len));
    CHECK("SO_ERROR once the reset was reported", err, 0);
    ERR("send after a reset", send(e, "x", 1, MSG_NOSIGNAL), EPIPE);
    phase();

    int g, h;
    pair(l, port, &g, &h);
    CHECK("send unread", send(g, "unread", 6, 0), 6);
    CHECK("poll for the unread bytes", wait_for(h, POLLIN), POLLIN);
    OK("close with unread data (a reset)", close(h));
    wait_for(g, POLLERR);
    err = -1;
    OK("getsockopt(SO_ERROR)", getsockopt(g, SOL_SOCKET, SO_ERROR, &err, &len));
    CHECK("SO_ERROR after a reset", err, ECONNRESET);
    err = -1;
    OK("getsockopt(SO_ERROR)", getsockopt(g, SOL_SOCKET, SO_ERROR, &err, &len));
    CHECK("SO_ERROR read twice", err, 0);
    CHECK("recv after SO_ERROR took the reset", recv(g, buf, sizeof buf, 0), 0);
    finish();
    return 0;
}
