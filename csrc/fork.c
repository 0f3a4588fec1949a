/* fork.c: the copy of a threaded process (cmc_fork_threads). Its threads stopped
 * at their held calls and read (registers, signal mask, FPU state, robust list, rseq
 * area, alternate stack); the copy forked from its first thread; its other threads
 * made as the originals', born dressed by the birth code in the trap page, or each a
 * clone dressed one injected call at a time. tree.c makes each process's copy so.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "cmc_internal.h"

/* Threads born dressed (docs/design.md, "Copies of threaded nodes"): code put in the
 * trap page at TRAP_BIRTH_CODE_AT, run in a copy's stopped first thread: %r12 clones,
 * one per entry of the table at %rbx (flags, stack, child_tid, tls, result: 5 words),
 * each made at the second untraced `syscall` (CMC_TRAP_BIRTH_AT: `syscall; ret`), then
 * int3 (a SIGTRAP stop for cmc). A new thread starts at that `ret` on its own stack,
 * whose first word sends it to cmc_birth_child: set_robust_list and rseq from the
 * words that follow, if any, then rt_sigreturn from the ucontext after them -- its registers,
 * signal mask, alternate stack and FPU state at once, about to make its held call
 * again. A failed call makes a getpid there instead (notified: cmc, expecting the
 * held call, sees the fork failed). */
#define BIRTH_GADGET CMC_STR(CMC_TRAP_PAGE) "+" CMC_STR(CMC_TRAP_BIRTH_AT)
__asm__(
"    .pushsection .rodata.cmc_birth,\"a\"\n"
"    .globl cmc_birth_code\n"
"    .hidden cmc_birth_code\n"
"    .globl cmc_birth_child\n"
"    .hidden cmc_birth_child\n"
"    .globl cmc_birth_trap\n"
"    .hidden cmc_birth_trap\n"
"    .globl cmc_birth_code_end\n"
"    .hidden cmc_birth_code_end\n"
"cmc_birth_code:\n"
"1:  testq %r12, %r12\n"
"    jz 9f\n"
"    movq (%rbx), %rdi\n"
"    movq 8(%rbx), %rsi\n"
"    xorl %edx, %edx\n"
"    movq 16(%rbx), %r10\n"
"    movq 24(%rbx), %r8\n"
"    movl $56, %eax\n"                   /* clone */
"    movabsq $" BIRTH_GADGET ", %r11\n"
"    call *%r11\n"
"    movq %rax, 32(%rbx)\n"
"    addq $40, %rbx\n"
"    decq %r12\n"
"    jmp 1b\n"
"9:  int3\n"
"cmc_birth_trap:\n"
"    hlt\n"
"cmc_birth_child:\n"                   /* %rsp: the words after the first */
"    movq (%rsp), %rdi\n"
"    testq %rdi, %rdi\n"
"    jz 2f\n"
"    movq 8(%rsp), %rsi\n"
"    movl $273, %eax\n"                  /* set_robust_list */
"    movabsq $" BIRTH_GADGET ", %r11\n"
"    call *%r11\n"
"    testq %rax, %rax\n"
"    jnz 8f\n"
"2:  movq 16(%rsp), %rdi\n"
"    testq %rdi, %rdi\n"
"    jz 3f\n"
"    movl 24(%rsp), %esi\n"
"    xorl %edx, %edx\n"
"    movl 28(%rsp), %r10d\n"
"    movl $334, %eax\n"                  /* rseq */
"    movabsq $" BIRTH_GADGET ", %r11\n"
"    call *%r11\n"
"    testq %rax, %rax\n"
"    jnz 8f\n"
"3:  addq $32, %rsp\n"                  /* at the ucontext */
"    movl $15, %eax\n"                   /* rt_sigreturn */
"    movabsq $" BIRTH_GADGET ", %r11\n"
"    jmp *%r11\n"
"8:  movl $39, %eax\n"                   /* getpid, notified */
"    syscall\n"
"    hlt\n"
"cmc_birth_code_end:\n"
"    .popsection\n");
#define CLONE_A_THREAD (CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD \
                        | CLONE_SYSVSEM)

#define BIRTH_BLOCK 1024
#define BIRTH_MAX 96

static int is_epoll_wait(uint64_t nr)
{
    return nr == __NR_epoll_wait || nr == __NR_epoll_pwait || nr == __NR_epoll_pwait2;
}

/* Thread tid, interrupted out of its call (held in notification held, or 0: asleep
 * natively), once it stops: *ts gets its registers (as about to make the call again)
 * and what the kernel keeps for it, but its alternate signal stack. */
