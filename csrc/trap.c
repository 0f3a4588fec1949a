/* trap.c: a node's exec (cmc_exec_continue). Its notified execve let go under
 * ptrace; at the exec stop the auxiliary vector set as cmc's (no vDSO, cmc's AT_RANDOM)
 * and the trap page mapped and filled: the TSC trap (rdtsc and rdtscp fault into a
 * handler there that asks cmc), the untraced `syscall`s, fork.c's birth code.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "cmc_internal.h"

/* At the exec stop the new program's stack starts with argc, argv[], NULL,
 * envp[], NULL, then the auxiliary vector. */
static int fix_auxv(int pid, const unsigned char random16[16])
{
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, pid, 0, &regs)) return -errno;
    uint64_t p = regs.rsp, w = 0;
    if (cmc_read_mem(pid, p, &w, 8) != 8) return -EFAULT;
    p += 8 + (w + 1) * 8;                                   /* skip argc, argv */
    do {
        if (cmc_read_mem(pid, p, &w, 8) != 8) return -EFAULT;
        p += 8;
    } while (w);                                            /* skip envp */
    for (int i = 0; i < 512; i++, p += 16) {
        uint64_t e[2];
        if (cmc_read_mem(pid, p, e, 16) != 16) return -EFAULT;
        if (e[0] == AT_NULL) return 0;
        if (e[0] == AT_SYSINFO_EHDR) {
            uint64_t ignore = AT_IGNORE;
            if (cmc_write_mem(pid, p, &ignore, 8) != 8) return -EFAULT;
        } else if (e[0] == AT_RANDOM && e[1]) {
            if (cmc_write_mem(pid, e[1], random16, 16) != 16) return -EFAULT;
        }
    }
    return -E2BIG;
}

/* ---- the TSC is cmc's ----------------------------------------------------------
 *
 * Every exec'd image gets, before its first instruction, PR_SET_TSC(PR_TSC_SIGSEGV)
 * (rdtsc and rdtscp then fault) and a SIGSEGV handler of cmc's in a page of its own
 * at CMC_TRAP_PAGE (docs/design.md, "The TSC is cmc's"). The handler asks cmc for the
 * counter with clock_gettime(CMC_CLOCK_TSC) -- a notified call, answered from the
 * node's logical clock -- writes it into the interrupted registers and steps over the
 * instruction. Any other SIGSEGV goes to the program's own action, which cmc keeps
 * (rt_sigaction of SIGSEGV from outside the page is notified and emulated) and hands
 * to the handler through clock_gettime(CMC_CLOCK_SEGV_ACTION). Position-independent,
 * no data, no calls but to the program's handler. */
