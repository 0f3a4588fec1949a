/*
 * probe_mmsg: sendmmsg and recvmmsg, on UDP and TCP.
 *
 *   probe_mmsg PORT      (one node; it listens on PORT, binds UDP PORT+1)
 *
 * Checks, as on loopback: sendmmsg sends each message of its vector and sets each
 * msg_len; an error after the first message ends the batch with the count sent so far,
 * an error on the first is the call's; recvmmsg with MSG_WAITFORONE takes what has
 * arrived once the first has, each entry with its length and source; with MSG_DONTWAIT
 * and nothing there it is EAGAIN; on a stream at its end every entry reads 0 bytes.
 * (The node's traffic is with itself, handed over at once: docs/target-contract.md.)
 */

#include "probe.h"

#define N 4

static struct mmsghdr vec[N];
static struct iovec iov[N];
static char bufs[N][64];
static struct sockaddr_in names[N];

static void for_recv(void)
{
    memset(vec, 0, sizeof vec);
    for (int i = 0; i < N; i++) {
        iov[i] = (struct iovec){ bufs[i], sizeof bufs[i] };
        vec[i].msg_hdr = (struct msghdr){ .msg_name = &names[i], .msg_namelen = sizeof names[i],
                                          .msg_iov = &iov[i], .msg_iovlen = 1 };
        vec[i].msg_len = 999;
    }
}

static void for_send(const char **parts, int n, struct sockaddr_in *to)
{
    memset(vec, 0, sizeof vec);
    for (int i = 0; i < n; i++) {
        iov[i] = (struct iovec){ (void *)parts[i], strlen(parts[i]) };
        vec[i].msg_hdr = (struct msghdr){ .msg_name = to, .msg_namelen = to ? sizeof *to : 0,
                                          .msg_iov = &iov[i], .msg_iovlen = 1 };
        vec[i].msg_len = 999;
    }
}

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    int u = (int)OK("socket(UDP)", socket(AF_INET, SOCK_DGRAM, 0));
    struct sockaddr_in here = sin4("127.0.0.1", port + 1), mine;
    OK("bind(UDP)", bind(u, (struct sockaddr *)&here, sizeof here));
    int v = (int)OK("socket(UDP sender)", socket(AF_INET, SOCK_DGRAM, 0));
    const char *three[] = { "a", "bb", "ccc" };
    for_send(three, 3, &here);
    CHECK("sendmmsg of three datagrams", sendmmsg(v, vec, 3, 0), 3);
    CHECK("msg_len of the first", vec[0].msg_len, 1);
    CHECK("msg_len of the third", vec[2].msg_len, 3);
    socklen_t len = sizeof mine;
    OK("getsockname(sender)", getsockname(v, (struct sockaddr *)&mine, &len));
    for_recv();
    CHECK("recvmmsg(MSG_WAITFORONE) takes the three", recvmmsg(u, vec, N, MSG_WAITFORONE, NULL), 3);
    MEM("the first datagram", bufs[0], vec[0].msg_len, "a");
    MEM("the second datagram", bufs[1], vec[1].msg_len, "bb");
    MEM("the third datagram", bufs[2], vec[2].msg_len, "ccc");
    CHECK("the fourth entry is left alone", vec[3].msg_len, 999);
    CHECK("each names its source", ntohs(names[2].sin_port), ntohs(mine.sin_port));
    CHECK("with its length", vec[2].msg_hdr.msg_namelen, sizeof(struct sockaddr_in));
    for_recv();
    ERR("recvmmsg(MSG_DONTWAIT) with nothing there", recvmmsg(u, vec, N, MSG_DONTWAIT, NULL),
        EAGAIN);
    phase();

    for_send(three, 3, &here);
    iov[1].iov_base = (void *)8;              /* the second message's bytes are not there */
    CHECK("sendmmsg with a bad second message sends the first", sendmmsg(v, vec, 3, 0), 1);
    CHECK("its msg_len", vec[0].msg_len, 1);
    for_send(three, 2, &here);
    iov[0].iov_base = (void *)8;
    ERR("sendmmsg with a bad first message", sendmmsg(v, vec, 2, 0), EFAULT);
    CHECK("sendmmsg of none", sendmmsg(v, vec, 0, 0), 0);
    for_recv();
    CHECK("recvmmsg takes the one sent", recvmmsg(u, vec, N, MSG_WAITFORONE, NULL), 1);
    MEM("the one", bufs[0], vec[0].msg_len, "a");
    phase();

    int l = tcp_listener(port, 0);
    int c = tcp_connect(port);
    int a = (int)OK("accept", accept(l, NULL, NULL));
    const char *two[] = { "hello", "world" };
    for_send(two, 2, NULL);
    CHECK("sendmmsg on a stream", sendmmsg(c, vec, 2, 0), 2);
    CHECK("msg_len of its second", vec[1].msg_len, 5);
    char all[16];
    MEM("the stream has both, in order", all, recv_exact(a, all, 10), "helloworld");
    OK("close the connector", close(c));
    for_recv();
    CHECK("recvmmsg at the end of a stream fills every entry", recvmmsg(a, vec, 2, MSG_WAITFORONE,
                                                                     NULL), 2);
    CHECK("with 0 bytes", vec[0].msg_len + vec[1].msg_len, 0);
    finish();
    return 0;
}
