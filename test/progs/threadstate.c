/*
 * threadstate: worker threads that check, at every request, what the kernel keeps for
 * each of them: the state a copy of the node (cmc --fast) must give each thread again.
 *
 *   threadstate PORT
 *
 * Three worker threads each set, once, a state of their own: a signal mask, an
 * alternate signal stack, an MXCSR (rounding mode, and flush-to-zero in one), and
 * take note of their robust list (glibc's) and whether their rseq area is registered
 * (glibc 2.35 and later register one per thread). Then each waits on a condition
 * variable. The main thread listens on 127.0.0.1:PORT; at each line "CHECK" it wakes
 * the workers, each looks at its state again, and the main thread answers
 * "OK ROUND BAD" once all have: BAD has bit 5*i+k set when worker i found check k
 * changed (k: 0 mask, 1 alternate stack, 2 MXCSR, 3 robust list, 4 rseq).
 *
 * State on fd 3 after every round: {"round": ROUND, "bad": BAD}.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#include <sys/rseq.h>
#define HAVE_RSEQ 1
#endif

#define WORKERS 3

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go = PTHREAD_COND_INITIALIZER, done = PTHREAD_COND_INITIALIZER;
static long round_no, finished, ready;
static unsigned long bad;
static char altstacks[WORKERS][1 << 16];

struct noted {
    sigset_t mask;
    stack_t ss;
    unsigned mxcsr;
    void *robust;
    size_t robust_len;
    int rseq;               /* 1: registered */
};

static unsigned get_mxcsr(void)
{
    unsigned m;
    __asm__ volatile("stmxcsr %0" : "=m"(m));
    return m;
}

static void set_mxcsr(unsigned m)
{
    __asm__ volatile("ldmxcsr %0" : : "m"(m));
}

/* 1 when this thread has an rseq area registered: registering glibc's again fails
 * with EBUSY then (and with a thread that has none, it registers it: that is seen
 * at the next look, as a change). */
static int rseq_registered(void)
{
#ifdef HAVE_RSEQ
    if (__rseq_size == 0)
        return 0;
    void *area = (char *)__builtin_thread_pointer() + __rseq_offset;
    long r = syscall(SYS_rseq, area, (unsigned)__rseq_size, 0, RSEQ_SIG);
    return r == -1 && errno == EBUSY;
#else
    return 0;
#endif
}

static void look(struct noted *n)
{
    memset(n, 0, sizeof *n);
    pthread_sigmask(SIG_BLOCK, NULL, &n->mask);
    sigaltstack(NULL, &n->ss);
    n->mxcsr = get_mxcsr();
    syscall(SYS_get_robust_list, 0, &n->robust, &n->robust_len);
    n->rseq = rseq_registered();
}

static unsigned long differs(const struct noted *a, const struct noted *b)
{
    unsigned long d = 0;
    for (int s = 1; s < 64; s++)
        if (sigismember(&a->mask, s) != sigismember(&b->mask, s))
            d |= 1;
    if (a->ss.ss_sp != b->ss.ss_sp || a->ss.ss_size != b->ss.ss_size
        || a->ss.ss_flags != b->ss.ss_flags)
        d |= 2;
    if (a->mxcsr != b->mxcsr)
        d |= 4;
    if (a->robust != b->robust || a->robust_len != b->robust_len)
        d |= 8;
    if (a->rseq != b->rseq)
        d |= 16;
    return d;
}

static void *worker(void *arg)
{
    int i = (int)(intptr_t)arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGRTMIN + 1 + i);
    if (i % 2)
        sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    stack_t ss = { .ss_sp = altstacks[i], .ss_flags = 0, .ss_size = sizeof altstacks[i] };
    if (sigaltstack(&ss, NULL)) {
        perror("threadstate: sigaltstack");
        exit(1);
    }
    /* rounding control i+1 (bits 13-14), flush-to-zero (bit 15) in worker 1 */
    set_mxcsr((get_mxcsr() & ~0xe000u) | (unsigned)((i + 1) & 3) << 13 | (i == 1 ? 0x8000u : 0));
    struct noted first, now;
    look(&first);
    pthread_mutex_lock(&lock);
    ready++;
    pthread_cond_signal(&done);
    long seen = 0;
    for (;;) {
        while (round_no == seen)
            pthread_cond_wait(&go, &lock);
        seen = round_no;
        look(&now);
        bad |= differs(&first, &now) << (5 * i);
        finished++;
        pthread_cond_signal(&done);
    }
    return NULL;
}

static void emit(void)
{
    char line[64];
    int n = snprintf(line, sizeof line, "{\"round\":%ld,\"bad\":%lu}\n", round_no, bad);
    if (write(3, line, (size_t)n) != n) {
        perror("threadstate: write fd 3");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: threadstate PORT\n");
        return 2;
    }
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i)) {
            fprintf(stderr, "threadstate: pthread_create failed\n");
            return 1;
        }
    pthread_mutex_lock(&lock);
    while (ready < WORKERS)
        pthread_cond_wait(&done, &lock);
    emit();
    pthread_mutex_unlock(&lock);

    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 8)) {
        perror("threadstate: bind/listen");
        return 1;
    }
    for (;;) {
        int c = accept(ls, NULL, NULL);
        if (c < 0)
            continue;
        char buf[64];
        size_t have = 0;
        ssize_t got;
        while ((got = read(c, buf + have, sizeof buf - 1 - have)) > 0) {
            have += (size_t)got;
            buf[have] = '\0';
            char *nl;
            while ((nl = strchr(buf, '\n')) != NULL) {
                *nl = '\0';
                char out[64];
                int n;
                if (strcmp(buf, "CHECK") == 0) {
                    pthread_mutex_lock(&lock);
                    round_no++;
                    finished = 0;
                    pthread_cond_broadcast(&go);
                    while (finished < WORKERS)
                        pthread_cond_wait(&done, &lock);
                    emit();
                    n = snprintf(out, sizeof out, "OK %ld %lu\n", round_no, bad);
                    pthread_mutex_unlock(&lock);
                } else {
                    n = snprintf(out, sizeof out, "ERROR\n");
                }
                if (write(c, out, (size_t)n) != n)
                    break;
                have -= (size_t)(nl + 1 - buf);
                memmove(buf, nl + 1, have + 1);
            }
            if (have == sizeof buf - 1)
                have = 0;
        }
        close(c);
    }
}
