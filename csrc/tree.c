/* tree.c: the copy of a process tree of depth one (cmc_fork_tree). The root's copy
 * is process 1 of a new PID namespace; each live child's copy is made there with its
 * own pid (clone3 set_tid, through a helper), an ended child not reaped yet is made
 * again as a zombie, and files a process asleep natively had open are opened again.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "cmc_internal.h"

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