static int read_stopped(int tid, uint64_t held, struct thread_state *ts)
{
    int st, e;
    struct user_regs_struct saved;
    if ((e = wait_traced(tid, &st, 2000))) return e;
    if (!WIFSTOPPED(st) || (st >> 16) != PTRACE_EVENT_STOP) return -EPROTO;
    if (ptrace(PTRACE_GETREGS, tid, 0, &saved)) return -errno;
    /* held 0: asleep in a native call, which the interrupt made return a restart
     * code (ERESTARTSYS, ERESTARTNOINTR, ERESTARTNOHAND); poll's ERESTART_RESTARTBLOCK
     * with no timeout (the same call again); or EINTR from the epoll family, which is
     * never restarted (it sleeps there with no timeout and no signal mask of its own:
     * cmc waits natively for nothing else, proc/fork.py); anything else means it had
     * ended, and going back into it would lose its result */
    long rax = (long)saved.rax;
    if (!held && !(rax <= -512 && rax >= -514)
        && !(rax == -516 && saved.orig_rax == __NR_poll && (int)saved.rdx < 0)
        && !(rax == -EINTR && is_epoll_wait(saved.orig_rax)))
        return -EAGAIN;
    errno = 0;
    long word = ptrace(PTRACE_PEEKTEXT, tid, saved.rip - 2, 0);
    if (errno || (word & 0xffff) != 0x050f) return -ENOEXEC;
    ts->again = saved;
    ts->again.rip = saved.rip - 2;
    ts->again.rax = saved.orig_rax;
    ts->again.orig_rax = (uint64_t)-1;
    ts->valid = 1;
    if (ptrace(PTRACE_GETSIGMASK, tid, sizeof ts->mask, &ts->mask)) return -errno;
    if (ptrace(PTRACE_GETFPREGS, tid, 0, &ts->fp)) return -errno;
    if (syscall(SYS_get_robust_list, tid, &ts->robust, &ts->robust_len)) return -errno;
    if (ptrace(PTRACE_GET_RSEQ_CONFIGURATION, tid, sizeof ts->rseq, &ts->rseq) < 0)
        memset(&ts->rseq, 0, sizeof ts->rseq);       /* a kernel before 5.13: none */
    ts->ss.flags = 2;                                 /* SS_DISABLE */
    return 0;
}

/* Stop threads tids[0, n) but those known (known[i]; NULL: none), each held in
 * notification held[i] (0: asleep natively), at their system calls, all at once: every
 * interrupt queued first (the throw-away answer then returns into a ptrace stop, before
 * the program can see it), every held call answered, then each stop read
 * (read_stopped), then the alternate signal stack of each thread but the first of its
 * process (first[i]: whose goes with the fork) asked by a `sigaltstack` injected into
 * all of them together. */
int stop_threads(int listener, int n, const int *tids, const uint64_t *held,
                 struct thread_state *ts, const char *first, const char *known)
{
    int e = 0;
#define STOPPED(i) (!known || !known[i])
    for (int i = 0; i < n; i++)
        if (STOPPED(i) && ptrace(PTRACE_INTERRUPT, tids[i], 0, 0)) return -errno;
    for (int i = 0; i < n; i++)
        if (STOPPED(i) && held[i]) {
            int r = cmc_respond(listener, held[i], 0, EINTR, 0);
            if (r && r != -ENOENT && !e) e = r;
        }
    for (int i = 0; i < n; i++) {           /* each waited for, to be set back */
        int r = STOPPED(i) ? read_stopped(tids[i], held[i], &ts[i]) : 0;
        if (r && !e) e = r;
    }
    if (e) return e;
    int m = 0, *who = calloc((size_t)n, sizeof *who);
    struct batch b;
    if (!who || batch_alloc(&b, n)) { free(who); return -ENOMEM; }
    for (int i = 0; i < n; i++)
        if (!first[i] && STOPPED(i)) {
            who[m] = i;
            b.ids[m] = tids[i];
            b.bases[m++] = &ts[i].again;
        }
    e = batch_call(m, b.ids, b.bases, __NR_sigaltstack, b.args, 1, (unsigned char *)b.ss,
                   sizeof *b.ss, b.res);
    for (int j = 0; j < m && !e; j++) {
        if (b.res[j]) e = (int)b.res[j];
        ts[who[j]].ss = b.ss[j];
    }
    free(who);
    batch_free(&b);
    return e;
#undef STOPPED
}

