/* inject.c: system calls cmc makes in a node's stopped threads, as their tracer: one
 * at a time, single-stepped over a `syscall` (the fork or clone it makes reported),
 * or one in each of many threads at once (batch_call), their round trips overlapping.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <sys/wait.h>

#include "cmc_internal.h"

/* Wait for a stop (or the end) of a traced pid, at most timeout_ms; SIGCHLD must
 * be blocked by the caller. 0 with *st, or -errno (-ETIMEDOUT). */
int wait_traced(int pid, int *st, int timeout_ms)
{
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    for (int waited_ms = 0;;) {
        pid_t w = waitpid(pid, st, __WALL | WNOHANG);
        if (w == pid) return 0;
        if (w < 0 && errno != EINTR) return -errno;
        if (waited_ms >= timeout_ms) return -ETIMEDOUT;
        struct timespec slice = { 0, 2 * 1000 * 1000 };
        sigtimedwait(&chld, NULL, &slice);
        waited_ms += 2;
    }
}

/* Run one system call in a stopped tracee at the `syscall` instruction at ip,
 * from register set base, by single-stepping over it (one stop). Returns the
 * call's result (a kernel value; -errno on failure) in *result, 0 or -errno
 * (the tracing failed). */
int inject(int pid, const struct user_regs_struct *base, uint64_t ip, long nr,
           uint64_t a0, uint64_t a1, uint64_t a2, long *result)
{
    uint64_t a[6] = { a0, a1, a2, 0, 0, 0 };
    return inject6(pid, base, ip, nr, a, result);
}

/* Set stopped tracee pid about to make call nr(a) at the `syscall` at ip, from
 * register set base, and single-step it into the call. */
static int step_into_call(int pid, const struct user_regs_struct *base, uint64_t ip, long nr,
                          const uint64_t a[6])
{
    struct user_regs_struct r = *base;
    r.rip = ip; r.rax = nr; r.orig_rax = (uint64_t)-1;
    r.rdi = a[0]; r.rsi = a[1]; r.rdx = a[2]; r.r10 = a[3]; r.r8 = a[4]; r.r9 = a[5];
    if (ptrace(PTRACE_SETREGS, pid, 0, &r)) return -errno;
    if (ptrace(PTRACE_SINGLESTEP, pid, 0, 0)) return -errno;
    return 0;
}

/* After the step: the call's result, once pid stands just past the `syscall` at ip. */
static int call_result(int pid, uint64_t ip, long *result)
{
    struct user_regs_struct r;
    if (ptrace(PTRACE_GETREGS, pid, 0, &r)) return -errno;
    if (r.rip != ip + 2) return -EPROTO;
    *result = (long)r.rax;
    return 0;
}

/* inject6, where a fork or clone on the way (its ptrace event stop) gives the new
 * task's id in *born. The calls of cmc's copies are made at the untraced `syscall`
 * (UNTRACED_IP), so none of them waits for a notification's answer. */
int inject_born(int pid, const struct user_regs_struct *base, uint64_t ip, long nr,
                const uint64_t a[6], long *result, int *born)
{
    int st, e;
    if ((e = step_into_call(pid, base, ip, nr, a))) return e;
    for (;;) {
        if ((e = wait_traced(pid, &st, 2000))) return e;
        if (!WIFSTOPPED(st) || ((st >> 16) != PTRACE_EVENT_FORK
                                && (st >> 16) != PTRACE_EVENT_CLONE))
            break;
        unsigned long msg = 0;
        ptrace(PTRACE_GETEVENTMSG, pid, 0, &msg);
        if (born) *born = (int)msg;
        if (ptrace(PTRACE_SINGLESTEP, pid, 0, 0)) return -errno;
    }
    if (!WIFSTOPPED(st) || WSTOPSIG(st) != SIGTRAP || (st >> 16)) return -EPROTO;
    return call_result(pid, ip, result);
}

