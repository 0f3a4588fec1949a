/* notify.c: the seccomp listener and a node's memory. Notifications received
 * (cmc_recv), some answered here on the way without Python (cmc_recv_passing: opens
 * that need no emulation, the clock reads and a few calls of a node's one running
 * thread), answered (cmc_respond, cmc_addfd); the target's memory read and written.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/uio.h>

#include "cmc_internal.h"

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

/* Whether clock id clk is of a class of clocks (cmc_abi.h: bit i for clock id i). */
static int clock_in(uint32_t class, int32_t clk)
{
    return clk >= 0 && clk < 32 && ((class >> clk) & 1);
}

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
    int32_t clk = (int32_t)out->args[0];
    if (clock_in(CMC_REALTIME_CLOCKS, clk)) {
        ns = alone[2];
    } else if (clock_in(CMC_MONOTONIC_CLOCKS, clk)) {
        ns = alone[3];
    } else if (clock_in(CMC_CPUTIME_CLOCKS, clk)) {
        ns = alone[4];
    } else if (clk == CMC_CLOCK_TSC) {        /* the trap's read of the TSC: 1 GHz, monotonic */
        if (out->ip < CMC_TRAP_PAGE || out->ip >= CMC_TRAP_PAGE + CMC_TRAP_PAGE_SIZE) return 0;
        ts[0] = alone[3];
        len = 8;
        goto write;
    } else {
        return 0;                             /* the program's SIGSEGV action, a bad clock */
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