__asm__(
"    .pushsection .rodata.cmc_trap,\"a\"\n"
"    .globl cmc_trap_code\n"
"    .hidden cmc_trap_code\n"
"    .globl cmc_trap_restorer\n"
"    .hidden cmc_trap_restorer\n"
"    .globl cmc_trap_code_end\n"
"    .hidden cmc_trap_code_end\n"
"cmc_trap_code:\n"                       /* (int sig, siginfo_t *rsi, ucontext_t *rdx) */
"    cmpl $0x80, 8(%rsi)\n"               /* si_code SI_KERNEL: a #GP in user mode */
"    jne 20f\n"
"    movq 168(%rdx), %rcx\n"              /* gregs[REG_RIP] */
"    cmpw $0x310f, (%rcx)\n"              /* rdtsc: 0f 31 */
"    je 10f\n"
"    cmpw $0x010f, (%rcx)\n"              /* rdtscp: 0f 01 f9 */
"    jne 20f\n"
"    cmpb $0xf9, 2(%rcx)\n"
"    jne 20f\n"
"    movl $3, %r8d\n"
"    jmp 11f\n"
"10: movl $2, %r8d\n"
"11: subq $24, %rsp\n"
"    movq $0, (%rsp)\n"
"    movl $228, %eax\n"                   /* clock_gettime(CMC_CLOCK_TSC, &buf) */
"    movl $" CMC_STR(CMC_CLOCK_TSC) ", %edi\n"
"    movq %rsp, %rsi\n"
"    syscall\n"
"    movq (%rsp), %rax\n"
"    addq $24, %rsp\n"
"    movq %rax, %r9\n"
"    shrq $32, %r9\n"
"    movl %eax, %eax\n"
"    movq %rax, 144(%rdx)\n"              /* gregs[REG_RAX]: low half */
"    movq %r9, 136(%rdx)\n"               /* gregs[REG_RDX]: high half */
"    cmpl $3, %r8d\n"
"    jne 12f\n"
"    movq $0, 152(%rdx)\n"                /* gregs[REG_RCX]: TSC_AUX, cpu 0 */
"12: addq %r8, 168(%rdx)\n"               /* step over the instruction */
"    ret\n"
"20: pushq %rbx\n"                        /* any other SIGSEGV: the program's action */
"    pushq %r12\n"
"    pushq %r13\n"
"    movq %rsi, %rbx\n"
"    movq %rdx, %r12\n"
"    subq $32, %rsp\n"                    /* handler, flags, restorer, mask */
"    movq $0, (%rsp)\n"
"    movl $228, %eax\n"                   /* clock_gettime(CMC_CLOCK_SEGV_ACTION, &act, */
"    movl $" CMC_STR(CMC_CLOCK_SEGV_ACTION) ", %edi\n"
"    movq %rsp, %rsi\n"
"    movq %rbx, %rdx\n"                   /* info, uc): cmc notes where a fault was */
"    movq %r12, %r10\n"
"    syscall\n"
"    movq (%rsp), %rax\n"
"    cmpq $1, %rax\n"
"    ja 40f\n"
"    jb 30f\n"
"    cmpl $0, 8(%rbx)\n"                  /* SIG_IGN: a fault cannot be ignored */
"    jg 30f\n"
"    jmp 50f\n"
"30: xorl %eax, %eax\n"                   /* SIG_DFL: the kernel's action too, */
"    movq %rax, (%rsp)\n"
"    movq %rax, 8(%rsp)\n"
"    movq %rax, 16(%rsp)\n"
"    movq %rax, 24(%rsp)\n"
"    movl $13, %eax\n"                    /* rt_sigaction(SIGSEGV, &dfl, 0, 8) */
"    movl $11, %edi\n"
"    movq %rsp, %rsi\n"
"    xorl %edx, %edx\n"
"    movl $8, %r10d\n"
"    syscall\n"
"    cmpl $0, 8(%rbx)\n"                  /* a fault happens again on return; */
"    jg 50f\n"
"    movl $186, %eax\n"                   /* a sent signal is sent again */
"    syscall\n"
"    movl %eax, %edi\n"
"    movl $11, %esi\n"
"    movl $200, %eax\n"                   /* tkill(gettid(), SIGSEGV) */
"    syscall\n"
"    jmp 50f\n"
"40: movq 8(%rsp), %r13\n"                /* a handler: block its mask (and SIGSEGV */
"    movq 24(%rsp), %rax\n"               /* unless SA_NODEFER), call it */
"    btq $30, %r13\n"
"    jc 41f\n"
"    orq $0x400, %rax\n"
"41: movq %rax, 24(%rsp)\n"
"    movl $14, %eax\n"                    /* rt_sigprocmask(SIG_BLOCK, &mask, 0, 8) */
"    xorl %edi, %edi\n"
"    leaq 24(%rsp), %rsi\n"
"    xorl %edx, %edx\n"
"    movl $8, %r10d\n"
"    syscall\n"
"    movq (%rsp), %rax\n"
"    movl $11, %edi\n"
"    movq %rbx, %rsi\n"
"    movq %r12, %rdx\n"
"    callq *%rax\n"
"50: addq $32, %rsp\n"
"    popq %r13\n"
"    popq %r12\n"
"    popq %rbx\n"
"    ret\n"
"cmc_trap_restorer:\n"
"    movl $15, %eax\n"                    /* rt_sigreturn */
"    syscall\n"
"    hlt\n"
"cmc_trap_code_end:\n"
"    .popsection\n");
extern const unsigned char cmc_trap_code[], cmc_trap_restorer[], cmc_trap_code_end[];