int inject6(int pid, const struct user_regs_struct *base, uint64_t ip, long nr,
            const uint64_t a[6], long *result)
{
    return inject_born(pid, base, ip, nr, a, result, NULL);
}

/* One call in each of m stopped threads at once: every thread is stepped into its call
 * (registers bases[i], at the untraced `syscall`, arguments args[i]) before any is
 * waited for, so that their round trips overlap. With len > 0, argument `arg` of each
 * points at its len bytes of bufs, put at the thread's stack pointer (what is there
 * kept and put back) and read back after the call. res[i]: each call's result. Every
 * thread stepped is waited for, whatever fails; the first failure is returned. */
int batch_call(int m, const int *tids, const struct user_regs_struct *const *bases,
               long nr, uint64_t (*args)[6], int arg, unsigned char *bufs, size_t len,
               long *res)
{
    if (m <= 0) return 0;
    int e = 0;
    unsigned char *kept = calloc((size_t)m, len ? len : 1);
    uint64_t *at = calloc((size_t)m, sizeof *at);
    char *going = calloc((size_t)m, 1);
    if (!kept || !at || !going) { e = -ENOMEM; goto out; }
    for (int i = 0; i < m; i++) {
        struct user_regs_struct r = *bases[i];
        if (len) {
            at[i] = r.rsp & ~(uint64_t)7;
            if (cmc_read_mem(tids[i], at[i], kept + i * len, len) != (int64_t)len) {
                e = e ? e : -EFAULT;
                continue;
            }
            if (cmc_write_mem(tids[i], at[i], bufs + i * len, len) != (int64_t)len) {
                cmc_write_mem(tids[i], at[i], kept + i * len, len);
                e = e ? e : -EFAULT;
                continue;
            }
            args[i][arg] = at[i];
            r.rsp = 0;                /* not "on the signal stack", for sigaltstack */
        }
        int s = step_into_call(tids[i], &r, UNTRACED_IP, nr, args[i]);
        if (s) {
            if (len) cmc_write_mem(tids[i], at[i], kept + i * len, len);
            e = e ? e : s;
            continue;
        }
        going[i] = 1;
    }
    for (int i = 0; i < m; i++) {
        if (!going[i]) continue;
        int st, s = wait_traced(tids[i], &st, 2000);
        if (!s && (!WIFSTOPPED(st) || WSTOPSIG(st) != SIGTRAP || (st >> 16))) s = -EPROTO;
        if (!s) s = call_result(tids[i], UNTRACED_IP, &res[i]);
        if (len) {
            if (!s && cmc_read_mem(tids[i], at[i], bufs + i * len, len) != (int64_t)len)
                s = -EFAULT;
            if (cmc_write_mem(tids[i], at[i], kept + i * len, len) != (int64_t)len && !s)
                s = -EFAULT;
        }
        e = e ? e : s;
    }
out:
    free(kept);
    free(at);
    free(going);
    return e;
}

/* One call of thread tid whose argument `arg` points at len bytes of buf, as
 * batch_call makes them. */
int inject_with(int tid, const struct user_regs_struct *base, long nr, uint64_t a[6],
                int arg, void *buf, size_t len, long *result)
{
    return batch_call(1, &tid, &base, nr, (uint64_t (*)[6])a, arg, buf, len, result);
}

void batch_free(struct batch *b)
{
    free(b->ids);
    free(b->bases);
    free(b->args);
    free(b->ss);
    free(b->res);
}

int batch_alloc(struct batch *b, int n)
{
    b->ids = calloc((size_t)n, sizeof *b->ids);
    b->bases = calloc((size_t)n, sizeof *b->bases);
    b->args = calloc((size_t)n, sizeof *b->args);
    b->ss = calloc((size_t)n, sizeof *b->ss);
    b->res = calloc((size_t)n, sizeof *b->res);
    if (b->ids && b->bases && b->args && b->ss && b->res) return 0;
    batch_free(b);
    return -ENOMEM;
}
