/* cmc_helper.c: the part of cmc's kernel layer that must be C.
 *
 * Launch (fork, place fds, install the seccomp filter, hand the listener to the
 * parent, exec) must not run Python in the child; notification ioctls, memory
 * access and the ptrace dance at exec are thin wrappers that return -errno.
 * Policy (which calls are notified, what they return) lives in Python.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <elf.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "cmc_helper.h"

#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif

/* The fd on which the child sends its listener; below 500 so it is never notified. */
#define HANDOFF_FD 194

static int send_int_and_fd(int sock, int payload, int fd)
{
    char ctl[CMSG_SPACE(sizeof(int))];
    struct iovec io = { &payload, sizeof payload };
    struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1 };
    memset(ctl, 0, sizeof ctl);
    if (fd >= 0) {
        m.msg_control = ctl;
        m.msg_controllen = sizeof ctl;
        struct cmsghdr *h = CMSG_FIRSTHDR(&m);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(h), &fd, sizeof fd);
    }
    return sendmsg(sock, &m, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

static int recv_int_and_fd(int sock, int *payload, int *fd)
{
    char ctl[CMSG_SPACE(sizeof(int))];
    struct iovec io = { payload, sizeof *payload };
    struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1,
                        .msg_control = ctl, .msg_controllen = sizeof ctl };
    ssize_t n;
    do n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC); while (n < 0 && errno == EINTR);
    if (n < 0) return -errno;
    if (n != sizeof *payload) return -EPIPE;   /* the child died before sending */
    *fd = -1;
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    if (h && h->cmsg_type == SCM_RIGHTS) memcpy(fd, CMSG_DATA(h), sizeof *fd);
    return 0;
}

static int install_filter(const struct cmc_bpf_insn *filter, unsigned int len)
{
    struct sock_fprog prog = { (unsigned short)len, (struct sock_filter *)filter };
    unsigned long flags = SECCOMP_FILTER_FLAG_NEW_LISTENER;
    int fd = syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER,
                     flags | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, &prog);
    if (fd < 0 && errno == EINVAL)     /* kernel older than 5.19 */
        fd = syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
    return fd < 0 ? -errno : fd;
}

/* Runs in the forked child: async-signal-safe calls only, never returns. */
static void child(const char *path, char *const argv[], char *const envp[],
                  const char *cwd, const int fds[5],
                  const struct cmc_bpf_insn *filter, unsigned int filter_len,
                  unsigned int nofile, int handoff, pid_t parent)
{
    static const int targets[5] = { 0, 1, 2, 3, 193 };
    int tmp[5];
    int err;

    /* (in a PID namespace of its own, the parent is outside it: getppid() is 0) */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent) _exit(127);
    setpgid(0, 0);
    personality(ADDR_NO_RANDOMIZE);
    /* Move everything out of the way first, so that sources and targets may overlap. */
    for (int i = 0; i < 5; i++) {
        tmp[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 600);
        if (tmp[i] < 0) goto fail;
    }
    int hs = fcntl(handoff, F_DUPFD_CLOEXEC, 600);
    if (hs < 0) goto fail;
    for (int i = 0; i < 5; i++)
        if (dup2(tmp[i], targets[i]) < 0) goto fail;
    if (dup3(hs, HANDOFF_FD, O_CLOEXEC) < 0) goto fail;
    syscall(__NR_close_range, 4, 192, 0);
    syscall(__NR_close_range, HANDOFF_FD + 1, ~0U, 0);
    if (chdir(cwd)) goto fail;
    struct rlimit rl = { nofile, nofile };
    if (setrlimit(RLIMIT_NOFILE, &rl)) goto fail;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) goto fail;
    int listener = install_filter(filter, filter_len);
    if (listener < 0) { errno = -listener; goto fail; }
    /* From here on the filter is active: make no notified call before execve. */
    if (send_int_and_fd(HANDOFF_FD, 0, listener)) _exit(127);
    close(listener);
    close(HANDOFF_FD);
    execve(path, argv, envp);
    _exit(127);
fail:
    err = errno;
    send_int_and_fd(handoff, -err, -1);
    _exit(127);
}

/* The child shares the parent's memory until its execve completes (CLONE_VM, as
 * posix_spawn does): no page tables to copy from a large Python process, and none
 * to tear down at exec, which made fork+exec several times slower than the launch
 * floor. Hence: the child runs on a stack of its own, touches nothing of the
 * parent but the arguments (which the caller keeps alive until the exec is done:
 * the kernel reads path, argv and envp only when cmc lets the notified execve
 * run), resets every signal handler before unblocking signals, and spawns are
 * sequential (one child's exec completes before the next spawn reuses the stack). */
struct spawn_args {
    const char *path;
    char *const *argv;
    char *const *envp;
    const char *cwd;
    const int *fds;
    const struct cmc_bpf_insn *filter;
    unsigned int filter_len;
    unsigned int nofile;
    int handoff;
    pid_t parent;
    sigset_t mask;
};

#define CHILD_STACK (256 * 1024)
static char *child_stack;

/* Each node's first process gets an IPC namespace of its own where cmc may make one
 * (CAP_SYS_ADMIN): its SysV objects and POSIX message queues are then the node's,
 * shared with no other world, and gone with its last process, however cmc ends.
 * -1: not tried yet, 0: not allowed here, 1: done. */
static int private_ipc = -1;

int cmc_private_ipc(void)
{
    return private_ipc;
}

static int child_main(void *p)
{
    struct spawn_args *a = p;
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++)
        sigaction(sig, &dfl, NULL);     /* no handler of the parent may run here */
    sigset_t none;                      /* a node starts as from a shell: nothing */
    sigemptyset(&none);                 /* blocked (cmc may hold Ctrl-C meanwhile) */
    sigprocmask(SIG_SETMASK, &none, NULL);
    child(a->path, a->argv, a->envp, a->cwd, a->fds, a->filter, a->filter_len,
          a->nofile, a->handoff, a->parent);
    return 127;
}