#define TRAP_ACTION_AT 0x800        /* where the handler's struct sigaction is put */

int cmc_trap_page(uint64_t *addr_out)
{
    *addr_out = CMC_TRAP_PAGE;
    return (int)(cmc_trap_code_end - cmc_trap_code);
}

/* At the exec stop of pid: map the trap page, fill it, set the handler and make the
 * TSC fault, before the program's first instruction. The exec stop is inside execve:
 * one single-step first leaves the call (its return value set, no instruction run);
 * the two bytes borrowed at the entry point for the first `syscall`, and the
 * registers, are put back. 0 or -errno. */
static int trap_tsc(int pid)
{
    struct user_regs_struct entry, saved;
    int st, e;
    if (ptrace(PTRACE_GETREGS, pid, 0, &entry)) return -errno;
    if (ptrace(PTRACE_SINGLESTEP, pid, 0, 0)) return -errno;
    if ((e = wait_traced(pid, &st, 2000))) return e;
    if (!WIFSTOPPED(st) || WSTOPSIG(st) != SIGTRAP) return -EPROTO;
    if (ptrace(PTRACE_GETREGS, pid, 0, &saved)) return -errno;
    if (saved.rip != entry.rip) return -EPROTO;
    uint64_t ip = saved.rip, orig = 0;
    unsigned char sc[2] = { 0x0f, 0x05 };
    if (cmc_read_mem(pid, ip, &orig, 2) != 2) return -EFAULT;
    if (cmc_write_mem(pid, ip, sc, 2) != 2) return -EFAULT;
    long res;
    uint64_t mm[6] = { CMC_TRAP_PAGE, CMC_TRAP_PAGE_SIZE, PROT_READ | PROT_EXEC,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, (uint64_t)-1, 0 };
    e = inject6(pid, &saved, ip, __NR_mmap, mm, &res);
    cmc_write_mem(pid, ip, &orig, 2);
    if (e) goto out;
    if (res != (long)CMC_TRAP_PAGE) { e = res < 0 ? (int)res : -EEXIST; goto out; }
    size_t len = (size_t)(cmc_trap_code_end - cmc_trap_code);
    if (cmc_write_mem(pid, CMC_TRAP_PAGE, cmc_trap_code, len) != (int64_t)len) { e = -EFAULT; goto out; }
    uint64_t act[4] = { CMC_TRAP_PAGE,
                        0x04 | 0x08000000 | 0x04000000 | 0x10000000,  /* SIGINFO ONSTACK RESTORER RESTART */
                        CMC_TRAP_PAGE + (uint64_t)(cmc_trap_restorer - cmc_trap_code), 0 };
    if (cmc_write_mem(pid, CMC_TRAP_PAGE + TRAP_ACTION_AT, act, sizeof act) != sizeof act) {
        e = -EFAULT;
        goto out;
    }
    static const unsigned char untraced[3] = { 0x0f, 0x05, 0xf4 };     /* syscall; hlt */
    if (cmc_write_mem(pid, UNTRACED_IP, untraced, sizeof untraced) != sizeof untraced) {
        e = -EFAULT;
        goto out;
    }
    static const unsigned char birth[3] = { 0x0f, 0x05, 0xc3 };        /* syscall; ret */
    size_t blen = (size_t)(cmc_birth_code_end - cmc_birth_code);
    if (cmc_write_mem(pid, CMC_TRAP_PAGE + CMC_TRAP_BIRTH_AT, birth, sizeof birth) != sizeof birth
        || cmc_write_mem(pid, CMC_TRAP_PAGE + TRAP_BIRTH_CODE_AT, cmc_birth_code, blen)
           != (int64_t)blen) {
        e = -EFAULT;
        goto out;
    }
    uint64_t sm[6] = { CMC_TRAP_SCRATCH, CMC_TRAP_SCRATCH_SIZE, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_NORESERVE,
                       (uint64_t)-1, 0 };
    if ((e = inject6(pid, &saved, UNTRACED_IP, __NR_mmap, sm, &res))) goto out;
    if (res != (long)CMC_TRAP_SCRATCH) { e = res < 0 ? (int)res : -EEXIST; goto out; }
    /* the `syscall` of the restorer, inside the page: the filter lets the page's own
     * rt_sigaction through */
    uint64_t gadget = CMC_TRAP_PAGE + (uint64_t)(cmc_trap_restorer - cmc_trap_code) + 5;
    uint64_t sa[6] = { SIGSEGV, CMC_TRAP_PAGE + TRAP_ACTION_AT, 0, 8, 0, 0 };
    if ((e = inject6(pid, &saved, gadget, __NR_rt_sigaction, sa, &res))) goto out;
    if (res) { e = (int)res; goto out; }
    if ((e = inject(pid, &saved, gadget, __NR_prctl, PR_SET_TSC, PR_TSC_SIGSEGV, 0, &res))) goto out;
    if (res) e = (int)res;
out:
    ptrace(PTRACE_SETREGS, pid, 0, &saved);
    return e;
}