/* In the copy's new threads tids[0, m) (bare clones of its first thread, their
 * clear_child_tid set by the clone): what the kernel kept for each original thread
 * (ts[i]), a call at a time in all of them together, then its mask, FPU state and
 * registers. */
static int dress_threads(int m, const int *tids, const struct thread_state *ts)
{
    if (m <= 0) return 0;
    int e = 0, k;
    struct batch b;
    if (batch_alloc(&b, m)) return -ENOMEM;
    uint64_t (*args)[6] = b.args;
    struct stack_rec *ss = b.ss;
    for (int call = 0; call < 3 && !e; call++) {
        k = 0;
        for (int i = 0; i < m; i++) {
            const struct thread_state *t = &ts[i];
            uint64_t *a = args[k];
            memset(a, 0, sizeof args[k]);
            if (call == 0 && !(t->ss.flags & 2)) {
                ss[k] = t->ss;
                ss[k].flags &= ~1;                    /* SS_ONSTACK is a reading only */
            } else if (call == 1 && t->robust) {
                a[0] = t->robust;
                a[1] = t->robust_len;
            } else if (call == 2 && t->rseq.ptr) {
                a[0] = t->rseq.ptr;
                a[1] = t->rseq.size;
                a[3] = t->rseq.sig;
            } else {
                continue;
            }
            b.ids[k] = tids[i];
            b.bases[k++] = &t->again;
        }
        static const long nrs[3] = { __NR_sigaltstack, __NR_set_robust_list, __NR_rseq };
        e = batch_call(k, b.ids, b.bases, nrs[call], args, 0, call ? NULL : (unsigned char *)ss,
                       call ? 0 : sizeof *ss, b.res);
        for (int j = 0; j < k && !e; j++)
            if (b.res[j]) e = (int)b.res[j];
    }
    for (int i = 0; i < m && !e; i++) {
        if (ptrace(PTRACE_SETSIGMASK, tids[i], sizeof ts[i].mask, &ts[i].mask)) e = -errno;
        else if (ptrace(PTRACE_SETFPREGS, tids[i], 0, &ts[i].fp)) e = -errno;
        else if (ptrace(PTRACE_SETREGS, tids[i], 0, &ts[i].again)) e = -errno;
    }
    batch_free(&b);
    return e;
}

/* The copy's first thread (a fork clears its robust list and its clear_child_tid):
 * those set again, then its registers. */
static int dress_first(int tid, const struct thread_state *ts, uint64_t ctid)
{
    long res;
    int e;
    const struct user_regs_struct *b = &ts->again;
    if (ts->robust) {
        if ((e = inject(tid, b, UNTRACED_IP, __NR_set_robust_list, ts->robust, ts->robust_len,
                        0, &res)))
            return e;
        if (res) return (int)res;
    }
    if (ctid && (e = inject(tid, b, UNTRACED_IP, __NR_set_tid_address, ctid, 0, 0, &res)))
        return e;
    if (ptrace(PTRACE_SETREGS, tid, 0, b)) return -errno;
    return 0;
}

/* In the copy (thread tid, registers b): each mapping of a file of the node's
 * directory mapped again, at its place, from the copy's file. */
int remap(int tid, const struct user_regs_struct *b, int nmaps,
          const struct cmc_remap *maps)
{
    long res, fd;
    int e;
    for (int i = 0; i < nmaps; i++) {
        const struct cmc_remap *m = &maps[i];
        char path[4096];
        size_t len = strlen(m->path) + 1;
        if (len > sizeof path) return -ENAMETOOLONG;
        memcpy(path, m->path, len);
        int writable = (m->prot & PROT_WRITE) && (m->flags & MAP_SHARED);
        uint64_t a[6] = { (uint64_t)AT_FDCWD, 0, (uint64_t)(writable ? O_RDWR : O_RDONLY) | O_CLOEXEC,
                          0, 0, 0 };
        if ((e = inject_with(tid, b, __NR_openat, a, 1, path, len, &fd)))
            return e;
        if (fd < 0) return (int)fd;
        uint64_t mm[6] = { m->start, m->len, (uint64_t)m->prot, (uint64_t)(m->flags | MAP_FIXED),
                           (uint64_t)fd, m->offset };
        e = inject6(tid, b, UNTRACED_IP, __NR_mmap, mm, &res);
        long closed;
        int e2 = inject(tid, b, UNTRACED_IP, __NR_close, (uint64_t)fd, 0, 0, &closed);
        if (e) return e;
        if (res != (long)m->start) return res < 0 ? (int)res : -EFAULT;
        if (e2) return e2;
    }
    return 0;
}

