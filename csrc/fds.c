/* fds.c: a node's descriptors and files as cmc asks about them: a copy of one of its
 * descriptors (cmc_getfd), an epoll instance's ready events, or one filled at given
 * numbers (cmc_epoll_fill), a pipe's bytes copied (cmc_tee), kcmp, a file's identity.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "cmc_internal.h"

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