int cmc_spawn(const char *path, char *const argv[], char *const envp[],
              const char *cwd, const int fds[5],
              const struct cmc_bpf_insn *filter, unsigned int filter_len,
              unsigned int nofile, int own_pids, int *listener_out)
{
    int sp[2];
    if (!child_stack) {
        child_stack = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (child_stack == MAP_FAILED) { child_stack = NULL; return -ENOMEM; }
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp)) return -errno;
    struct spawn_args a = { path, argv, envp, cwd, fds, filter, filter_len, nofile,
                            sp[1], own_pids ? 0 : getpid() };
    int pidns = own_pids ? CLONE_NEWPID : 0;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &a.mask);
    pid_t pid = -1;
    int e = 0;
    if (private_ipc != 0) {
        pid = clone(child_main, child_stack + CHILD_STACK,
                    CLONE_VM | CLONE_NEWIPC | pidns | SIGCHLD, &a);
        e = errno;
        if (pid >= 0)
            private_ipc = 1;
        else if (!pidns && (e == EPERM || e == EINVAL || e == ENOSPC || e == EUSERS))
            private_ipc = 0;            /* not allowed here: launch without */
    }
    if (private_ipc == 0) {
        pid = clone(child_main, child_stack + CHILD_STACK, CLONE_VM | pidns | SIGCHLD, &a);
        e = errno;
    }
    pthread_sigmask(SIG_SETMASK, &a.mask, NULL);
    close(sp[1]);
    if (pid < 0) {
        close(sp[0]);
        return -e;
    }
    int payload = -EPIPE, fd = -1;
    int r = recv_int_and_fd(sp[0], &payload, &fd);
    close(sp[0]);
    if (r == 0 && payload == 0 && fd >= 0) {
        *listener_out = fd;
        return pid;
    }
    if (fd >= 0) close(fd);
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
    return r < 0 ? r : (payload < 0 ? payload : -EPIPE);
}

int cmc_recv(int listener, struct cmc_notif *out)
{
    struct seccomp_notif n;
    for (;;) {
        memset(&n, 0, sizeof n);
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &n) == 0) break;
        if (errno != EINTR) return -errno;
    }
    out->id = n.id;
    out->pid = n.pid;
    out->nr = n.data.nr;
    out->arch = n.data.arch;
    out->ip = n.data.instruction_pointer;
    for (int i = 0; i < 6; i++) out->args[i] = n.data.args[i];
    return 0;
}

/* A path argument of the target, NUL-terminated in buf (at most len - 1 bytes),
 * read page by page so that a string ending just before an unmapped page is read.
 * 0, or -errno (-ENAMETOOLONG when it does not fit). */
static int read_path(int pid, uint64_t addr, char *buf, size_t len)
{
    size_t got = 0;
    while (got + 1 < len) {
        size_t page_left = 4096 - ((addr + got) % 4096);
        size_t want = page_left < len - 1 - got ? page_left : len - 1 - got;
        int64_t n = cmc_read_mem(pid, addr + got, buf + got, want);
        if (n <= 0) return n < 0 ? (int)n : -EFAULT;
        if (memchr(buf + got, 0, (size_t)n)) return 0;
        got += (size_t)n;
    }
    return -ENAMETOOLONG;
}

#define CMC_TRAP_PAGE 0x7e5a00000000ULL    /* cmc/kernel/linux/abi.py: TRAP_PAGE */
#define CMC_CLOCK_TSC 0x434d4354              /* abi.py: CLOCK_TSC */

/* A call of the one running thread answered here (cmc_recv_passing's alone): 1 when
 * done. */
static int alone_call(int listener, const struct cmc_notif *out, const int64_t alone[7])
{
    if ((int64_t)out->pid != alone[0]) return 0;
    if ((int64_t)out->nr == alone[5] || (int64_t)out->nr == alone[6]) {
        cmc_respond(listener, out->id, 0, 0, 1);
        return 1;
    }
    if ((int64_t)out->nr != alone[1]) return 0;
    int64_t ns, ts[2];
    uint64_t len = sizeof ts;
    switch ((int32_t)out->args[0]) {
    case 0: case 5: case 8: case 11: ns = alone[2]; break;       /* REALTIME, _COARSE, _ALARM, TAI */
    case 1: case 4: case 6: case 7: case 9: ns = alone[3]; break; /* MONOTONIC, _RAW, _COARSE, BOOTTIME, _ALARM */
    case 2: case 3: ns = alone[4]; break;                         /* CPU-time clocks */
    case CMC_CLOCK_TSC:                       /* the trap's read of the TSC: 1 GHz, monotonic */
        if (out->ip < CMC_TRAP_PAGE || out->ip >= CMC_TRAP_PAGE + 4096) return 0;
        ts[0] = alone[3];
        len = 8;
        goto write;
    default: return 0;                        /* the program's SIGSEGV action, a bad clock */
    }
    ts[0] = ns / 1000000000;
    ts[1] = ns % 1000000000;
write:;
    struct iovec l = { ts, len }, r = { (void *)(uintptr_t)out->args[1], len };
    if (process_vm_writev((int)out->pid, &l, 1, &r, 1, 0) != (ssize_t)len)
        return 0;                                                 /* EFAULT: Python says so */
    cmc_respond(listener, out->id, 0, 0, 0);
    return 1;
}

/* While a start is watched (zygote.py): a path that may lead into the node's directory
 * (relative, under `start_dir`, or through a process's cwd) is not passed through. */
static char start_dir[4096];

void cmc_watch_start(const char *dir)
{
    snprintf(start_dir, sizeof start_dir, "%s", dir ? dir : "");
}

int cmc_recv_passing(int listener, struct cmc_notif *out, const int32_t nrs[],
                     const int32_t path_args[], const int32_t flag_args[],
                     uint64_t flag_mask, int n, const char *needle,
                     const int64_t alone[7])
{
    int r = cmc_recv(listener, out);
    if (r) return r;
    if (alone && alone_call(listener, out, alone)) return 1;
    for (int i = 0; i < n; i++) {
        if (out->nr != nrs[i]) continue;
        uint64_t flags = 0;
        if (flag_args[i] >= 0) {
            flags = out->args[flag_args[i]];
        } else if (cmc_read_mem((int)out->pid, out->args[-flag_args[i] - 1], &flags,
                                sizeof flags) != (int64_t)sizeof flags) {
            return 0;
        }
        if (flags & flag_mask) return 0;
        char path[4096];
        if (read_path((int)out->pid, out->args[path_args[i]], path, sizeof path)) return 0;
        for (const char *nd = needle; *nd; nd += strlen(nd) + 1)
            if (strstr(path, nd)) return 0;
        if (start_dir[0] && (path[0] != '/' || strstr(path, start_dir) || strstr(path, "/cwd")))
            return 0;
        cmc_respond(listener, out->id, 0, 0, 1);
        return 1;
    }
    return 0;
}