static int is_exec_stop(int st)
{
    return WIFSTOPPED(st) && (st >> 8) == (SIGTRAP | (PTRACE_EVENT_EXEC << 8));
}

/* Stop a seized tracee that is running and detach from it. */
static void interrupt_and_detach(int pid)
{
    int st;
    if (ptrace(PTRACE_INTERRUPT, pid, 0, 0) == 0)
        while (waitpid(pid, &st, __WALL) < 0 && errno == EINTR) {}
    ptrace(PTRACE_DETACH, pid, 0, 0);
}

/* Whether pid, which was let make its execve, is now held in another notified
 * call (its exec failed and it went on): a notification on the listener may be
 * another process's of the same node (a vfork parent let go by the exec). */
static int exec_failed(int pid)
{
    char path[64], buf[64];
    snprintf(path, sizeof path, "/proc/%d/syscall", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    if (buf[0] < '0' || buf[0] > '9') return 0;          /* "running" */
    long nr = strtol(buf, NULL, 10);
    return nr != SYS_execve && nr != SYS_execveat;
}

/* The exec stop is reported by SIGCHLD: wait for it with sigtimedwait (SIGCHLD
 * blocked meanwhile, so none is lost), in slices, checking between slices
 * whether the program went on instead (a failed execve makes its next
 * notified call: a notification without an exec stop means failure). */
int cmc_exec_continue(int listener, uint64_t id, int pid,
                      const unsigned char random16[16], int trap, int timeout_ms,
                      int *status)
{
    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &chld, &old);
    int r;
    if (ptrace(PTRACE_SEIZE, pid, 0, PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL)) { r = -errno; goto out; }
    r = cmc_respond(listener, id, 0, 0, 1);
    if (r) { interrupt_and_detach(pid); goto out; }
    for (int waited_ms = 0;;) {
        int st;
        pid_t w = waitpid(pid, &st, __WALL | WNOHANG);
        if (w < 0 && errno != EINTR) { r = -errno; goto out; }
        if (w == pid) {
            if (WIFEXITED(st) || WIFSIGNALED(st)) { *status = st; r = 2; goto out; }
            if (is_exec_stop(st)) {
                r = fix_auxv(pid, random16);
                if (r == 0 && trap) {
                    int e = trap_tsc(pid);
                    if (e) { *status = -e; r = 3; }
                }
                ptrace(PTRACE_DETACH, pid, 0, 0);
                goto out;
            }
            if (WIFSTOPPED(st))   /* a signal stop: pass the signal on */
                ptrace(PTRACE_CONT, pid, 0, (st >> 16) ? 0 : WSTOPSIG(st));
            continue;
        }
        struct pollfd pf = { listener, POLLIN, 0 };
        if (poll(&pf, 1, 0) > 0 && (pf.revents & POLLIN) && exec_failed(pid)) {
            interrupt_and_detach(pid);
            r = 1;
            goto out;
        }
        if (waited_ms >= timeout_ms) { interrupt_and_detach(pid); r = -ETIMEDOUT; goto out; }
        struct timespec slice = { 0, 2 * 1000 * 1000 };
        sigtimedwait(&chld, NULL, &slice);
        waited_ms += 2;
    }
out:
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return r;
}
