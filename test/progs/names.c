/*
 * names: what a node learns of names (docs/target-contract.md, "Names").
 *
 *   names PEER PORT
 *
 * Reports on fd 3, once, then waits for a client that never comes:
 *   {"host":H,"self":S,"peer":P,"localhost":L,"unknown":U,"dns_peer":D,"dns_unknown":N,
 *    "dns_count":C}
 * H: gethostname; S, P, L: the IPv4 address getaddrinfo gives for H, PEER, "localhost"
 * (through /etc/hosts); U: getaddrinfo's error for a name nobody has (EAI_NONAME -2);
 * D: the address in res_query's A answer for PEER (DNS itself, /etc/hosts bypassed),
 * "" if none; N: res_query's h_errno for the unknown name (HOST_NOT_FOUND 1); C: the
 * answers to that A query.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void lookup(const char *name, char *out, size_t n, int *err)
{
    struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
    int r = getaddrinfo(name, NULL, &hints, &res);
    if (err)
        *err = r;
    out[0] = 0;
    if (r == 0 && res) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, out, (socklen_t)n);
        freeaddrinfo(res);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    char host[256] = "", self[64], peer[64], local[64], none[64], dns[64] = "";
    int unknown = 0;
    gethostname(host, sizeof host);
    lookup(host, self, sizeof self, NULL);
    lookup(argv[1], peer, sizeof peer, NULL);
    lookup("localhost", local, sizeof local, NULL);
    lookup("nosuch.example", none, sizeof none, &unknown);
    unsigned char ans[512];
    int count = -1;
    int len = res_query(argv[1], ns_c_in, ns_t_a, ans, sizeof ans);
    if (len >= 12) {                  /* one A record answers: its address ends the message */
        count = ans[6] << 8 | ans[7];
        if (count == 1 && len >= 16)
            inet_ntop(AF_INET, ans + len - 4, dns, sizeof dns);
    }
    h_errno = 0;
    int missing = res_query("nosuch.example", ns_c_in, ns_t_a, ans, sizeof ans) < 0 ? h_errno : 0;
    char line[1024];
    int k = snprintf(line, sizeof line, "{\"host\":\"%s\",\"self\":\"%s\",\"peer\":\"%s\","
                     "\"localhost\":\"%s\",\"unknown\":%d,\"dns_peer\":\"%s\","
                     "\"dns_unknown\":%d,\"dns_count\":%d}\n", host, self, peer, local, unknown,
                     dns, missing, count);
    if (write(3, line, (size_t)k) != k)
        return 1;
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[2])),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    bind(s, (struct sockaddr *)&sa, sizeof sa);
    listen(s, 1);
    for (;;)
        accept(s, NULL, NULL);
}