/* The end of a fork, made or failed: a failed copy killed (`child`, its first process:
 * for a tree, its end ends every copy in its namespace) and reaped, every copy let go
 * (made[]), and the originals seized (the first `seized`, but those known: NULL, none),
 * each about to make its held call again, let go. */
void end_fork(int child, const int *made, int nmade, const int *tids,
              const struct thread_state *ts, int seized, const char *known)
{
    if (child) kill(child, SIGKILL);
    for (int i = 0; i < nmade; i++)
        if (made[i]) ptrace(PTRACE_DETACH, made[i], 0, 0);
    if (child) while (waitpid(child, NULL, __WALL) < 0 && errno == EINTR) {}
    for (int i = 0; i < seized; i++)
        if (ts[i].valid) ptrace(PTRACE_SETREGS, tids[i], 0, &ts[i].again);
    for (int i = 0; i < seized; i++)
        if (!known || !known[i]) ptrace(PTRACE_DETACH, tids[i], 0, 0);
}

int cmc_thread_state_size(void)
{
    return (int)sizeof(struct thread_state);
}

int cmc_fork_threads(int listener, int n, const int *tids, const uint64_t *held,
                     const uint64_t *ctids, const char *cwd, int nmaps,
                     const struct cmc_remap *maps, unsigned long unshare_flags,
                     void *states, const char *known_in, int *out)
{
    if (n < 1 || n > 4096) return -EINVAL;
    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &chld, &old);
    struct thread_state *ts = calloc((size_t)n, sizeof *ts);
    int *made = calloc((size_t)n, sizeof *made);     /* the copy's threads */
    char *known = calloc((size_t)n, 1);
    int seized = 0, st, e = 0, child = 0, traced = n;   /* the copy's threads to let go */
    long res;
    if (!ts || !made || !known) { e = -ENOMEM; goto out; }
    /* A thread whose state is known (read by an earlier fork, and it has not run
     * since) is left in its held call; the first, which forks, is stopped always. */
    for (int i = 1; i < n; i++)
        if (known_in[i]) {
            memcpy(&ts[i], (char *)states + (size_t)i * sizeof *ts, sizeof *ts);
            ts[i].valid = 0;
            known[i] = 1;
        }
    /* EXITKILL: should cmc die while it holds them, the node and its copy die too.
     * The copy is traced from its birth (TRACEFORK and TRACECLONE pass the options
     * on), so there is no moment before its own PR_SET_PDEATHSIG at which it could
     * outlive cmc. */
    for (; seized < n; seized++)
        if (!known[seized] && ptrace(PTRACE_SEIZE, tids[seized], 0,
                   PTRACE_O_TRACEFORK | PTRACE_O_TRACECLONE | PTRACE_O_EXITKILL)) {
            e = -errno;
            goto out_detach;
        }
    {
        char *first = calloc((size_t)n, 1);       /* the forking thread's goes with the fork */
        if (!first) { e = -ENOMEM; goto out_restore; }
        first[0] = 1;
        e = stop_threads(listener, n, tids, held, ts, first, known);
        free(first);
        if (e) goto out_restore;
    }
    /* The fork, from the first thread: the copy's first thread is its copy. */
    {
        uint64_t a[6] = { CLONE_PARENT | SIGCHLD, 0, 0, 0, 0, 0 };
        if ((e = inject_born(tids[0], &ts[0].again, UNTRACED_IP, __NR_clone,
                             a, &res, &child)))
            goto out_restore;
        if (res < 0 || !child) { e = res < 0 ? (int)res : -ECHILD; goto out_restore; }
    }
    made[0] = child;
    /* The copy: its own process group, killed with cmc, in its own directory.
     * (cmc may set the group of a child that has not exec'd.) */
    if (setpgid(child, child)) { e = -errno; goto out_child; }
    if ((e = wait_traced(child, &st, 2000))) goto out_child;
    if (!WIFSTOPPED(st)) { e = -EPROTO; goto out_child; }
    {
        const struct user_regs_struct *b = &ts[0].again;
        if ((e = inject(child, b, UNTRACED_IP, __NR_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, &res)))
            goto out_child;
        if (res) { e = (int)res; goto out_child; }
        char path[256];
        size_t len = strlen(cwd) + 1;
        if (len > sizeof path) { e = -ENAMETOOLONG; goto out_child; }
        memcpy(path, cwd, len);
        uint64_t a[6] = { 0, 0, 0, 0, 0, 0 };
        if ((e = inject_with(child, b, __NR_chdir, a, 0, path, len, &res)))
            goto out_child;
        if (res) { e = (int)res; goto out_child; }
        if ((e = remap(child, b, nmaps, maps))) goto out_child;
        if (unshare_flags) {         /* namespaces of its own (a zygote's copy: its IPC) */
            uint64_t u[6] = { unshare_flags, 0, 0, 0, 0, 0 };
            if ((e = inject6(child, b, UNTRACED_IP, __NR_unshare, u, &res)))
                goto out_child;
            if (res) { e = (int)res; goto out_child; }
        }
    }
    /* Every other thread: a clone of the first, made the original's; then the first
     * (a fork clears its robust list and its clear_child_tid) */
    if ((e = make_threads(child, ts, ctids, n, made, 1, &traced))) goto out_child;
    memcpy(out, made, (size_t)n * sizeof *out);
    memcpy(states, ts, (size_t)n * sizeof *ts);
    child = 0;                       /* kept */
