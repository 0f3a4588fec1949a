/*
 * prefork: a ticket server in the pre-fork style of Apache's prefork MPM, nginx or
 * gunicorn: one listening socket, shared by worker processes that all accept on it.
 *
 *     prefork ADDR [WORKERS]
 *     e.g.  prefork 127.0.0.1:7500 2          (WORKERS: 1 to 16, default 2)
 *
 * Protocol: one request per connection, like HTTP/1.0. The client connects and sends
 *
 *     ID   ->  ID <n> worker <k>      a ticket number no other client ever gets
 *
 * and the worker closes the connection after its answer (anything else: ERR ..., and
 * the connection is closed too).
 *
 * The parent opens the listening socket, forks WORKERS workers, closes its own copy of
 * the socket (the workers' copies keep it open: it lives until its last descriptor in
 * any process is closed) and then only waits for its children. Each worker blocks in
 * accept() on the shared socket, so whichever worker is idle takes the next connection:
 * the kernel (or the model checker) decides which. The workers share nothing else, so
 * they hand out tickets from disjoint sequences without talking to each other: worker
 * k (from 0) hands out k+1, k+1+N, k+1+2N, ... with N = WORKERS.
 *
 * A worker that exits, or dies of a signal, is a fault here (workers never exit): the
 * parent then stops the other workers, reaps them and exits 1, so a checker sees it as
 * the node failing instead of a server that quietly lost half its workers. (Apache
 * would fork a replacement; a replacement would restart that worker's sequence and hand
 * out its tickets again, so this server does not.) Tickets are not persisted either: a
 * restarted server starts its sequences over, and the model has no CRASH for that
 * reason.
 *
 * State for a model checker: none. The demos write their state as a JSON line on fd 3,
 * but fd 3 is one descriptor of the node, shared by every process of it: each worker
 * would overwrite the others' state with its own, and no single process knows the
 * whole. So this program writes nothing on fd 3 (nor fd 193: nothing is durable), and
 * the node is fingerprinted by its input history (docs/target-contract.md, "Worlds and
 * actions"): sound, nothing merges, and the properties are over `replies`, what clients
 * observe.
 *
 * Outside a checker, stop it with its whole process group (kill -- -PGID): killing the
 * parent alone leaves the workers serving.
 *
 * -DBUG plants a defect: a worker forgets its offset and starts its sequence at 1, so
 * every worker hands out 1, 1+N, 1+2N, ... Each worker's tickets are still distinct, so
 * one worker alone never repeats itself: the bug shows only when two different workers
 * serve, that is when the second client connects while the first one is still being
 * served (or when the checker hands the second connection to the other idle worker).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_WORKERS 16
#define LINE_LEN    64

static char role[32] = "prefork";

static void die(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", role, what, strerror(errno));
    exit(1);
}

static void parse_addr(const char *s, struct sockaddr_in *sa)
{
    char host[64];
    unsigned short port;
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    if (sscanf(s, "%63[^:]:%hu", host, &port) != 2 ||
        inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
        fprintf(stderr, "bad address %s (want IP:PORT)\n", s);
        exit(2);
    }
    sa->sin_port = htons(port);
}

static int listen_on(const struct sockaddr_in *sa)
{
    int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (const struct sockaddr *)sa, sizeof *sa) < 0 || listen(fd, 16) < 0)
        die("listen");
    return fd;
}

/* Send a whole line. MSG_NOSIGNAL: a reset peer is an error here, not a SIGPIPE. */
static int send_line(int fd, const char *line)
{
    size_t len = strlen(line);
    while (len > 0) {
        ssize_t n = send(fd, line, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        line += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Read one line (without its line ending) from fd: 1, or 0 if the connection ends, is
 * reset or sends a line too long before a whole line arrived. One request per
 * connection, so bytes after the line, if any, are not kept. */
static int read_line(int fd, char *out, size_t cap)
{
    size_t len = 0;
    for (;;) {
        char *nl = memchr(out, '\n', len);
        if (nl) {
            *nl = '\0';
            if (nl > out && nl[-1] == '\r')
                nl[-1] = '\0';
            return 1;
        }
        if (len == cap - 1)
            return 0;
        ssize_t n = recv(fd, out + len, cap - 1 - len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        len += (size_t)n;
    }
}

/* ---- a worker ---- */

static void run_worker(int k, int nworkers, int lfd)
{
    snprintf(role, sizeof role, "worker %d", k);
#ifdef BUG
    long next = 1;                /* BUG: every worker starts where worker 0 does */
#else
    long next = k + 1;            /* worker k: k+1, k+1+N, k+1+2N, ... */
#endif
    printf("%s: accepting\n", role);
    for (;;) {
        int c = accept(lfd, NULL, NULL);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            die("accept");
        }
        char line[LINE_LEN], out[64];
        if (read_line(c, line, sizeof line)) {
            if (strcmp(line, "ID") == 0) {
                snprintf(out, sizeof out, "ID %ld worker %d\n", next, k);
                printf("%s: handed out %ld\n", role, next);
                next += nworkers;  /* handed out, whether or not the answer arrives */
            } else {
                snprintf(out, sizeof out, "ERR unknown request\n");
            }
            send_line(c, out);    /* a client that went away: nothing more to tell it */
        }
        close(c);                 /* one request per connection */
    }
}

/* ---- the parent ---- */

int main(int argc, char **argv)
{
    int nworkers = argc > 2 ? atoi(argv[2]) : 2;
    if (argc < 2 || argc > 3 || nworkers < 1 || nworkers > MAX_WORKERS) {
        fprintf(stderr, "usage: prefork ADDR [WORKERS] (1 to %d, default 2)\n", MAX_WORKERS);
        return 2;
    }
    struct sockaddr_in addr;
    parse_addr(argv[1], &addr);
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);  /* no buffered output is copied into a child */

    int lfd = listen_on(&addr);
    pid_t pids[MAX_WORKERS];
    for (int k = 0; k < nworkers; k++) {
        pids[k] = fork();
        if (pids[k] < 0)
            die("fork");
        if (pids[k] == 0) {
            run_worker(k, nworkers, lfd);
            _exit(1);             /* not reached */
        }
    }
    close(lfd);                   /* the workers' copies keep the socket listening */
    printf("prefork: %d workers on %s\n", nworkers, argv[1]);

    int alive = nworkers, failed = 0, st;
    while (alive > 0) {
        pid_t pid = wait(&st);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            die("wait");
        }
        for (int k = 0; k < nworkers; k++) {
            if (pids[k] != pid)
                continue;
            pids[k] = -1;
            alive--;
            if (failed)
                break;            /* one we stopped */
            if (WIFSIGNALED(st))
                fprintf(stderr, "prefork: worker %d died of signal %d\n", k, WTERMSIG(st));
            else
                fprintf(stderr, "prefork: worker %d exited with status %d\n", k,
                        WEXITSTATUS(st));
            failed = 1;           /* stop the others, then exit 1 */
            for (int j = 0; j < nworkers; j++)
                if (pids[j] > 0)
                    kill(pids[j], SIGTERM);
        }
    }
    return failed;
}
