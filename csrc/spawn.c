/* spawn.c: a node's launch (cmc_spawn). A child that shares cmc's memory until its
 * exec, on a stack of its own, places the node's descriptors, installs the seccomp
 * filter Python built, hands the listener back over a socketpair and execs; the
 * launch gets an IPC namespace of its own where cmc may make one (cmc_private_ipc).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "cmc_internal.h"

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