int cmc_respond(int listener, uint64_t id, int64_t val, int32_t err, int cont)
{
    struct seccomp_notif_resp r;
    memset(&r, 0, sizeof r);
    r.id = id;
    if (cont) {
        r.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    } else if (err) {
        r.error = -err;
    } else {
        r.val = val;
    }
    return ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &r) ? -errno : 0;
}

int cmc_addfd(int listener, uint64_t id, int srcfd, int newfd, int cloexec, int send)
{
    struct seccomp_notif_addfd a;
    memset(&a, 0, sizeof a);
    a.id = id;
    a.srcfd = srcfd;
    if (newfd >= 0) { a.newfd = newfd; a.flags |= SECCOMP_ADDFD_FLAG_SETFD; }
    if (send) a.flags |= SECCOMP_ADDFD_FLAG_SEND;
    a.newfd_flags = cloexec ? O_CLOEXEC : 0;
    int r = ioctl(listener, SECCOMP_IOCTL_NOTIF_ADDFD, &a);
    return r < 0 ? -errno : r;
}

static int64_t proc_mem(int pid, uint64_t addr, void *buf, uint64_t len, int write)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", pid);
    int fd = open(path, (write ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) return -errno;
    ssize_t n = write ? pwrite(fd, buf, len, (off_t)addr) : pread(fd, buf, len, (off_t)addr);
    int e = errno;
    close(fd);
    return n < 0 ? -e : n;
}

int64_t cmc_read_mem(int pid, uint64_t addr, void *buf, uint64_t len)
{
    struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };
    ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n >= 0) return n;
    return proc_mem(pid, addr, buf, len, 0);
}

int64_t cmc_write_mem(int pid, uint64_t addr, const void *buf, uint64_t len)
{
    struct iovec l = { (void *)buf, len }, r = { (void *)(uintptr_t)addr, len };
    ssize_t n = process_vm_writev(pid, &l, 1, &r, 1, 0);
    if (n == (ssize_t)len) return n;
    return proc_mem(pid, addr, (void *)buf, len, 1);
}

int64_t cmc_answer_mem(int pid, uint64_t addr, const void *buf, uint64_t len)
{
    struct iovec l = { (void *)buf, len }, r = { (void *)(uintptr_t)addr, len };
    ssize_t n = process_vm_writev(pid, &l, 1, &r, 1, 0);
    return n == (ssize_t)len ? n : -EFAULT;
}

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
"    movl $0x434d4354, %edi\n"
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
"    movl $228, %eax\n"                   /* clock_gettime(CMC_CLOCK_SEGV_ACTION, &act) */
"    movl $0x434d4353, %edi\n"
"    movq %rsp, %rsi\n"
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

/* Threads born dressed (docs/design.md, "Copies of threaded nodes"): code put in the
 * trap page at TRAP_BIRTH_CODE_AT, run in a copy's stopped first thread: %r12 clones,
 * one per entry of the table at %rbx (flags, stack, child_tid, tls, result: 5 words),
 * each made at the second untraced `syscall` (TRAP_BIRTH_AT: `syscall; ret`), then
 * int3 (a SIGTRAP stop for cmc). A new thread starts at that `ret` on its own stack,
 * whose first word sends it to cmc_birth_child: set_robust_list and rseq from the
 * words that follow, if any, then rt_sigreturn from the ucontext after them -- its registers,
 * signal mask, alternate stack and FPU state at once, about to make its held call
 * again. A failed call makes a getpid there instead (notified: cmc, expecting the
 * held call, sees the fork failed). */
#define BIRTH_GADGET "0x7e5a00000fe0"   /* CMC_TRAP_PAGE + TRAP_BIRTH_AT */
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
extern const unsigned char cmc_birth_code[], cmc_birth_child[], cmc_birth_trap[],
    cmc_birth_code_end[];

#define TRAP_ACTION_AT 0x800        /* where the handler's struct sigaction is put */
/* A `syscall` the filter lets through without a notification (then `hlt`): the calls
 * cmc injects into a stopped thread are made there (cmc/kernel/linux/abi.py:
 * TRAP_UNTRACED_AT; docs/design.md, "Calls cmc makes in a node's threads") */
#define TRAP_UNTRACED_AT 0xff0
#define UNTRACED_IP (CMC_TRAP_PAGE + TRAP_UNTRACED_AT)
/* The second (`syscall; ret`), and the code that makes a copy's threads (abi.py:
 * TRAP_BIRTH_AT) */
#define TRAP_BIRTH_AT 0xfe0
#define TRAP_BIRTH_CODE_AT 0xe00
/* Below the trap page's next page: memory of the process's own for that code's table
 * and each new thread's words (abi.py: TRAP_SCRATCH) */
#define TRAP_SCRATCH (CMC_TRAP_PAGE + 4096)
#define SCRATCH_SIZE (128 * 1024)
#define BIRTH_BLOCK 1024
#define BIRTH_MAX 96

int cmc_trap_page(uint64_t *addr_out)
{
    *addr_out = CMC_TRAP_PAGE;
    return (int)(cmc_trap_code_end - cmc_trap_code);
}

static int wait_traced(int pid, int *st, int timeout_ms);
static int inject(int pid, const struct user_regs_struct *base, uint64_t ip, long nr,
                  uint64_t a0, uint64_t a1, uint64_t a2, long *result);
