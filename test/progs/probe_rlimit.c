/*
 * probe_rlimit: the descriptor limit a program reads is above every descriptor it
 * is given (docs/target-contract.md, "The process"), however it reads it.
 *
 *   probe_rlimit PORT      (one node talking to itself)
 *
 * Reads RLIMIT_NOFILE five ways -- getrlimit, the raw getrlimit and prlimit64
 * system calls, sysconf(_SC_OPEN_MAX), and the "Max open files" line of
 * /proc/self/limits (also as /proc/thread-self/limits, /proc/PID/limits and
 * relative to a descriptor of /proc/self) -- and requires them to agree. Then, as
 * memcached does, sizes a table of connections by each, and indexes it by the
 * descriptor of a listener, a connected socket, an accepted one and a dup of one
 * (each must be below every limit). setrlimit: raising the soft limit to the hard
 * one shows everywhere; soft above hard is EINVAL; dup2 onto the soft limit is
 * EBADF and F_DUPFD from it EINVAL, as on Linux. Under cmc also: raising the hard
 * limit is EPERM (cmc models a process without CAP_SYS_RESOURCE; natively root may).
 */
#include "probe.h"

#include <sys/resource.h>
#include <sys/syscall.h>

static long limits_file(const char *path, int dirfd, long *hard)
{
    int fd = dirfd >= 0 ? openat(dirfd, path, O_RDONLY | O_CLOEXEC) : open(path, O_RDONLY);
    if (fd < 0) {
        fail("open(%s): %s", path, en(errno));
        return -1;
    }
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) {
        fail("read(%s): %s", path, n < 0 ? en(errno) : "empty");
        return -1;
    }
    buf[n] = 0;
    const char *line = strstr(buf, "Max open files");
    long soft = -1;
    if (line == NULL || sscanf(line + strlen("Max open files"), "%ld %ld", &soft, hard) != 2)
        fail("%s: no \"Max open files\" line with two numbers", path);
    return soft;
}

/* Every way of reading the limit gives (soft, hard). */
static void check_limits(long soft, long hard, const char *when)
{
    char name[120];
    struct rlimit rl = { 0, 0 };
    OK("getrlimit", getrlimit(RLIMIT_NOFILE, &rl));
    snprintf(name, sizeof name, "getrlimit soft %s", when);
    CHECK(name, rl.rlim_cur, soft);
    snprintf(name, sizeof name, "getrlimit hard %s", when);
    CHECK(name, rl.rlim_max, hard);
    struct rlimit raw = { 0, 0 };
    OK("syscall(getrlimit)", syscall(SYS_getrlimit, RLIMIT_NOFILE, &raw));
    snprintf(name, sizeof name, "raw getrlimit %s", when);
    CHECK(name, raw.rlim_cur * 100000 + raw.rlim_max, soft * 100000 + hard);
    struct rlimit old = { 0, 0 };
    OK("prlimit64", syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &old));
    snprintf(name, sizeof name, "prlimit64 %s", when);
    CHECK(name, old.rlim_cur * 100000 + old.rlim_max, soft * 100000 + hard);
    snprintf(name, sizeof name, "sysconf(_SC_OPEN_MAX) %s", when);
    CHECK(name, sysconf(_SC_OPEN_MAX), soft);

    char pid_path[64];
    snprintf(pid_path, sizeof pid_path, "/proc/%d/limits", (int)getpid());
    const char *paths[] = { "/proc/self/limits", "/proc/thread-self/limits", pid_path };
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        long h = -1, s = limits_file(paths[i], -1, &h);
        snprintf(name, sizeof name, "%s %s", paths[i], when);
        CHECK(name, s * 100000 + h, soft * 100000 + hard);
    }
    int dir = (int)OK("open(/proc/self)", open("/proc/self", O_RDONLY | O_DIRECTORY));
    long h = -1, s = limits_file("limits", dir, &h);
    close(dir);
    snprintf(name, sizeof name, "openat(/proc/self, limits) %s", when);
    CHECK(name, s * 100000 + h, soft * 100000 + hard);
}

struct conn { int fd; char state[60]; };

/* memcached's way: a table with one entry per possible descriptor, indexed by fd. */
static void index_by_fd(long limit, const int *fds, int n, const char *how)
{
    struct conn *table = calloc((size_t)limit, sizeof *table);
    if (table == NULL) {
        fail("calloc(%ld) for %s", limit, how);
        return;
    }
    for (int i = 0; i < n; i++) {
        if (fds[i] < 0 || fds[i] >= limit) {
            fail("descriptor %d is not below the limit %ld read by %s", fds[i], limit, how);
            continue;
        }
        table[fds[i]].fd = fds[i];
        snprintf(table[fds[i]].state, sizeof table[fds[i]].state, "conn %d", i);
    }
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0 && fds[i] < limit && table[fds[i]].fd != fds[i])
            fail("table entry of descriptor %d (by %s) was overwritten", fds[i], how);
    free(table);
}

int main(int argc, char **argv)
{
    p_init();
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    struct rlimit rl = { 0, 0 };
    OK("getrlimit", getrlimit(RLIMIT_NOFILE, &rl));
    long soft = (long)rl.rlim_cur, hard = (long)rl.rlim_max;
    check_limits(soft, hard, "at start");
    phase();

    int lfd = tcp_listener(port, 0);
    int cfd = tcp_connect(port);
    int afd = (int)OK("accept", accept(lfd, NULL, NULL));
    int dfd = (int)OK("dup", dup(cfd));
    int fds[] = { lfd, cfd, afd, dfd, 3, 193 };
    int n = (int)(sizeof fds / sizeof *fds);
    struct rlimit raw = { 0, 0 };
    OK("syscall(getrlimit)", syscall(SYS_getrlimit, RLIMIT_NOFILE, &raw));
    long h = -1;
    index_by_fd(soft, fds, n, "getrlimit");
    index_by_fd((long)raw.rlim_cur, fds, n, "the getrlimit system call");
    index_by_fd(sysconf(_SC_OPEN_MAX), fds, n, "sysconf(_SC_OPEN_MAX)");
    index_by_fd(limits_file("/proc/self/limits", -1, &h), fds, n, "/proc/self/limits");
    phase();

    /* Linux's rules at the limit */
    ERR("dup2 onto the soft limit", dup2(cfd, (int)soft), EBADF);
    ERR("F_DUPFD from the soft limit", fcntl(cfd, F_DUPFD, (int)soft), EINVAL);
    struct rlimit bad = { (rlim_t)hard + 1, (rlim_t)hard };
    ERR("setrlimit soft above hard", setrlimit(RLIMIT_NOFILE, &bad), EINVAL);
    if (under_cmc) {
        struct rlimit up = { (rlim_t)hard, (rlim_t)hard + 1 };
        ERR("setrlimit raising the hard limit", setrlimit(RLIMIT_NOFILE, &up), EPERM);
    }
    phase();

    /* raise soft to hard (Go's runtime does this at start) */
    struct rlimit raised = { (rlim_t)hard, (rlim_t)hard };
    OK("setrlimit soft = hard", setrlimit(RLIMIT_NOFILE, &raised));
    check_limits(hard, hard, "after raising soft to hard");
    struct rlimit back = { (rlim_t)soft, (rlim_t)hard };
    OK("prlimit64 back", syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, &back, NULL));
    check_limits(soft, hard, "after setting it back");
    int more = (int)OK("socket after the limit changes", socket(AF_INET, SOCK_STREAM, 0));
    CHECK("new socket below the soft limit", more < soft, 1);
    finish();
    return 0;
}