out_child:
out_restore:
out_detach:
    end_fork(child, made, traced, tids, ts, seized, known);
out:
    free(ts);
    free(made);
    free(known);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return e;
}

/* What the birth code (cmc_birth_code) reads of a new thread, at the start of its
 * BIRTH_BLOCK bytes: the word its clone's `ret` takes, its robust list, its rseq area,
 * then a ucontext for rt_sigreturn (the kernel's layout), its FPU state after. */
struct birth_block {
    uint64_t child_ip;
    uint64_t robust, robust_len;
    uint64_t rseq, rseq_len_sig;
    struct {
        uint64_t flags, link;
        struct stack_rec stack;
        uint64_t gregs[18];          /* r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip, flags */
        uint16_t cs, gs, fs, ss;
        uint64_t err, trapno, oldmask, cr2, fpstate, reserved[8];
        uint64_t sigmask;
    } uc;
    unsigned char siginfo[128];     /* rt_sigreturn checks it may read a whole frame */
    unsigned char pad[BIRTH_BLOCK / 2 - 5 * 8 - 304 - 128];
    unsigned char fp[512];           /* 64-aligned, fxsave's format */
};
_Static_assert(sizeof(struct birth_block) == BIRTH_BLOCK, "birth block");

/* The copy's threads but its first (k - 1 of them, after child, which is stopped and
 * traced) made by the birth code, each clone setting its TLS and clear_child_tid and
 * the new thread dressing itself, untraced: no stop per thread or per call. 1 when a
 * thread cannot be made so (too many; a GS base not its first's; on its alternate
 * stack, which rt_sigreturn will not set while in use), else 0 or -errno. */