static int inject6(int pid, const struct user_regs_struct *base, uint64_t ip, long nr,
                   const uint64_t a[6], long *result);

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
    uint64_t mm[6] = { CMC_TRAP_PAGE, 4096, PROT_READ | PROT_EXEC,
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
    if (cmc_write_mem(pid, CMC_TRAP_PAGE + TRAP_BIRTH_AT, birth, sizeof birth) != sizeof birth
        || cmc_write_mem(pid, CMC_TRAP_PAGE + TRAP_BIRTH_CODE_AT, cmc_birth_code, blen)
           != (int64_t)blen) {
        e = -EFAULT;
        goto out;
    }
    uint64_t sm[6] = { TRAP_SCRATCH, SCRATCH_SIZE, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_NORESERVE,
                       (uint64_t)-1, 0 };
    if ((e = inject6(pid, &saved, UNTRACED_IP, __NR_mmap, sm, &res))) goto out;
    if (res != (long)TRAP_SCRATCH) { e = res < 0 ? (int)res : -EEXIST; goto out; }
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

int cmc_getfd(int pid, int fd, int pidfd)
{
    if (pidfd >= 0) {
        int r = syscall(SYS_pidfd_getfd, pidfd, fd, 0);
        return r < 0 ? -errno : r;
    }
    pidfd = syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) return -errno;
    int r = syscall(SYS_pidfd_getfd, pidfd, fd, 0);
    int e = errno;
    close(pidfd);
    return r < 0 ? -e : r;
}

int cmc_epoll_ready(int epfd, uint32_t *events, uint64_t *data, int max)
{
    struct epoll_event ev[64];
    if (max > 64) max = 64;
    int n;
    do n = epoll_wait(epfd, ev, max, 0); while (n < 0 && errno == EINTR);
    if (n < 0) return -errno;
    for (int i = 0; i < n; i++) { events[i] = ev[i].events; data[i] = ev[i].data.u64; }
    return n;
}

/* ---- fork from a snapshot (--fast) ------------------------------------------ */

/* Wait for a stop (or the end) of a traced pid, at most timeout_ms; SIGCHLD must
 * be blocked by the caller. 0 with *st, or -errno (-ETIMEDOUT). */
