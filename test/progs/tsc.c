/*
 * tsc: reads the time-stamp counter, the way runtimes do (Go seeds its random numbers
 * with it), and takes a SIGSEGV of its own.
 *
 *   tsc USEC
 *
 * Writes, on fd 3, one line:
 *   {"rdtsc":A,"rdtscp":B,"aux":X,"segv":S,"old_is_mine":O,"child":C,"spun":N}
 * A and B: two reads (rdtsc, then rdtscp) as the counter's value; X: rdtscp's
 * TSC_AUX; S: 1 when its own SIGSEGV handler caught a write to address 0 (and the
 * program went on, by siglongjmp); O: 1 when sigaction gave back its own handler as
 * the old one; C: the value a forked child read (reported through its exit status:
 * 1 when it read a counter at least A); N: the reads of rdtsc it took until USEC
 * microseconds of counter passed (1 GHz) -- under `time virtual` a polled counter
 * moves, as a polled clock does. Then blocks in accept() on 127.0.0.1:9100.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "misbehave.h"

static inline uint64_t rdtsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

static inline uint64_t rdtscp(uint32_t *aux)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(*aux));
    return ((uint64_t)hi << 32) | lo;
}

static sigjmp_buf back;
static volatile sig_atomic_t caught;

static void on_segv(int sig, siginfo_t *info, void *uc)
{
    (void)sig; (void)uc;
    caught = info->si_addr == NULL ? 1 : 2;
    siglongjmp(back, 1);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: tsc USEC\n");
        return 2;
    }
    uint32_t aux = 77;
    uint64_t a = rdtsc();
    uint64_t b = rdtscp(&aux);

    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGSEGV, NULL, &old);
    int old_is_mine = old.sa_sigaction == on_segv;
    if (sigsetjmp(back, 1) == 0)
        *(volatile int *)(uintptr_t)(argc - 2) = 1;    /* a write to address 0 */

    pid_t pid = fork();
    if (pid == 0)
        _exit(rdtsc() >= a ? 1 : 0);
    int st = 0;
    waitpid(pid, &st, 0);

    uint64_t start = rdtsc(), t = start, wait = strtoull(argv[1], NULL, 10) * 1000;
    long spun = 1;
    while (t - start < wait) {
        t = rdtsc();
        spun++;
    }
    char line[256];
    int n = snprintf(line, sizeof line,
                     "{\"rdtsc\":%llu,\"rdtscp\":%llu,\"aux\":%u,\"segv\":%d,"
                     "\"old_is_mine\":%d,\"child\":%d,\"spun\":%ld}\n",
                     (unsigned long long)a, (unsigned long long)b, aux, (int)caught,
                     old_is_mine, WIFEXITED(st) ? WEXITSTATUS(st) : -1, spun);
    if (write(3, line, (size_t)n) != n)
        perror("tsc: write fd 3");

    accept(listen_on("tsc", "9100"), NULL, NULL);   /* blocks: an emulated call */
    return 0;
}