static int born_dressed(int child, const struct thread_state *ts, const uint64_t *ctids,
                        int k, int *made)
{
    int m = k - 1, st, e;
    if (m > BIRTH_MAX) return 1;
    for (int i = 1; i < k; i++)
        if (ts[i].again.gs_base != ts[0].again.gs_base || (ts[i].ss.flags & 1)) return 1;
    size_t len = 4096 + (size_t)m * BIRTH_BLOCK;
    unsigned char *buf = calloc(1, len);
    if (!buf) return -ENOMEM;
    uint64_t *table = (uint64_t *)buf;
    for (int i = 1; i < k; i++) {
        const struct thread_state *t = &ts[i];
        uint64_t at = CMC_TRAP_SCRATCH + 4096 + (uint64_t)(i - 1) * BIRTH_BLOCK;
        struct birth_block *b = (struct birth_block *)(buf + (at - CMC_TRAP_SCRATCH));
        const struct user_regs_struct *r = &t->again;
        uint64_t *w = &table[(i - 1) * 5];
        w[0] = CLONE_A_THREAD | CLONE_SETTLS | (ctids[i] ? CLONE_CHILD_CLEARTID : 0);
        w[1] = at;
        w[2] = ctids[i];
        w[3] = r->fs_base;
        b->child_ip = CMC_TRAP_PAGE + TRAP_BIRTH_CODE_AT
                      + (uint64_t)(cmc_birth_child - cmc_birth_code);
        b->robust = t->robust;
        b->robust_len = t->robust_len;
        b->rseq = t->rseq.ptr;
        b->rseq_len_sig = (uint64_t)t->rseq.size | (uint64_t)t->rseq.sig << 32;
        b->uc.flags = 0x2 | 0x4;        /* UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS */
        b->uc.stack = t->ss;
        b->uc.stack.flags &= ~1;         /* SS_ONSTACK is a reading only */
        uint64_t g[18] = { r->r8, r->r9, r->r10, r->r11, r->r12, r->r13, r->r14, r->r15,
                           r->rdi, r->rsi, r->rbp, r->rbx, r->rdx, r->rax, r->rcx, r->rsp,
                           r->rip, r->eflags };
        memcpy(b->uc.gregs, g, sizeof g);
        b->uc.cs = (uint16_t)r->cs;
        b->uc.ss = (uint16_t)r->ss;
        b->uc.sigmask = t->mask;
        memcpy(b->fp, &t->fp, sizeof b->fp);
        memset(b->fp + 464, 0, 48);      /* no xsave header: the legacy area alone */
        b->uc.fpstate = at + offsetof(struct birth_block, fp);
    }
    e = 0;
    if (cmc_write_mem(child, CMC_TRAP_SCRATCH, buf, len) != (int64_t)len) e = -EFAULT;
    /* its clones untraced: they run on their own */
    if (!e && ptrace(PTRACE_SETOPTIONS, child, 0, PTRACE_O_EXITKILL)) e = -errno;
    struct user_regs_struct r = ts[0].again;
    r.rip = CMC_TRAP_PAGE + TRAP_BIRTH_CODE_AT;
    r.rbx = CMC_TRAP_SCRATCH;
    r.r12 = (uint64_t)m;
    r.rsp = CMC_TRAP_SCRATCH + 4096 - 64;
    r.orig_rax = (uint64_t)-1;
    if (!e && ptrace(PTRACE_SETREGS, child, 0, &r)) e = -errno;
    if (!e && ptrace(PTRACE_CONT, child, 0, 0)) e = -errno;
    if (!e && !(e = wait_traced(child, &st, 2000))) {
        struct user_regs_struct after;
        if (!WIFSTOPPED(st) || WSTOPSIG(st) != SIGTRAP) e = -EPROTO;
        else if (ptrace(PTRACE_GETREGS, child, 0, &after)) e = -errno;
        else if (after.rip != CMC_TRAP_PAGE + TRAP_BIRTH_CODE_AT
                              + (uint64_t)(cmc_birth_trap - cmc_birth_code)) e = -EPROTO;
    }
    if (!e && cmc_read_mem(child, CMC_TRAP_SCRATCH, table, (uint64_t)m * 40) != (int64_t)m * 40)
        e = -EFAULT;
    for (int i = 1; i < k && !e; i++) {
        long tid = (long)table[(i - 1) * 5 + 4];
        if (tid <= 0) e = tid < 0 ? (int)tid : -ECHILD;
        else made[i] = (int)tid;
    }
    free(buf);
    return e;
}

/* The first thread of a process made by a clone or fork (stopped at its birth, a
 * copy of thread `like`): its other threads made as its original's (tids[1..k)), born
 * dressed where `born` allows and they can be (*traced: 1, only the first is a tracee),
 * else each a clone (with its clear_child_tid) then dressed (dress_threads, all
 * together; *traced: k); then its first itself. made[] gets them. */
int make_threads(int child, struct thread_state *ts, const uint64_t *ctids,
                 int k, int *made, int born, int *traced)
{
    long res;
    int st, e;
    made[0] = child;
    *traced = k;
    if (born && k > 1) {
        e = born_dressed(child, ts, ctids, k, made);
        if (e <= 0) {
            if (!e) *traced = 1;
            return e ? e : dress_first(child, &ts[0], ctids[0]);
        }
    }
    for (int i = 1; i < k; i++) {
        uint64_t a[6] = { CLONE_A_THREAD | (ctids[i] ? CLONE_CHILD_CLEARTID : 0), 0, 0,
                          ctids[i], 0, 0 };
        int t = 0;
        if ((e = inject_born(child, &ts[0].again, UNTRACED_IP, __NR_clone, a,
                             &res, &t)))
            return e;
        if (res < 0 || !t) return res < 0 ? (int)res : -ECHILD;
        made[i] = t;
    }
    for (int i = 1; i < k; i++) {
        if ((e = wait_traced(made[i], &st, 2000))) return e;
        if (!WIFSTOPPED(st)) return -EPROTO;
    }
    if ((e = dress_threads(k - 1, made + 1, ts + 1))) return e;
    return dress_first(child, &ts[0], ctids[0]);
}