static int wait_traced(int pid, int *st, int timeout_ms)
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
static int inject(int pid, const struct user_regs_struct *base, uint64_t ip, long nr,
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
static int inject_born(int pid, const struct user_regs_struct *base, uint64_t ip, long nr,
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

static int inject6(int pid, const struct user_regs_struct *base, uint64_t ip, long nr,
                   const uint64_t a[6], long *result)
{
    return inject_born(pid, base, ip, nr, a, result, NULL);
}

#ifndef PTRACE_GET_RSEQ_CONFIGURATION
#define PTRACE_GET_RSEQ_CONFIGURATION 0x420f
#endif
struct rseq_config { uint64_t ptr; uint32_t size, sig, flags, pad; };

struct stack_rec { uint64_t sp; int32_t flags, pad; uint64_t size; };   /* stack_t */

/* What the kernel keeps per thread that a fork does not carry to a new thread. */
struct thread_state {
    struct user_regs_struct again;   /* about to make its held call again */
    uint64_t mask;                   /* blocked signals */
    uint64_t robust, robust_len;     /* set_robust_list */
    struct rseq_config rseq;
    struct stack_rec ss;
    int valid;                       /* read: to be set back if the fork fails */
    struct user_fpregs_struct fp;    /* x87 and SSE state (fxsave's) */
};

#define CLONE_A_THREAD (CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD \
                        | CLONE_SYSVSEM)

/* One call in each of m stopped threads at once: every thread is stepped into its call
 * (registers bases[i], at the untraced `syscall`, arguments args[i]) before any is
 * waited for, so that their round trips overlap. With len > 0, argument `arg` of each
 * points at its len bytes of bufs, put at the thread's stack pointer (what is there
 * kept and put back) and read back after the call. res[i]: each call's result. Every
 * thread stepped is waited for, whatever fails; the first failure is returned. */
static int batch_call(int m, const int *tids, const struct user_regs_struct *const *bases,
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
static int inject_with(int tid, const struct user_regs_struct *base, long nr, uint64_t a[6],
                       int arg, void *buf, size_t len, long *result)
{
    return batch_call(1, &tid, &base, nr, (uint64_t (*)[6])a, arg, buf, len, result);
}

/* What batch_call takes for up to n threads: their ids, registers, arguments, a
 * stack_t each (sigaltstack's), results. */
struct batch {
    int *ids;
    const struct user_regs_struct **bases;
    uint64_t (*args)[6];
    struct stack_rec *ss;
    long *res;
};

static void batch_free(struct batch *b)
{
    free(b->ids);
    free(b->bases);
    free(b->args);
    free(b->ss);
    free(b->res);
}

static int batch_alloc(struct batch *b, int n)
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
     * code (ERESTARTSYS, ERESTARTNOINTR, ERESTARTNOHAND); anything else means it had
     * ended, and going back into it would lose its result */
    if (!held && !((long)saved.rax <= -512 && (long)saved.rax >= -514)) return -EAGAIN;
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
static int stop_threads(int listener, int n, const int *tids, const uint64_t *held,
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
static int remap(int tid, const struct user_regs_struct *b, int nmaps,
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

static int make_threads(int child, struct thread_state *ts, const uint64_t *ctids,
                        int k, int *made, int born, int *traced);

/* The end of a fork, made or failed: a failed copy killed (`child`, its first process:
 * for a tree, its end ends every copy in its namespace) and reaped, every copy let go
 * (made[]), and the originals seized (the first `seized`, but those known: NULL, none),
 * each about to make its held call again, let go. */
static void end_fork(int child, const int *made, int nmade, const int *tids,
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

/* ---- copies of process trees (cmc_fork_tree) --------------------------------- */

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
        uint64_t at = TRAP_SCRATCH + 4096 + (uint64_t)(i - 1) * BIRTH_BLOCK;
        struct birth_block *b = (struct birth_block *)(buf + (at - TRAP_SCRATCH));
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
    if (cmc_write_mem(child, TRAP_SCRATCH, buf, len) != (int64_t)len) e = -EFAULT;
    /* its clones untraced: they run on their own */
    if (!e && ptrace(PTRACE_SETOPTIONS, child, 0, PTRACE_O_EXITKILL)) e = -errno;
    struct user_regs_struct r = ts[0].again;
    r.rip = CMC_TRAP_PAGE + TRAP_BIRTH_CODE_AT;
    r.rbx = TRAP_SCRATCH;
    r.r12 = (uint64_t)m;
    r.rsp = TRAP_SCRATCH + 4096 - 64;
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
    if (!e && cmc_read_mem(child, TRAP_SCRATCH, table, (uint64_t)m * 40) != (int64_t)m * 40)
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
static int make_threads(int child, struct thread_state *ts, const uint64_t *ctids,
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

/* In a copy stopped at its birth (registers b): its working directory cwd, its
 * mappings of the node's files made again, its process group pgid (0: its own). */
static int settle_copy(int child, const struct user_regs_struct *b, const char *cwd,
                       int nmaps, const struct cmc_remap *maps, int pgid)
{
    long res;
    int e;
    char path[256];
    size_t len = strlen(cwd) + 1;
    if (len > sizeof path) return -ENAMETOOLONG;
    memcpy(path, cwd, len);
    uint64_t a[6] = { 0, 0, 0, 0, 0, 0 };
    if ((e = inject_with(child, b, __NR_chdir, a, 0, path, len, &res))) return e;
    if (res) return (int)res;
    if ((e = remap(child, b, nmaps, maps))) return e;
    if ((e = inject6(child, b, UNTRACED_IP, __NR_setpgid,
                     (uint64_t[6]){ 0, (uint64_t)pgid, 0, 0, 0, 0 }, &res)))
        return e;
    return res ? (int)res : 0;
}

/* clone3 in stopped tracee tid with exit_signal and set_tid = {pid}: its
 * arguments lie at the thread's stack pointer while it runs, and are put back in
 * the caller and in the new process. *born: the new process, stopped at its birth. */
static int clone_with_pid(int tid, const struct user_regs_struct *b, int pid,
                          int exit_signal, int *born)
{
    struct { uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size,
             tls, set_tid, set_tid_size, cgroup; int32_t tids[2]; } args;
    unsigned char kept[sizeof args];
    memset(&args, 0, sizeof args);
    uint64_t at = b->rsp & ~(uint64_t)15;     /* what is there is put back after */
    args.exit_signal = (uint64_t)exit_signal;
    args.set_tid = at + offsetof(__typeof__(args), tids);
    args.set_tid_size = 1;
    args.tids[0] = pid;
    if (cmc_read_mem(tid, at, kept, sizeof kept) != (int64_t)sizeof kept) return -EFAULT;
    if (cmc_write_mem(tid, at, &args, sizeof args) != (int64_t)sizeof args) return -EFAULT;
    long res;
    int st, e;
    *born = 0;
    uint64_t a[6] = { at, 88, 0, 0, 0, 0 };
    e = inject_born(tid, b, UNTRACED_IP, __NR_clone3, a, &res, born);
    cmc_write_mem(tid, at, kept, sizeof kept);
    if (e) return e;
    if (res < 0 || !*born) return res < 0 ? (int)res : -ECHILD;
    if ((e = wait_traced(*born, &st, 2000))) return e;
    if (!WIFSTOPPED(st)) return -EPROTO;
    if (cmc_write_mem(*born, at, kept, sizeof kept) != (int64_t)sizeof kept) return -EFAULT;
    return 0;
}

/* The pid of process `pid` (a host pid) in the namespace of process `viewer`: the
 * number of its NSpid at the viewer's level; 0 when it cannot be read. */
static int pid_in(int viewer, int pid)
{
    int levels = 0, want = 0, got = 0;
    char path[64], line[512];
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "/proc/%d/status", k ? pid : viewer);
        FILE *f = fopen(path, "re");
        if (!f) return 0;
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "NSpid:", 6)) continue;
            int n = 0, v[40];
            char *p = line + 6;
            while (n < 40) {
                char *end;
                long x = strtol(p, &end, 10);
                if (end == p) break;
                v[n++] = (int)x;
                p = end;
            }
            if (!k) levels = n;
            else if (levels >= 1 && levels <= n) want = v[levels - 1], got = 1;
        }
        fclose(f);
    }
    return got ? want : 0;
}

/* Open path in stopped tracee tid (O_RDONLY | O_CLOEXEC): the descriptor in *fd. */
static int open_in(int tid, const struct user_regs_struct *b, const char *path,
                   long *fd)
{
    char buf[128];
    size_t len = strlen(path) + 1;
    if (len > sizeof buf) return -ENAMETOOLONG;
    memcpy(buf, path, len);
    uint64_t a[6] = { (uint64_t)AT_FDCWD, 0, O_RDONLY | O_CLOEXEC, 0, 0, 0 };
    int e = inject_with(tid, b, __NR_openat, a, 1, buf, len, fd);
    if (e) return e;
    return *fd < 0 ? (int)*fd : 0;
}

/* The copy of live child c (a stopped tracee, registers b) into the namespace whose
 * first process is root2 (a host pid), with pid `pid` there: *born, stopped. c is
 * left as it was: its namespace for children, its descriptors, its children. */
static int copy_child(int c, const struct user_regs_struct *b, int root2, int pid,
                      int spare, int *born)
{
    char path[64];
    long nsfd = -1, own = -1, res, y = 0;
    int e, st, helper = 0;
    *born = 0;
    snprintf(path, sizeof path, "/proc/%d/ns/pid", root2);
    if ((e = open_in(c, b, path, &nsfd))) goto out;
    if ((e = open_in(c, b, "/proc/self/ns/pid", &own))) goto out;
    if ((e = inject6(c, b, UNTRACED_IP, __NR_setns,
                     (uint64_t[6]){ (uint64_t)nsfd, CLONE_NEWPID, 0, 0, 0, 0 }, &res)))
        goto out;
    if (res) { e = (int)res; goto out; }
    /* the helper: no exit signal, so that c's own waits never see it, and a pid in the
     * namespace that no process of the tree has (the lowest free one may be a child's) */
    e = clone_with_pid(c, b, spare, 0, &helper);
    if (!e) y = helper ? pid_in(c, helper) : 0;
    {
        long back;
        int e2 = inject6(c, b, UNTRACED_IP, __NR_setns,
                         (uint64_t[6]){ (uint64_t)own, CLONE_NEWPID, 0, 0, 0, 0 }, &back);
        if (!e && (e2 || back)) e = e2 ? e2 : (int)back;
    }
    if (e) goto out;
    if (y <= 0 || !helper) { e = -ECHILD; goto out; }
    /* the helper, stopped at its birth, stands where c made its clone (rax 0): its
     * registers are c's */
    e = clone_with_pid(helper, b, pid, SIGCHLD, born);
    if (!e) {                       /* the copy has the helper's descriptors: not these */
        inject(*born, b, UNTRACED_IP, __NR_close, (uint64_t)nsfd, 0, 0, &res);
        inject(*born, b, UNTRACED_IP, __NR_close, (uint64_t)own, 0, 0, &res);
    }
out:
    if (helper) {                   /* killed, and reaped by c: c has no child more */
        kill(helper, SIGKILL);
        while (waitpid(helper, &st, __WALL) < 0 && errno == EINTR) {}
        long reaped;
        inject(c, b, UNTRACED_IP, __NR_wait4, (uint64_t)y, 0, __WALL, &reaped);
    }
    if (nsfd >= 0) inject(c, b, UNTRACED_IP, __NR_close, (uint64_t)nsfd, 0, 0, &res);
    if (own >= 0) inject(c, b, UNTRACED_IP, __NR_close, (uint64_t)own, 0, 0, &res);
    return e;
}

/* A zombie made again: a child of root2 (stopped, registers b) with pid `pid` in its
 * namespace, that ends with wait status `status` (an exit, or SIGKILL). */
static int copy_zombie(int root2, const struct user_regs_struct *b, int pid,
                       int status, int *born)
{
    int e, st, z;
    if ((e = clone_with_pid(root2, b, pid, SIGCHLD, &z))) return e;
    *born = z;
    if (WIFEXITED(status)) {
        struct user_regs_struct r = *b;
        r.rax = __NR_exit_group;
        r.orig_rax = (uint64_t)-1;
        r.rdi = (uint64_t)WEXITSTATUS(status);
        if (ptrace(PTRACE_SETREGS, z, 0, &r)) return -errno;
        if (ptrace(PTRACE_CONT, z, 0, 0)) return -errno;
    } else if (kill(z, SIGKILL)) {
        return -errno;
    }
    /* as its tracer: its end is reported here first, then to its parent */
    for (;;) {
        if ((e = wait_traced(z, &st, 2000))) return e;
        if (WIFEXITED(st) || WIFSIGNALED(st)) break;
        if (WIFSTOPPED(st) && ptrace(PTRACE_CONT, z, 0, 0)) return -errno;
    }
    return st == status ? 0 : -EPROTO;
}

/* The files of reopen[] that are process p's, opened again in its copy (registers b):
 * each at its descriptor, with its flags, offset and close-on-exec. */
static int reopen_files(int child, const struct user_regs_struct *b, int p,
                        int nreopen, const struct cmc_reopen *reopen)
{
    for (int i = 0; i < nreopen; i++) {
        const struct cmc_reopen *r = &reopen[i];
        if (r->proc != p) continue;
        char path[4096];
        size_t len = strlen(r->path) + 1;
        if (len > sizeof path) return -ENAMETOOLONG;
        memcpy(path, r->path, len);
        long fd, res;
        int e;
        uint64_t a[6] = { (uint64_t)AT_FDCWD, 0, (uint64_t)(r->flags | O_CLOEXEC), 0, 0, 0 };
        if ((e = inject_with(child, b, __NR_openat, a, 1, path, len, &fd)))
            return e;
        if (fd < 0) return (int)fd;
        e = inject6(child, b, UNTRACED_IP, __NR_dup3,
                    (uint64_t[6]){ (uint64_t)fd, (uint64_t)r->fd,
                    r->cloexec ? O_CLOEXEC : 0, 0, 0, 0 }, &res);
        long closed;
        inject(child, b, UNTRACED_IP, __NR_close, (uint64_t)fd, 0, 0, &closed);
        if (e) return e;
        if (res != r->fd) return res < 0 ? (int)res : -EBADF;
        if (r->pos) {
            if ((e = inject6(child, b, UNTRACED_IP, __NR_lseek,
                             (uint64_t[6]){ (uint64_t)r->fd, (uint64_t)r->pos, SEEK_SET,
                             0, 0, 0 }, &res)))
                return e;
            if (res != r->pos) return res < 0 ? (int)res : -ESPIPE;
        }
    }
    return 0;
}

int cmc_fork_tree(int listener, int np, const struct cmc_tree_proc *procs, int n,
                  const int *tids, const uint64_t *held, const uint64_t *ctids,
                  const char *cwd, int keep_sigchld, const struct cmc_remap *maps,
                  int nreopen, const struct cmc_reopen *reopen, int spare, int *out)
{
    if (np < 1 || np > 256 || n < 1 || n > 4096 || procs[0].nthreads < 1) return -EINVAL;
    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &chld, &old);
    struct thread_state *ts = calloc((size_t)n, sizeof *ts);
    int *made = calloc((size_t)n + (size_t)np, sizeof *made);
    int seized = 0, st, e = 0, root2 = 0, zombies = 0, traced;
    long res;
    if (!ts || !made) { e = -ENOMEM; goto out; }
    for (; seized < n; seized++)
        if (ptrace(PTRACE_SEIZE, tids[seized], 0,
                   PTRACE_O_TRACEFORK | PTRACE_O_TRACECLONE | PTRACE_O_EXITKILL)) {
            e = -errno;
            goto out_detach;
        }
    {
        char *first = calloc((size_t)n, 1);       /* each process's forking thread */
        if (!first) { e = -ENOMEM; goto out_restore; }
        for (int p = 0; p < np; p++)
            if (procs[p].nthreads) first[procs[p].first] = 1;
        e = stop_threads(listener, n, tids, held, ts, first, NULL);
        free(first);
        if (e) goto out_restore;
    }
    /* the root's copy: the first process of a new PID namespace */
    {
        const struct cmc_tree_proc *r = &procs[0];
        const struct user_regs_struct *b = &ts[r->first].again;
        if ((e = inject_born(tids[r->first], b, UNTRACED_IP, __NR_clone,
                             (uint64_t[6]){ CLONE_NEWPID, 0, 0, 0, 0, 0 }, &res, &root2)))
            goto out_copies;
        if (res < 0 || !root2) { e = res < 0 ? (int)res : -ECHILD; root2 = 0; goto out_copies; }
        if ((e = wait_traced(root2, &st, 2000))) goto out_copies;
        if (!WIFSTOPPED(st)) { e = -EPROTO; goto out_copies; }
        if ((e = settle_copy(root2, b, cwd, r->nmaps, maps + r->map_first, 0)))
            goto out_copies;
        if ((e = reopen_files(root2, b, 0, nreopen, reopen))) goto out_copies;
    }
    for (int p = 1; p < np; p++) {
        const struct cmc_tree_proc *c = &procs[p];
        if (!c->nthreads) continue;
        const struct user_regs_struct *b = &ts[c->first].again;
        int x = 0;
        e = copy_child(tids[c->first], b, root2, c->pid, spare, &x);
        made[c->first] = x;
        if (e) goto out_copies;
        /* in the root's group: process 1 of the namespace leads it */
        if ((e = settle_copy(x, b, cwd, c->nmaps, maps + c->map_first, 1)))
            goto out_copies;
        if ((e = reopen_files(x, b, p, nreopen, reopen))) goto out_copies;
        if ((e = make_threads(x, &ts[c->first], ctids + c->first, c->nthreads,
                              made + c->first, 0, &traced)))
            goto out_copies;
    }
    {
        const struct cmc_tree_proc *r = &procs[0];
        for (int p = 1; p < np; p++) {
            if (procs[p].nthreads) continue;
            if ((e = copy_zombie(root2, &ts[r->first].again, procs[p].pid,
                                 procs[p].status, &made[n + p])))
                goto out_copies;
            zombies++;
        }
        if (zombies && !keep_sigchld) {  /* the root saw its children end already */
            struct { uint64_t set; int64_t tv[2]; } w = { 1ULL << (SIGCHLD - 1), { 0, 0 } };
            const struct user_regs_struct *b = &ts[r->first].again;
            uint64_t at = b->rsp & ~(uint64_t)15;
            unsigned char kept[sizeof w];
            if (cmc_read_mem(root2, at, kept, sizeof kept) != (int64_t)sizeof kept
                || cmc_write_mem(root2, at, &w, sizeof w) != (int64_t)sizeof w) {
                e = -EFAULT;
                goto out_copies;
            }
            e = inject6(root2, b, UNTRACED_IP, __NR_rt_sigtimedwait,
                        (uint64_t[6]){ at, 0, at + 8, 8, 0, 0 }, &res);
            cmc_write_mem(root2, at, kept, sizeof kept);
            if (e) goto out_copies;
            if (res != SIGCHLD) { e = -EPROTO; goto out_copies; }
        }
        if ((e = make_threads(root2, &ts[r->first], ctids + r->first, r->nthreads,
                              made + r->first, 0, &traced)))
            goto out_copies;
    }
    memcpy(out, made, ((size_t)n + (size_t)np) * sizeof *out);
    root2 = 0;                       /* kept */
out_copies:
out_restore:
out_detach:
    end_fork(root2, made, n, tids, ts, seized, NULL);
out:
    free(ts);
    free(made);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return e;
}

int cmc_tee(int in, int out, int64_t len)
{
    while (len > 0) {
        ssize_t n = tee(in, out, (size_t)len, SPLICE_F_NONBLOCK);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? -errno : -EIO;
        len -= n;
    }
    return 0;
}

struct fill_args {
    int epfd, n, top;
    const int *src, *num;
    const uint32_t *events;
    const uint64_t *data;
    int *moved;                  /* the child's copies of src[], out of the way */
};

/* The child of cmc_epoll_fill: it shares cmc's memory (CLONE_VM) but has a table of
 * descriptors of its own, where each file can be put at its number. System calls
 * only, on its own stack. */
static int fill_main(void *p)
{
    const struct fill_args *a = p;
    /* out of the way of every number to be used, then each at its number */
    int ep = fcntl(a->epfd, F_DUPFD, a->top + 1);
    if (ep < 0) return 1;
    for (int i = 0; i < a->n; i++)
        if ((a->moved[i] = fcntl(a->src[i], F_DUPFD, a->top + 1)) < 0) return 1;
    for (int i = 0; i < a->n; i++) {
        struct epoll_event ev = { .events = a->events[i], .data.u64 = a->data[i] };
        if (dup2(a->moved[i], a->num[i]) < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, a->num[i], &ev))
            return 2;
    }
    return 0;
}

int cmc_epoll_fill(int epfd, int n, const int *src, const int *num, const uint32_t *events,
                   const uint64_t *data)
{
    if (n < 0 || n > 4096) return -EINVAL;
    int *moved = calloc((size_t)n + 1, sizeof *moved);
    if (!moved) return -ENOMEM;
    struct fill_args a = { epfd, n, epfd, src, num, events, data, moved };
    for (int i = 0; i < n; i++) {
        if (src[i] > a.top) a.top = src[i];
        if (num[i] > a.top) a.top = num[i];
    }
    static char *stack;
    if (!stack) {
        stack = mmap(NULL, 64 * 1024, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (stack == MAP_FAILED) { stack = NULL; free(moved); return -ENOMEM; }
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);    /* no handler of cmc's runs in the child */
    pid_t c = clone(fill_main, stack + 64 * 1024, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
    int e = c < 0 ? -errno : 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    free(moved);                                  /* the child is gone (CLONE_VFORK) */
    if (c < 0) return e;
    int st;
    while (waitpid(c, &st, 0) < 0)
        if (errno != EINTR) return -errno;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

int cmc_kcmp(int pid1, int pid2, int type, uint64_t idx1, uint64_t idx2)
{
    long r = syscall(SYS_kcmp, pid1, pid2, type, idx1, idx2);
    return r < 0 ? -errno : (int)r;
}

int cmc_tgkill(int tgid, int tid, int sig)
{
    return syscall(SYS_tgkill, tgid, tid, sig) ? -errno : 0;
}

int cmc_subreaper(void)
{
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) ? -errno : 0;
}

/* ---- the ends of node processes, away from cmc's CPU ----------------------------
 * A killed process's threads exit, and its memory is torn down, on the CPU they
 * wake on. cmc runs pinned to one CPU with its nodes: threads about to be killed are
 * moved to another (cmc_move_away), and a thread of the helper's own, there, waits
 * for their ends (cmc_bury), so that neither is cmc's time. */
static cpu_set_t only(int c)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    return one;
}

static int away_cpu(void)
{
    static int pinned = -1, away = -1;
    cpu_set_t cur;
    if (sched_getaffinity(0, sizeof cur, &cur) || CPU_COUNT(&cur) != 1) return -1;
    int mine = -1;
    for (int c = 0; c < CPU_SETSIZE && mine < 0; c++)
        if (CPU_ISSET(c, &cur)) mine = c;
    if (mine == pinned) return away;
    pinned = mine;
    away = -1;
    long n = sysconf(_SC_NPROCESSORS_CONF);
    for (long i = 1; i < n && away < 0; i++) {
        int c = (int)((mine + i) % n);
        cpu_set_t one = only(c);
        /* allowed here (a cgroup's cpuset may not have it)? asked of a thread of ours */
        if (!sched_setaffinity(0, sizeof one, &one)) away = c;
    }
    sched_setaffinity(0, sizeof cur, &cur);
    return away;
}

int cmc_move_away(const int *tids, int n)
{
    int c = away_cpu();
    if (c < 0) return 0;
    cpu_set_t one = only(c);
    for (int i = 0; i < n; i++)
        sched_setaffinity(tids[i], sizeof one, &one);      /* one gone already: ESRCH */
    return 1;
}

static int bury_fds[2] = { -1, -1 };
static pid_t bury_owner;                 /* the process whose thread reaps (not a fork's) */
static pthread_mutex_t bury_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bury_cond = PTHREAD_COND_INITIALIZER;
static long bury_pending;

static void *bury_main(void *arg)
{
    int rfd = (int)(intptr_t)arg, pid;
    for (;;) {
        ssize_t r = read(rfd, &pid, sizeof pid);
        if (r < 0 && errno == EINTR) continue;
        if (r != (ssize_t)sizeof pid) return NULL;
        while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR) {}
        pthread_mutex_lock(&bury_lock);
        bury_pending--;
        pthread_cond_broadcast(&bury_cond);
        pthread_mutex_unlock(&bury_lock);
    }
}

int cmc_bury(int pid)
{
    if (bury_owner != getpid()) {            /* first, or in a fork of the process */
        if (pipe2(bury_fds, O_CLOEXEC)) return -errno;
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);    /* no handler of cmc's runs there */
        pthread_t t;
        int e = pthread_create(&t, NULL, bury_main, (void *)(intptr_t)bury_fds[0]);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (e) {
            close(bury_fds[0]);
            close(bury_fds[1]);
            return -e;
        }
        pthread_detach(t);
        bury_owner = getpid();
        bury_pending = 0;
        int c = away_cpu();
        if (c >= 0) {
            cpu_set_t one = only(c);
            pthread_setaffinity_np(t, sizeof one, &one);
        }
    }
    pthread_mutex_lock(&bury_lock);
    bury_pending++;
    pthread_mutex_unlock(&bury_lock);
    if (write(bury_fds[1], &pid, sizeof pid) != (ssize_t)sizeof pid) {
        int e = errno;
        pthread_mutex_lock(&bury_lock);
        bury_pending--;
        pthread_mutex_unlock(&bury_lock);
        return -e;
    }
    return 0;
}

int cmc_buried(int timeout_ms)
{
    if (bury_owner != getpid()) return 0;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&bury_lock);
    while (bury_pending > 0 && !pthread_cond_timedwait(&bury_cond, &bury_lock, &until)) {}
    long left = bury_pending;
    pthread_mutex_unlock(&bury_lock);
    return (int)left;
}

int cmc_file_id(const char *path, uint64_t *out)
{
    struct statx st;
    memset(&st, 0, sizeof st);
    if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_INO | STATX_BTIME, &st) < 0)
        return -errno;
    out[0] = ((uint64_t)st.stx_dev_major << 32) | st.stx_dev_minor;
    out[1] = st.stx_ino;
    out[2] = (st.stx_mask & STATX_BTIME) ? (uint64_t)st.stx_btime.tv_sec : 0;
    out[3] = (st.stx_mask & STATX_BTIME) ? st.stx_btime.tv_nsec : 0;
    return 0;
}

/* The guard's loop: kill every group it was told of once cmc is gone. */
#define GUARD_MAX 65536
static void guard_main(int rfd)
{
    static int32_t groups[GUARD_MAX];
    int n = 0;
    for (;;) {
        int32_t rec;
        ssize_t got = read(rfd, &rec, sizeof rec);
        if (got < 0 && errno == EINTR) continue;
        if (got != (ssize_t)sizeof rec) break;           /* EOF: cmc is gone */
        if (rec > 0) {
            if (n < GUARD_MAX) groups[n++] = rec;
        } else {
            for (int i = n - 1; i >= 0; i--)
                if (groups[i] == -rec) { groups[i] = groups[--n]; break; }
        }
    }
    for (int i = 0; i < n; i++)
        kill(-groups[i], SIGKILL);
    _exit(0);
}

int cmc_guard(int *wfd_out)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC)) return -errno;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t pid = fork();
    if (pid == 0) {
        /* its own group, deaf to the terminal's and cmc's signals */
        setpgid(0, 0);
        struct sigaction ign;
        memset(&ign, 0, sizeof ign);
        ign.sa_handler = SIG_IGN;
        int deaf[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU };
        for (unsigned i = 0; i < sizeof deaf / sizeof deaf[0]; i++)
            sigaction(deaf[i], &ign, NULL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (dup2(p[0], 0) < 0) _exit(1);
        syscall(SYS_close_range, 1U, ~0U, 0U);   /* nothing of cmc's is kept open */
        guard_main(0);
    }
    int e = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(p[0]);
    if (pid < 0) { close(p[1]); return -e; }
    *wfd_out = p[1];
    return pid;
}
